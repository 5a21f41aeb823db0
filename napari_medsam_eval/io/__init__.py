"""Reading medical images, videos and their labels into :class:`~napari_medsam_eval.core.case.Case`, and writing masks.

Modules (no Qt, no napari):

- :mod:`.reader`: :func:`read_case` dispatch, :func:`read_label`, :func:`pair_image_label`
- :mod:`.sitk_io`: NIfTI, NRRD, MetaImage through SimpleITK; :mod:`.dicom`: DICOM series folders
- :mod:`.npz_io`: MedSAM/CVPR npz (spacing stored x, y, z)
- :mod:`.image2d`: PNG/JPEG/TIFF images and the mask rules; :mod:`.video`: frame folders, mp4, NIfTI sequences
- :mod:`.validation`: value and geometry checks and their tolerances
- :mod:`.writers`: :func:`write_mask` (NIfTI/NRRD/MHA, npz, PNG), atomically
"""
from __future__ import annotations

from .dicom import read_dicom_case
from .formats import detect_format, natural_sort_key
from .image2d import read_image2d, read_image_rgb, read_image_with_masks, read_mask2d, read_mask_gray
from .npz_io import guess_modality, read_medsam_npz
from .reader import LabelFile, pair_image_label, read_case, read_image, read_label
from .sitk_io import read_sitk_case
from .validation import GeometryWarning, to_label_array
from .video import read_frame_folder, read_mask_folder, read_nifti_sequence, read_video_file
from .writers import MASK_SUFFIXES, write_mask

__all__ = [
    "GeometryWarning",
    "LabelFile",
    "MASK_SUFFIXES",
    "detect_format",
    "guess_modality",
    "natural_sort_key",
    "pair_image_label",
    "read_case",
    "read_dicom_case",
    "read_frame_folder",
    "read_image",
    "read_image2d",
    "read_image_rgb",
    "read_image_with_masks",
    "read_label",
    "read_mask2d",
    "read_mask_gray",
    "read_mask_folder",
    "read_medsam_npz",
    "read_nifti_sequence",
    "read_sitk_case",
    "read_video_file",
    "to_label_array",
    "write_mask",
]
