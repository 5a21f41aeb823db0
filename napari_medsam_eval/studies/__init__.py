"""Studies that run models over a dataset, above the segmentation rooms (protocols, propagation):

* :mod:`.corrections`: the corrections protocol's simulated user, correcting the worst slice step by step;
* :mod:`.propagation_study`: a grid of propagation rules on a dataset, one encoder pass per slice.
"""
