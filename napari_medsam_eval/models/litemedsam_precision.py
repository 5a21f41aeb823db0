"""Precision as a LiteMedSAM option: ``fp32`` (default), ``bf16`` or ``int8`` image encoder.

* ``fp32``: the exported OpenVINO encoder at fp32 inference precision (or eager torch): the reference.
* ``bf16``: the same export compiled with OpenVINO's bf16 inference precision (torch autocast on a CUDA
  GPU); faster on CPUs with AVX-512 BF16, but the embedding moves by ~4 % and masks move.
* ``int8``: the export quantized after training by NNCF (``nncf.quantize``, :data:`QUANT_RECIPE`)
  on a *calibration set*, run by OpenVINO: int8, with bf16 for what stays unquantized (attention
  softmax, normalisations, the layers kept out of quantization: :func:`_ignored_scope`) on a CPU
  with bf16 instructions, fp32 for that part elsewhere (:func:`unquantized_precision`; the engine's
  ``describe()`` says which, and why).

The calibration set must not be the data being evaluated: a model calibrated on its test
images is tuned to them. The default (:data:`DEFAULT_CALIBRATION`, under
``$MEDSAM_EVAL_SHARED_DATA``) is 21 slices of the three shared sets *no study evaluates*, one per
modality of the evaluated sets: the 5 SAM-Med2D CT slices (CT, as DeepLesion), the first 8
Kvasir-SEG colonoscopy images (endoscopy, as CVC-ClinicDB) and 8 axial slices of the BraTS 2021
FLAIR volume (brain MRI, as the hippocampus set). ``calibration`` (or ``$MEDSAM_EVAL_CALIBRATION``)
names another dataset folder (any layout ``medsam-eval run`` reads). :meth:`CalibrationSet.check_apart`
refuses a run whose dataset shares a file (by path or SHA-256) or a folder with the calibration set
(:class:`CalibrationOverlapError`); ``medsam-eval run`` and ``segment`` call it before any work.

The INT8 export is cached beside the fp32 one under a key holding ``int8``, the recipe and the
calibration set's id (a hash of its files, their SHA-256 and the selection): a change of any of
them makes a new export, and the precision and the calibration id enter the engine's
``describe()`` and so every embedding-store key: fp32, bf16 and int8 embeddings never mix.
Its manifest holds its own output on the fixed check input (checked at every load, like fp32's)
and how far that lies from the torch encoder's on real calibration slices, both measured at the
precision the unquantized part runs at (bf16 or fp32, also part of the key).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch

from ..core.errors import MedsamEvalError, OptionError
from .checkpoint_files import ModelOptionError
from .litemedsam_engines import ExportVariant, OpenVINOEncoder, _export_openvino, _verified_entry, to_batch
from .litemedsam_fingerprint import fingerprint_input, summarize
from . import cpu_precisions
from .cpu_precisions import (INT8_DOT_PRODUCT, PRECISIONS, cpu_has_bf16, int8_dot_product,  # noqa: F401 - re-exported
                             openvino_cpu_capabilities, precisions_here)

#: the ``precision`` option's values
#: the quantization recipe's version: part of the INT8 export's cache key
QUANT_RECIPE = "nncf-ptq-transformer-mixed-keep-patch-neck-stage2fc2-v2"
#: (folder under $MEDSAM_EVAL_SHARED_DATA, cases taken in layout order, slices per volume)
DEFAULT_CALIBRATION = (("sammed2d_ct_2d", 5, 1), ("kvasir_seg_2d", 8, 1), ("brats2021_flair", 1, 8))
#: slices per case of a calibration folder given by the user (volumes; 2D images give one)
SLICES_PER_CASE = 4
#: cases read from a calibration folder given by the user
MAX_CASES = 24
CALIBRATION_ENV = "MEDSAM_EVAL_CALIBRATION"
#: an INT8 export further than this (relative L2) from the torch encoder on calibration slices is refused:
#: measured 0.15-0.34 for a sound one (recipe v2, bf16 for the rest: 0.15-0.19 on 14 DeepLesion and
#: hippocampus slices); a broken one (wrong source graph, failed calibration) gives ~1
INT8_ERROR_LIMIT = 0.6


class CalibrationOverlapError(OptionError):
    """The INT8 calibration set and the evaluated data share files or folders."""


class QuantizationError(MedsamEvalError):
    """The quantized encoder is too far from the torch encoder to be used."""


def resolve_precision(precision: str | None, dtype: str | None = None) -> str:
    """The precision from the ``precision`` option and the older ``dtype`` (bfloat16 = bf16); they must agree."""
    from_dtype = "bf16" if dtype in ("bfloat16", "bf16") else None
    if precision is None:
        return from_dtype or "fp32"
    name = str(precision).strip().lower()
    if name not in PRECISIONS:
        raise ModelOptionError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if from_dtype is not None and name != from_dtype:
        raise ModelOptionError(f"precision {name} and dtype {dtype} disagree: give precision only")
    return name


def _sha256(path: Path) -> str:
    from ..core.checksum import sha256_file

    return sha256_file(path)


@dataclass
class CalibrationSet:
    """The slices INT8 is calibrated on: ``sources`` are (folder, cases, slices per case)."""

    sources: list[tuple[Path, int, int]]
    files: list[tuple[Path, int, str]] = field(default_factory=list)  # (path, size, sha256)

    def __post_init__(self) -> None:
        from ..datasets import resolve_layout

        if not self.files:
            for folder, cases, _ in self.sources:
                refs = resolve_layout(folder, None).list_cases(folder)[:cases]
                for path in sorted({p for ref in refs for p in ref.files()}):
                    self.files.append((path, path.stat().st_size, _sha256(path)))

    @property
    def id(self) -> str:
        """16 hex digits: the recipe, the selection, and every file's name and SHA-256."""
        digest = hashlib.sha256(QUANT_RECIPE.encode())
        for folder, cases, per_case in self.sources:
            digest.update(f"|{folder.name}:{cases}:{per_case}".encode())
        for path, _, sha in self.files:
            digest.update(f"|{path.name}:{sha}".encode())
        return digest.hexdigest()[:16]

    def describe(self) -> dict[str, object]:
        return {"id": self.id, "recipe": QUANT_RECIPE,
                "sources": [{"folder": str(f), "cases": c, "slices_per_case": s} for f, c, s in self.sources],
                "files": len(self.files)}

    def batches(self) -> list[np.ndarray]:
        """The calibration inputs: every selected slice, prepared and preprocessed as LiteMedSAM's encoder sees it."""
        from ..datasets import resolve_layout
        from ..core.intensity import case_intensity, prepare_image
        from ..io import read_case
        from .litemedsam_preprocess import preprocess_slice

        out = []
        for folder, cases, per_case in self.sources:
            for ref in resolve_layout(folder, None).list_cases(folder)[:cases]:
                image_path = ref.paths.get("image")
                # the image alone: calibration needs no label (a SAM-Med2D image may have no mask file)
                case = read_case(image_path) if isinstance(image_path, str) else resolve_layout(folder, None).load(ref)
                image = prepare_image(case.image, case.kind, case.modality, None, case_intensity(case.metadata))
                if case.kind == "image":
                    slices = [image]
                else:  # evenly over the middle 40 % of a volume (the body, not its empty ends), all of a video
                    lo, hi = (0.3, 0.7) if case.kind == "volume" else (0.0, 1.0)
                    picks = np.linspace(lo * (len(image) - 1), hi * (len(image) - 1), per_case).round().astype(int)
                    slices = [image[z] for z in sorted(set(picks.tolist()))]
                out.extend(to_batch(preprocess_slice(s)[0]) for s in slices)
        return out

    def check_apart(self, evaluated: Iterable[str | Path], dataset: str | Path | None = None) -> None:
        """:class:`CalibrationOverlapError` when the evaluated files (or the ``dataset`` folder) are calibration data."""
        ours = {p.resolve(): p for p, _, _ in self.files}
        by_size: dict[int, set[str]] = {}
        for _, size, sha in self.files:
            by_size.setdefault(size, set()).add(sha)
        folders = [f.resolve() for f, _, _ in self.sources]
        if dataset is not None:
            root = Path(dataset).resolve()
            for folder in folders:
                if root == folder or root in folder.parents or folder in root.parents:
                    self._refuse(f"the evaluated folder {dataset} and the calibration folder {folder} overlap")
        for item in evaluated:
            path = Path(item)
            if path.resolve() in ours:
                self._refuse(f"{path} is one of its files")
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size in by_size and _sha256(path) in by_size[size]:
                self._refuse(f"{path} has the content of one of its files")

    def _refuse(self, why: str) -> None:
        names = ", ".join(f.name for f, _, _ in self.sources)
        raise CalibrationOverlapError(
            f"precision int8: the INT8 encoder was calibrated on the data being evaluated ({why}; calibration "
            f"set {self.id}: {names}); a model calibrated on its test data overstates its accuracy: evaluate "
            f"other data, or calibrate on another folder (model option calibration, or ${CALIBRATION_ENV})")


def calibration_set(calibration: str | Path | None = None) -> CalibrationSet:
    """The calibration set: a folder given (option, else ``$MEDSAM_EVAL_CALIBRATION``), else the default
    selection of the shared data (``$MEDSAM_EVAL_SHARED_DATA``); :class:`ModelOptionError` when there is none."""
    given = calibration or os.environ.get(CALIBRATION_ENV)
    if given:
        folder = Path(given).expanduser()
        if not folder.is_dir():
            raise ModelOptionError(f"calibration must be a dataset folder, got {str(given)!r} (not a folder)")
        return CalibrationSet([(folder.resolve(), MAX_CASES, SLICES_PER_CASE)])
    shared = os.environ.get("MEDSAM_EVAL_SHARED_DATA")
    folders = [(Path(shared) / name, cases, per) for name, cases, per in DEFAULT_CALIBRATION] if shared else []
    if not folders or not all(f.is_dir() for f, _, _ in folders):
        raise ModelOptionError(
            "precision int8 needs a calibration set, and none was found: give the model option calibration "
            f"(a dataset folder that is not the evaluated data), set ${CALIBRATION_ENV}, or set "
            "$MEDSAM_EVAL_SHARED_DATA to the shared data holding " + ", ".join(n for n, _, _ in DEFAULT_CALIBRATION))
    return CalibrationSet([(f.resolve(), c, s) for f, c, s in folders])


def check_precision_here(precision: str, engine: str, bf16_device: bool) -> None:
    """Refuse a precision this machine would not compute in, rather than run fp32 under its label; warn
    where int8 runs but buys nothing. ``engine``: the resolved encoder engine; ``bf16_device``: the torch
    device computes in bf16 (a CUDA GPU with bf16).

    bf16 on a CPU without bf16 arithmetic: OpenVINO silently computes fp32 (measured: the embedding equal
    to fp32's, 1.02x its speed, on an AMD EPYC with AVX2 only), so the run would be fp32 named bf16.
    int8 on a CPU without int8 dot-product instructions: OpenVINO's int8 encoder was slower than fp32
    there (0.93x, the same machine, 2026-12-02), while its masks move."""
    if precision == "bf16":
        if engine == "torch" and not bf16_device:
            raise ModelOptionError("precision bf16 needs the OpenVINO engine on a CPU with bf16 or a GPU with bf16; "
                                   "engine torch here would run fp32")
        if engine == "onnxruntime":
            raise ModelOptionError("precision bf16 runs on the OpenVINO engine (or torch on a GPU with bf16); "
                                   "engine onnxruntime runs fp32")
        if engine == "openvino" and not cpu_precisions.cpu_has_bf16():
            offers = ", ".join(c for c in cpu_precisions.openvino_cpu_capabilities() if c != "EXPORT_IMPORT") or "nothing"
            raise ModelOptionError(
                f"precision bf16: this CPU has no bf16 arithmetic (OpenVINO's CPU plugin offers {offers}; bf16 needs "
                "AVX-512 BF16 or AMX), so the encoder would run fp32 under a bf16 label: use fp32 (the same masks), "
                "or a CPU or GPU with bf16")
    if precision == "int8" and cpu_precisions.int8_dot_product() is None:
        warnings.warn("precision int8: this CPU has no int8 dot-product instructions (AVX-512 VNNI, AVX-VNNI or "
                      "AMX-INT8), where the int8 encoder measured no faster than fp32 (0.93x on an AMD EPYC with "
                      "AVX2 only) while masks move; `python benchmarks/precision_cost.py --encoder-only` measures "
                      "it here", RuntimeWarning, stacklevel=3)


def unquantized_precision() -> tuple[str, str]:
    """The inference precision of what the INT8 encoder leaves unquantized, and why: ``bf16`` on a CPU
    with bf16 instructions, else ``f32``. Measured on 2026-12-02 (2 idle AVX-512 BF16 cores, recipe v1,
    interleaved): int8 with fp32 for the rest 1.38x the fp32 encoder's speed, with bf16 1.83x; its median
    relative error against torch on 14 slices 0.160 and 0.163."""
    if cpu_precisions.cpu_has_bf16():
        return "bf16", "bf16 for what stays unquantized (this CPU has bf16)"
    return "f32", "fp32 for what stays unquantized (this CPU lacks bf16)"


def quantize_openvino(model_xml: Path, batches: list[np.ndarray], out_xml: Path) -> None:
    """Post-training INT8 quantization of an OpenVINO encoder with NNCF (:data:`QUANT_RECIPE`)."""
    from .openvino_quiet import import_nncf, import_openvino, telemetry_off

    try:
        nncf = import_nncf()
    except ImportError as error:
        raise ModelOptionError("precision int8 needs the nncf package: pip install nncf") from error
    ov = import_openvino()

    model = ov.Core().read_model(str(model_xml))
    with warnings.catch_warnings(), telemetry_off():
        warnings.simplefilter("ignore")
        quantized = nncf.quantize(model, nncf.Dataset(batches), subset_size=len(batches),
                                  model_type=nncf.ModelType.TRANSFORMER, preset=nncf.QuantizationPreset.MIXED,
                                  ignored_scope=_ignored_scope(model))
    ov.save_model(quantized, str(out_xml), compress_to_fp16=False)


def _ignored_scope(model: Any):
    """Layers left unquantized (run at :func:`unquantized_precision`): the first three convolutions (the patch
    embedding and the first MBConv's expansion, on the raw pixels), the neck (whose output is the embedding)
    and the MLPs' second layers (``mlp.fc2``: GELU outputs, long-tailed) of the third stage (``layers.2``: six
    blocks at 32 x 32 tokens, cheap to keep, and the fc2 whose quantization moves the embedding most).

    Measured on 2026-12-02 on 14 slices (6 DeepLesion, 8 hippocampus: lesion / structure slice, GT box), all
    with bf16 for the rest, against the torch encoder (relative L2 of the embedding, median) and fp32 masks
    (1 - DSC, median), speed interleaved against the fp32 OpenVINO encoder at load ~2.5 on 2 cores: this
    recipe 0.168, 0.054, 2.01x; every fc2 kept as well (recipe v1) 0.163, 0.043, 1.90x; everything quantized
    0.196, 0.077, 2.05x; the convolutions and the neck kept 0.188, 0.061; the fourth stage's fc2 instead of
    the third's 0.184, 0.067."""
    from .openvino_quiet import import_nncf

    nncf = import_nncf()

    names = [(op.get_type_name(), op.get_friendly_name()) for op in model.get_ordered_ops()]
    first_convs = [name for kind, name in names if kind == "Convolution"][:3]
    kept = [name for _, name in names if "neck" in name or ("layers.2." in name and "mlp.fc2" in name)]
    return nncf.IgnoredScope(names=first_convs + kept)


def _relative_error(ours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(ours - ref) / max(np.linalg.norm(ref), 1e-12))


def int8_variant(calibration: CalibrationSet, fp32_folder: Path | None = None) -> ExportVariant:
    """The INT8 export of the OpenVINO encoder, calibrated on ``calibration``; quantized from the cached fp32
    export in ``fp32_folder`` when it is there and sound (its files match its manifest), else from a new one.

    What stays unquantized runs at :func:`unquantized_precision` (the variant's ``hint``): it is named in the
    facts (and so in ``describe()`` and the embedding-store key) and in the cache key, as the export's own
    fingerprint and its error against torch are measured at that precision."""
    hint, unquantized = unquantized_precision()
    facts = {"quantization": f"int8 nncf ({QUANT_RECIPE}), {unquantized}", "calibration_id": calibration.id,
             "unquantized_precision": hint}

    def export(encoder: torch.nn.Module, folder: Path) -> tuple[str, dict[str, Any]]:
        plain = folder / "fp32"
        plain.mkdir()
        source = _verified_entry(fp32_folder) if fp32_folder is not None else None
        if source is None:
            source = plain / _export_openvino(encoder, plain)
        batches = calibration.batches()
        quantize_openvino(source, batches, folder / "encoder.xml")
        shutil.rmtree(plain)
        engine = OpenVINOEncoder(folder / "encoder.xml", torch.get_num_threads(), hint)
        own = summarize(engine(fingerprint_input()))
        errors = []
        with torch.inference_mode():  # how far int8 lies from the torch encoder on real (calibration) slices
            for batch in batches[:: max(1, len(batches) // 2)][:2]:
                ref = encoder(torch.from_numpy(batch)).float().numpy()
                errors.append(_relative_error(engine(batch.transpose(0, 2, 3, 1)[0]).numpy(), ref))
        if max(errors) > INT8_ERROR_LIMIT:
            raise QuantizationError(f"the INT8 encoder differs from the torch encoder by {max(errors):.2f} (relative) on "
                          f"calibration slices, more than {INT8_ERROR_LIMIT}: not used")
        return "encoder.xml", {"fingerprint": own, "calibration": calibration.describe(),
                               "unquantized_precision": hint,
                               "int8_relative_error_vs_torch": [round(e, 5) for e in errors]}

    # the hint in the name: the fingerprint and the error above hold for this precision of the rest only
    return ExportVariant(name=f"int8-{calibration.id}" + ("" if hint == "f32" else f"-{hint}"), export=export,
                         facts=facts, hint=hint, tolerance="int8")


__all__ = ["CALIBRATION_ENV", "CalibrationOverlapError", "CalibrationSet", "QuantizationError", "DEFAULT_CALIBRATION", "PRECISIONS",
           "INT8_DOT_PRODUCT", "QUANT_RECIPE", "calibration_set", "check_precision_here", "cpu_has_bf16",
           "int8_dot_product", "openvino_cpu_capabilities", "precisions_here", "int8_variant", "quantize_openvino", "resolve_precision",
           "unquantized_precision"]
