"""An interactive segmentation session, without Qt or napari: what the Segment widget drives.

- :mod:`.session`: :class:`~.session.Session` (one image, one model: segment a slice, propagate, correct)
- :mod:`.segmenter`: segmenting a prompt as the user did, from a snapshot of a session (the prompt log's use)
- :mod:`.attempts`: every attempt of a session, for undo and "what changed"
- :mod:`.encode_ahead`: encoding a volume's slices ahead of the prompts, nearest the slice on screen first
- :mod:`.first_look`: a quick first look at a cheaper precision until the model has every slice encoded
"""
