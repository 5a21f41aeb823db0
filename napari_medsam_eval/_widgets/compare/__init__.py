"""The Compare dock: layer choices, metrics, the per-slice plot, prompt sensitivity."""
