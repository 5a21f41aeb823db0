"""Scoring masks against ground truth: no Qt, no napari, no model.

- :mod:`.metrics`: DSC, NSD, HD95, per-slice DSC (:func:`~.metrics.score_pair`)
- :mod:`.distance_transform`: the exact Euclidean distance transform the surface metrics use
- :mod:`.scoring`: one case's prediction scored per target, as the benchmark rows and the CLI do
- :mod:`.aggregate`: per-task summaries of a table of scores
- :mod:`.mask_comparison`: prediction vs ground truth / run A vs run B overlays, the most different slice
- :mod:`.interaction_effort`: NoC@t and the DSC-vs-interactions curve of the corrections protocol
"""
