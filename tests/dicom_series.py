"""Writing a DICOM series from a SimpleITK volume, for the DICOM reader and layout tests."""
from __future__ import annotations

import locale
from pathlib import Path

import SimpleITK as sitk


def write_series(volume: sitk.Image, folder: Path, series_uid: str, prefix: str = "slice",
                 suffix: str = ".dcm") -> list[Path]:
    """One file per slice with the tags GDCM needs to group and sort them; ``suffix=""`` writes files
    without one (as DICOM files often are).

    GDCM's writer leaves the process in the C locale (ASCII): every later ``subprocess.run(text=True)``
    of the test session would then fail on the CLI's UTF-8 progress bars, so the locale is put back.
    """
    saved = locale.setlocale(locale.LC_ALL)
    try:
        return _write(volume, folder, series_uid, prefix, suffix)
    finally:
        locale.setlocale(locale.LC_ALL, saved)


def _write(volume: sitk.Image, folder: Path, series_uid: str, prefix: str, suffix: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    writer = sitk.ImageFileWriter()
    writer.KeepOriginalImageUIDOn()
    d = volume.GetDirection()
    orientation = "\\".join(str(v) for v in (d[0], d[3], d[6], d[1], d[4], d[7]))
    files = []
    for i in range(volume.GetDepth()):
        slice_image = volume[:, :, i]
        tags = {
            "0008|0060": "MR",
            "0008|0016": "1.2.840.10008.5.1.4.1.1.4",
            "0008|0018": f"{series_uid}.{i + 1}",
            "0020|000d": "1.2.826.0.1.3680043.2.1125.99",
            "0020|000e": series_uid,
            "0020|0013": str(i + 1),
            "0020|0037": orientation,
            "0020|0032": "\\".join(str(v) for v in volume.TransformIndexToPhysicalPoint((0, 0, i))),
            "0018|0050": str(volume.GetSpacing()[2]),
        }
        for key, value in tags.items():
            slice_image.SetMetaData(key, value)
        path = folder / f"{prefix}{i:03d}.dcm"
        writer.SetFileName(str(path))
        writer.Execute(slice_image)
        if suffix != ".dcm":
            path = path.rename(path.with_suffix(suffix))
        files.append(path)
    return files
