"""The foundations every other room stands on: no Qt, no napari, and no import from another room.

- :mod:`.errors`: the package's exceptions (:class:`~.errors.MedsamEvalError` and its kinds)
- :mod:`.case`: :class:`~.case.Case` (image, labels, spacing, kind) and :class:`~.case.Spacing`
- :mod:`.prompt`: :class:`~.prompt.Prompt` (box, points, slice, target) and its checks
- :mod:`.anchor_prompts`: the anchors that are not a box or points (absent, painted)
- :mod:`.options`: typed options of models and protocols (``key=value``)
- :mod:`.progress`: progress callbacks and cancellation
- :mod:`.intensity`: raw intensities to uint8 (CT window, MR percentiles), as the challenge data were made
- :mod:`.postprocess`: what a protocol asks to be done to a propagated mask (largest component, mask seed)
- :mod:`.checksum`, :mod:`.cache`, :mod:`.ownership`: SHA-256 of files, the package's cache folder, no output
  overlapping an input
- :mod:`.palette`: every colour the package draws, named by its meaning (Okabe-Ito)
- :mod:`.glossary`: the field's terms in plain words (the docks' tooltips, some of the CLI's help)
"""
