"""What clinical DICOM costs: reading SEG and RTSTRUCT ground truth as targets, writing a DICOM SEG, beside NIfTI.

Not a timed test: run it and read the figures (docs/clinical-dicom.md, "Writing predictions as DICOM SEG").

Inputs, made in a temporary folder: a synthetic 512 x 512 x 200 CT series (one file per slice, 0.8 x 0.8 x
2.5 mm), an RTSTRUCT of 10 ROIs on it (a body outline and nine organs inside it: nested, as a planning CT's are;
each contour a 64-point polygon on every slice it crosses) and a 3-segment DICOM SEG of three of the organs
(written by us: :func:`napari_medsam_eval.io.writers.write_dicom_seg`, a frame for every slice and segment; and
the same SEG with its non-empty frames only, as 3D Slicer writes it, ``SEG, non-empty``). The NIfTI counterparts hold the same
masks: the label map our reader decodes the RTSTRUCT to (a value per set of ROIs, each ROI a target uniting
its values), and the three organs' label map.

Measured, each in a fresh child process (imports done first; the reference case's pixels never touched, so the
peak is the operation's own), the median of ``--repeat`` runs:

* reading as targets: ``read_label(file, case)`` and every target's mask (what a run scores), SEG and RTSTRUCT
  against the same masks' NIfTI (:func:`read_label` and the same targets' masks);
* writing a 3-segment SEG (built, written, read back and compared, as every mask is) against writing the same
  masks' label map as NIfTI (``.nii.gz``, read back and compared).

Each child does the operation twice: the table's seconds and peak are the second time's (what each further
case costs); ``first`` columns give the first time's seconds, a library's one-time set-up in a process
included (highdicom loads its tables of the DICOM standard, about 3 s, when it builds its first SEG).

Peak memory is the operation's growth of the resident set (VmHWM after ``clear_refs``, else ``ru_maxrss``;
the first time's freed memory handed back to the OS with ``malloc_trim`` before the second),
set against the decoded masks (one byte a voxel a target). Targets (issue 66): reading a SEG or RTSTRUCT at most
3x the NIfTI path's time, memory at most 2x the decoded masks.

    python benchmarks/dicom_io.py [--slices 200] [--size 512] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import locale
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_line  # noqa: E402

SPACING = (0.8, 0.8, 2.5)
ORIGIN = (-204.8, -204.8, -250.0)
UID = "1.2.826.0.1.3680043.2.1125.66"
#: the ten ROIs: name, centre and radii as fractions of the volume (z, y, x); the first holds the others
ROIS = [("body", (0.5, 0.5, 0.5), (0.48, 0.42, 0.45)), ("liver", (0.45, 0.45, 0.32), (0.2, 0.15, 0.12)),
        ("spleen", (0.45, 0.45, 0.72), (0.1, 0.08, 0.06)), ("kidney_l", (0.5, 0.62, 0.68), (0.08, 0.06, 0.05)),
        ("kidney_r", (0.5, 0.62, 0.32), (0.08, 0.06, 0.05)), ("aorta", (0.5, 0.58, 0.5), (0.4, 0.03, 0.03)),
        ("bladder", (0.85, 0.5, 0.5), (0.06, 0.08, 0.08)), ("gtv", (0.45, 0.42, 0.3), (0.04, 0.04, 0.04)),
        ("ptv", (0.45, 0.42, 0.3), (0.07, 0.07, 0.07)), ("spine", (0.5, 0.75, 0.5), (0.45, 0.04, 0.04))]
#: the SEG's three segments (disjoint organs, so one NIfTI label map holds them too)
SEG_ROIS = ("liver", "spleen", "bladder")


def write_series(folder: Path, slices: int, size: int) -> None:
    """A smooth synthetic CT (int16) as one DICOM file per slice, with what a planning CT carries."""
    import SimpleITK as sitk

    saved = locale.setlocale(locale.LC_ALL)  # GDCM's writer leaves the C locale behind
    try:
        folder.mkdir(parents=True)
        z, y, x = np.ogrid[:slices, :size, :size]
        body = ((y - size / 2) / (0.42 * size)) ** 2 + ((x - size / 2) / (0.45 * size)) ** 2 <= 1
        writer = sitk.ImageFileWriter()
        writer.KeepOriginalImageUIDOn()
        for i in range(slices):
            plane = np.where(body[0], 40 + (i % 7) * 3, -1000).astype(np.int16)
            image = sitk.GetImageFromArray(plane)
            image.SetSpacing(SPACING[:2])
            position = (ORIGIN[0], ORIGIN[1], ORIGIN[2] + i * SPACING[2])
            tags = {"0008|0060": "CT", "0008|0016": "1.2.840.10008.5.1.4.1.1.2", "0008|0018": f"{UID}.1.{i + 1}",
                    "0010|0020": "BENCH", "0020|000d": f"{UID}.0", "0020|000e": f"{UID}.1", "0020|0052": f"{UID}.9",
                    "0020|0013": str(i + 1), "0020|0037": "1\\0\\0\\0\\1\\0", "0018|0050": str(SPACING[2]),
                    "0020|0032": "\\".join(str(v) for v in position)}
            for key, value in tags.items():
                image.SetMetaData(key, value)
            writer.SetFileName(str(folder / f"ct{i:04d}.dcm"))
            writer.Execute(image)
    finally:
        locale.setlocale(locale.LC_ALL, saved)


def write_rtstruct(path: Path, series: Path, slices: int, size: int) -> None:
    """The ten ROIs as an RTSTRUCT: each a 64-point closed planar contour on every slice its ellipsoid crosses."""
    import pydicom
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.sequence import Sequence
    from pydicom.uid import ExplicitVRLittleEndian

    from napari_medsam_eval.io.dicom import dicom_series_files

    files, _ = dicom_series_files(series)
    sop_uids = [str(pydicom.dcmread(f, stop_before_pixels=True).SOPInstanceUID) for f in files]
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.481.3"
    meta.MediaStorageSOPInstanceUID = f"{UID}.3.1"
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID, ds.Modality = meta.MediaStorageSOPClassUID, f"{UID}.3.1", "RTSTRUCT"
    ds.PatientID, ds.StudyInstanceUID, ds.SeriesInstanceUID = "BENCH", f"{UID}.0", f"{UID}.3"
    ds.StructureSetLabel = "bench"
    images = Sequence([_item(ReferencedSOPClassUID="1.2.840.10008.5.1.4.1.1.2", ReferencedSOPInstanceUID=u)
                       for u in sop_uids])
    series_item = _item(SeriesInstanceUID=f"{UID}.1", ContourImageSequence=images)
    study = _item(ReferencedSOPClassUID="1.2.840.10008.3.1.2.3.1", ReferencedSOPInstanceUID=f"{UID}.0",
                  RTReferencedSeriesSequence=Sequence([series_item]))
    ds.ReferencedFrameOfReferenceSequence = Sequence([_item(FrameOfReferenceUID=f"{UID}.9",
                                                            RTReferencedStudySequence=Sequence([study]))])
    rois, contours = [], []
    angles = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    for number, (name, centre, radii) in enumerate(ROIS, start=1):
        rois.append(_item(ROINumber=number, ReferencedFrameOfReferenceUID=f"{UID}.9", ROIName=name,
                          ROIGenerationAlgorithm="MANUAL"))
        items = []
        for i in range(slices):
            t = 1 - ((i - centre[0] * slices) / (radii[0] * slices)) ** 2
            if t <= 0:
                continue
            rows = centre[1] * size + radii[1] * size * np.sqrt(t) * np.sin(angles)
            cols = centre[2] * size + radii[2] * size * np.sqrt(t) * np.cos(angles)
            points = np.stack([ORIGIN[0] + cols * SPACING[0], ORIGIN[1] + rows * SPACING[1],
                               np.full(cols.shape, ORIGIN[2] + i * SPACING[2])], axis=1)
            items.append(_item(ContourGeometricType="CLOSED_PLANAR", NumberOfContourPoints=len(points),
                               ContourData=[f"{v:.3f}" for v in points.ravel()],
                               ContourImageSequence=Sequence([_item(
                                   ReferencedSOPClassUID="1.2.840.10008.5.1.4.1.1.2",
                                   ReferencedSOPInstanceUID=sop_uids[i])])))
        contours.append(_item(ReferencedROINumber=number, ROIDisplayColor=[255, 0, 0],
                              ContourSequence=Sequence(items)))
    ds.StructureSetROISequence, ds.ROIContourSequence = Sequence(rois), Sequence(contours)
    ds.save_as(path, enforce_file_format=True)


def _item(**values):
    from pydicom.dataset import Dataset

    item = Dataset()
    for key, value in values.items():
        setattr(item, key, value)
    return item


def reference_case(info: dict):
    """The series' Case without its pixels (zeros the OS never pages in), so a child's peak is the operation's."""
    from napari_medsam_eval.core.case import Case, Spacing

    image = np.zeros(tuple(info["shape"]), dtype=np.int16)
    return Case(image=image, label=None, spacing=Spacing.from_xyz(info["metadata"]["spacing_xyz"]), kind="volume",
                case_id="bench", modality="CT", metadata=dict(info["metadata"]))


def _peak_reset() -> int:
    """The resident set now (bytes), after resetting the peak where Linux allows it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _status("VmRSS")


def _give_back() -> None:
    """Freed memory handed back to the OS (glibc keeps it otherwise), so the next peak is the next operation's."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(task: str, kind: str, work: Path) -> dict:
    """One measurement in this (fresh) process: the operation done twice, the first time's seconds (``first``:
    a library's one-time set-up included, highdicom loading its tables of the standard) and the second's, with
    the second's peak growth of the resident set."""
    import pydicom  # noqa: F401 - imports before the clock starts, as in a running session
    import highdicom  # noqa: F401
    import SimpleITK  # noqa: F401

    from napari_medsam_eval.core.targets import Target
    from napari_medsam_eval.io import read_label
    from napari_medsam_eval.io.dicom_seg_write import SegAlgorithm, SegSegment
    from napari_medsam_eval.io.writers import write_dicom_seg, write_mask

    info = json.loads((work / "info.json").read_text())
    case = reference_case(info)
    if task == "write":
        with np.load(work / "seg_masks.npz") as data:
            masks = {name: data[name] for name in SEG_ROIS}
        labels = np.zeros(case.spatial_shape, dtype=np.uint8)
        for value, name in enumerate(SEG_ROIS, start=1):
            labels[masks[name]] = value
        segments = [SegSegment(name, masks[name], value) for value, name in enumerate(SEG_ROIS, start=1)]
        out = work / "out"
        out.mkdir(exist_ok=True)

        def operation() -> int:
            if kind == "seg":
                write_dicom_seg(segments, out / "pred.dcm", case, SegAlgorithm("bench", "none"))
            else:
                write_mask(labels, out / "pred.nii.gz", case)
            return len(SEG_ROIS) * labels.size
    else:
        path = {"seg": work / "seg.dcm", "seg_sparse": work / "seg_sparse.dcm", "rtstruct": work / "rtstruct.dcm",
                "seg_nifti": work / "seg_label.nii.gz", "rtstruct_nifti": work / "rtstruct_label.nii.gz"}[kind]
        targets = [Target(t["name"], tuple(t["labels"]), key=t["key"])
                   for t in info["targets"]["seg" if kind.startswith("seg") else "rtstruct"]]

        def operation() -> int:
            label = read_label(path, case)
            masks = [target.mask(label.array) for target in (label.info.get("targets") or targets)]
            assert len(masks) == len(targets), (kind, len(masks))
            return sum(m.size for m in masks)

    start = time.perf_counter()
    operation()
    first = time.perf_counter() - start
    _give_back()
    before = _peak_reset()
    start = time.perf_counter()
    decoded = operation()
    seconds = time.perf_counter() - start
    return {"first": first, "seconds": seconds, "peak": _status("VmHWM") - before, "decoded": decoded}


def measure(task: str, kind: str, work: Path, repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, __file__, "--child", task, kind, str(work)], capture_output=True,
                              text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {"seconds": statistics.median(r["seconds"] for r in runs),
            "first": statistics.median(r["first"] for r in runs),
            "peak": statistics.median(r["peak"] for r in runs), "decoded": runs[0]["decoded"]}


def prepare(work: Path, slices: int, size: int) -> None:
    """The series, the RTSTRUCT, the SEG and their NIfTI counterparts, and what the children need to know."""
    from napari_medsam_eval.io import read_case, read_label
    from napari_medsam_eval.io.dicom_seg_write import SegAlgorithm, SegSegment, seg_dataset, source_headers
    from napari_medsam_eval.io.writers import write_dicom_seg, write_mask

    start = time.perf_counter()
    write_series(work / "series", slices, size)
    write_rtstruct(work / "rtstruct.dcm", work / "series", slices, size)
    case = read_case(work / "series")
    rt = read_label(work / "rtstruct.dcm", case)
    targets = {"rtstruct": [{"name": t.name, "labels": list(t.labels), "key": t.key} for t in rt.info["targets"]]}
    masks = {t.name: t.mask(rt.array) for t in rt.info["targets"]}
    np.savez(work / "seg_masks.npz", **{name: masks[name] for name in SEG_ROIS})
    segments = [SegSegment(name, masks[name], v) for v, name in enumerate(SEG_ROIS, 1)]
    write_dicom_seg(segments, work / "seg.dcm", case, SegAlgorithm("bench", "none"))
    seg_dataset(segments, source_headers(case), SegAlgorithm("bench", "none"), every_slice=False).save_as(
        work / "seg_sparse.dcm")  # as 3D Slicer writes: only the frames a segment has voxels on
    seg_labels = np.zeros(case.spatial_shape, dtype=np.uint8)
    for value, name in enumerate(SEG_ROIS, start=1):
        seg_labels[masks[name]] = value
    targets["seg"] = [{"name": name, "labels": [v], "key": v} for v, name in enumerate(SEG_ROIS, 1)]
    write_mask(rt.array, work / "rtstruct_label.nii.gz", case)
    write_mask(seg_labels, work / "seg_label.nii.gz", case)
    metadata = {k: case.metadata[k] for k in ("origin", "direction", "spacing_xyz", "dicom_series_folder",
                                              "dicom_series_id", "image_path")}
    (work / "info.json").write_text(json.dumps({"shape": list(case.spatial_shape), "metadata": metadata,
                                                "targets": targets}, default=list))
    sizes = {p.name: p.stat().st_size for p in work.iterdir() if p.is_file()}
    print(f"inputs made in {time.perf_counter() - start:.1f} s: {slices} slices of {size} x {size}; "
          + ", ".join(f"{n} {b / 2**20:.1f} MiB" for n, b in sorted(sizes.items()) if not n.endswith(".json")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slices", type=int, default=200)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=3, metavar=("TASK", "KIND", "WORK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], Path(args.child[2]))))
        return 0
    print(cpu_line())
    with tempfile.TemporaryDirectory(prefix="dicom_io_") as folder:
        work = Path(folder)
        prepare(work, args.slices, args.size)
        rows = [("read", "rtstruct", "rtstruct_nifti", "RTSTRUCT, 10 ROIs"),
                ("read", "seg", "seg_nifti", "SEG, 3 segments"), ("read", "seg_sparse", "seg_nifti", "SEG, non-empty"),
                ("write", "seg", "nifti", "SEG, 3 segments")]
        print(f"{'what':<28}{'DICOM s':>9}{'NIfTI s':>9}{'ratio':>7}{'DICOM peak MiB':>16}{'masks MiB':>11}"
              f"{'peak/masks':>12}{'NIfTI peak MiB':>16}{'first DICOM s':>15}{'first NIfTI s':>15}")
        verdicts = []
        for task, kind, baseline, words in rows:
            ours, theirs = measure(task, kind, work, args.repeat), measure(task, baseline, work, args.repeat)
            ratio, memory = ours["seconds"] / theirs["seconds"], ours["peak"] / ours["decoded"]
            print(f"{task + ' ' + words:<28}{ours['seconds']:>9.2f}{theirs['seconds']:>9.2f}{ratio:>7.2f}"
                  f"{ours['peak'] / 2**20:>16.0f}{ours['decoded'] / 2**20:>11.0f}{memory:>12.2f}"
                  f"{theirs['peak'] / 2**20:>16.0f}{ours['first']:>15.2f}{theirs['first']:>15.2f}")
            if task == "read":
                verdicts.append(f"{words}: time {ratio:.2f}x NIfTI ({'<=' if ratio <= 3 else '>'} 3x), memory "
                                f"{memory:.2f}x the decoded masks ({'<=' if memory <= 2 else '>'} 2x)")
        print("targets (issue 66):", "; ".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
