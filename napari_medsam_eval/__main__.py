"""``python -m napari_medsam_eval`` runs the CLI."""
import sys

from .cli import main

sys.exit(main())
