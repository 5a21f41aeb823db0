"""Studies that run models over a dataset, above the segmentation rooms (protocols, propagation):

* :mod:`.propagation_study`: a grid of propagation rules on a dataset, one encoder pass per slice.
"""
