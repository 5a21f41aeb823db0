"""``python -m napari_medsam_eval`` runs the CLI."""
from .cli import console_main

console_main()
