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

from napari_medsam_eval.core.lazy_exports import lazy_exports

#: each name's module, imported when first asked for: a module that needs one reader (napari's reader
#: deciding from a file's name alone, the formats table) does not load SimpleITK, PyAV and the rest
HOMES = {
    "read_dicom_case": "dicom",
    "detect_format": "formats", "natural_sort_key": "formats",
    **{name: "image2d" for name in ("read_image2d", "read_image_rgb", "read_image_with_masks", "read_mask2d",
                                    "read_mask_gray")},
    "guess_modality": "npz_io", "read_medsam_npz": "npz_io",
    **{name: "reader" for name in ("LabelFile", "pair_image_label", "read_case", "read_image", "read_label")},
    "read_sitk_case": "sitk_io",
    "GeometryWarning": "validation", "to_label_array": "validation",
    **{name: "video" for name in ("read_frame_folder", "read_mask_folder", "read_nifti_sequence", "read_video_file")},
    "MASK_SUFFIXES": "writers", "write_mask": "writers",
}

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

__getattr__, __dir__ = lazy_exports(__name__, HOMES, __all__)
