"""The Segment dock: image and model, prompts, objects, propagation, corrections, the prompt log."""
