"""``medsam-eval segment IMAGE --box x0 y0 x1 y1 --slice Z --out PRED``: one case, its prompts.

``--box`` and ``--point`` take an optional last number, the slice they are on; prompts on
other slices than the first are corrections (anchors), each propagated again up to its
neighbouring prompts. ``--anchor-mask FILE SLICE`` is a painted slice (a mask drawn or
edited elsewhere), kept exactly as painted (:mod:`napari_medsam_eval.core.anchor_prompts`).

The prompted slice/frame is segmented and, for volumes and videos, propagated
(volumes both ways, videos forward) unless ``--no-propagate``. The mask is
written with :func:`napari_medsam_eval.io.write_mask`: ``.npz`` under the key
``segs``, NIfTI/NRRD/MHA with the source image's geometry, ``.dcm`` a DICOM SEG on the
source DICOM series (one segment, named by the case's label name for ``--label-value`` or
``label <value>``, the model and protocol ``manual`` recorded in it).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from ..core.case import Case
from ..core.errors import DataError, MedsamEvalError, OptionError
from ..core.intensity import INTENSITY_MODES, case_intensity, prepare_image, resolve_window
from ..io import read_case, write_mask
from ..io.writers import check_output_path
from ..models import available_backends, build_backend
from ..core.ledger import record_written
from ..core.ownership import check_not_inputs
from ..core.prompt import Prompt, check_prompt_in_image
from ..propagation import PropagationResult, resolve_rules, segment_by_kind
from ..propagation.anchors import AnchoredSegmentation
from ..core.anchor_prompts import is_painted
from .common import (add_embeddings_argument, add_overwrite_argument, add_precision_argument, check_calibration_apart,
                     check_out_file, embeddings_option, finite_float, json_options, label_value, non_negative_int,
                     precision_option, propagation_option, SERIES_HELP)
from .commands import command_help


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("segment", help=command_help("segment"))
    parser.add_argument("image", type=Path, help="image file or folder (any format `info` reads)")
    parser.add_argument("--series-id", metavar="UID", help=SERIES_HELP)
    parser.add_argument("--out", type=Path, required=True,
                        help="output mask: .npz (key 'segs'), .nii.gz, .nrrd, .mha, .png (2D images) or .dcm "
                             "(a DICOM SEG; DICOM series only)")
    parser.add_argument("--box", type=finite_float, nargs="+", action="append", metavar="X0 Y0 X1 Y1 [SLICE]",
                        help="inclusive pixel box, on SLICE when given (else --slice); repeatable: boxes on other "
                             "slices are corrections, propagated again up to the neighbouring prompts")
    parser.add_argument("--point", type=finite_float, nargs="+", action="append", metavar="X Y LABEL [SLICE]",
                        help="a point with label 1 (positive) or 0 (negative), on SLICE when given; repeatable")
    parser.add_argument("--anchor-mask", nargs=2, action="append", metavar=("FILE", "SLICE"),
                        help="a painted slice: the mask in FILE (any label format `info` reads: the whole volume, "
                             "e.g. an edited prediction, or that one slice) on SLICE, kept exactly as painted and "
                             "propagated from (its box for LiteMedSAM, the mask for MedSAM2/SAM2); a FILE with "
                             "several values gives the voxels of --label-value; repeatable")
    parser.add_argument("--slice", type=non_negative_int, help="slice (z) or frame (t) of prompts given without one; default: the "
                                                  "middle slice / first frame")
    parser.add_argument("--label-value", type=label_value, default=1,
                        help="value written for the segmented target, 1..65535 (default 1)")
    parser.add_argument("--model", default="litemedsam", choices=available_backends(), help="model (default litemedsam)")
    parser.add_argument("--checkpoint", type=Path, help="model checkpoint (required for medsam2, sam2, sam)")
    add_embeddings_argument(parser)
    add_precision_argument(parser)
    parser.add_argument("--model-options", metavar="JSON",
                        help="extra backend options as JSON, e.g. '{\"config\": \"sam2.1_hiera_t512\"}' for medsam2/sam2")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: CUDA when present, else CPU)")
    parser.add_argument("--engine", choices=("auto", "torch", "openvino", "onnxruntime"),
                        help="litemedsam only: where the image encoder runs (default auto: OpenVINO on a CPU when installed)")
    parser.add_argument("--modality", help="modality for the intensity preparation of raw volumes (CT, MR, ...)")
    parser.add_argument("--window", help="CT window name or LEVEL,WIDTH (default soft tissue)")
    parser.add_argument("--intensity", choices=INTENSITY_MODES, default="auto",
                        help="how intensities are taken: auto (by modality; MedSAM npz are prepared), prepared (0..255 already), raw (always apply the rule)")
    parser.add_argument("--propagation", metavar="PRESET|JSON",
                        help="propagation rules: a preset (volume, video, legacy) or JSON options (default: the kind's)")
    parser.add_argument("--no-propagate", action="store_true", help="segment only the prompted slice")
    add_overwrite_argument(parser)
    parser.set_defaults(func=run)


def _prompts(args: argparse.Namespace, case: Case) -> list[Prompt]:
    """One prompt per slice named on the command line, in the order the slices first appear."""
    if not args.box and not args.point and not args.anchor_mask:
        raise MedsamEvalError("give a prompt: --box X0 Y0 X1 Y1 [SLICE], --point X Y LABEL [SLICE] "
                              "and/or --anchor-mask FILE SLICE")
    default = None
    if case.kind != "image":
        default = (case.n_slices() // 2 if case.kind == "volume" else 0) if args.slice is None else args.slice
    by_slice: dict[int | None, dict[str, list]] = {}
    for values in args.box or []:
        box, index = _split(values, 4, "--box X0 Y0 X1 Y1 [SLICE]", case, default)
        by_slice.setdefault(index, {"boxes": [], "points": [], "labels": []})["boxes"].append(tuple(box))
    for values in args.point or []:
        (x, y, label), index = _split(values, 3, "--point X Y LABEL [SLICE]", case, default)
        if label not in (0, 1):
            raise OptionError(f"--point X Y LABEL [SLICE]: LABEL must be 1 (positive) or 0 (negative), got {label:g}")
        entry = by_slice.setdefault(index, {"boxes": [], "points": [], "labels": []})
        entry["points"].append((x, y))
        entry["labels"].append(int(label))
    shape_hw = case.image.shape[:2] if case.kind == "image" else case.image.shape[1:3]
    prompts = [Prompt(target_label=args.label_value, slice_index=index, boxes=entry["boxes"], points=entry["points"],
                      point_labels=entry["labels"], protocol="manual") for index, entry in by_slice.items()]
    prompts = [check_prompt_in_image(p, shape_hw) for p in prompts]  # a box partly outside is clipped, with a warning
    return prompts + _anchor_masks(args, case, set(by_slice))


def _anchor_masks(args: argparse.Namespace, case: Case, prompted: set[int | None]) -> list[Prompt]:
    """``--anchor-mask FILE SLICE``: painted anchors, each mask read and checked against the image."""
    from ..io import read_label
    from ..core.anchor_prompts import check_painted_mask, painted_prompt

    usage, painted = "--anchor-mask FILE SLICE", []
    for file, text in args.anchor_mask or []:
        if case.kind == "image":
            raise MedsamEvalError(f"{usage}: a 2D image has no slices to anchor")
        try:
            index = int(text)
        except ValueError:
            raise OptionError(f"{usage}: SLICE must be a whole number, got {text!r}") from None
        if not 0 <= index < case.n_slices():
            raise DataError(f"{usage}: SLICE {index} is outside 0..{case.n_slices() - 1}", case.metadata.get("image_path"))
        if index in prompted:
            raise OptionError(f"{usage}: slice {index} already holds a prompt; give one prompt per slice")
        prompted.add(index)
        array = np.asarray(read_label(file, case).array)
        values = np.unique(array[array != 0])
        target = array == args.label_value if len(values) > 1 else array != 0  # several objects: --label-value's
        shape = case.image.shape[:3]
        if target.shape == shape:
            target = target[index]
        try:
            mask = check_painted_mask(target, shape[1:])
        except ValueError as error:
            raise DataError(f"{usage}: {error} (the image is {' x '.join(map(str, shape))})", Path(file)) from None
        painted.append(painted_prompt(args.label_value, index, mask, protocol="manual", file=str(file)))
    return painted


def _split(values: list[float], count: int, usage: str, case: Case, default: int | None) -> tuple[list[float], int | None]:
    """A --box/--point's numbers and its slice (the last number when one more is given)."""
    if len(values) not in (count, count + 1):
        raise MedsamEvalError(f"{usage}: got {len(values)} numbers")
    if case.kind == "image" and len(values) > count:
        raise MedsamEvalError(f"{usage}: a 2D image has no slices")
    if len(values) == count:
        index, named = default, "--slice"
    else:
        index, named = int(values[-1]), f"SLICE of {usage.split()[0]}"
        if index != values[-1]:
            raise MedsamEvalError(f"{usage}: SLICE must be a whole number, got {values[-1]:g}")
    if index is not None and not 0 <= index < case.n_slices():
        raise DataError(f"{named} {index} is outside 0..{case.n_slices() - 1}", case.metadata.get("image_path"))
    return values[:count], index


def _window(text: str | None) -> str | tuple[float, float] | None:
    """``--window``: a window's name as it is, or ``LEVEL,WIDTH`` as two numbers (a positive width)."""
    if text is None or "," not in text:
        return text
    parts = text.split(",")
    try:
        level, width = (float(v) for v in parts)
    except ValueError:
        raise OptionError(f"--window: a window's name or LEVEL,WIDTH (two numbers), got {text!r}") from None
    if not (math.isfinite(level) and math.isfinite(width)) or width <= 0:
        raise OptionError(f"--window LEVEL,WIDTH: finite numbers and a positive width, got {text!r}")
    return level, width


def segment_case(case: Case, prompt: Prompt | list[Prompt], backend, *, propagate: bool = True, window=None,
                 progress=None, intensity: str = "auto", rules: str | dict | None = None) -> PropagationResult:
    """``case`` segmented from ``prompt`` (one slice, or propagated): the mask and where it stopped.

    Several prompts (on different slices) are anchors: the first is propagated, each next one
    corrects its slice and is propagated again up to its neighbouring anchors
    (:class:`~napari_medsam_eval.propagation.anchors.AnchoredSegmentation`).
    """
    image = prepare_image(case.image, case.kind, case.modality, _window(window), case_intensity(case.metadata, intensity))
    prompts = prompt if isinstance(prompt, list) else [prompt]
    if len(prompts) == 1 or case.kind == "image":
        how = "propagate" if propagate else "slice"
        return segment_by_kind(backend, image, case.kind, prompts[0], how=how, progress=progress,
                               case_id=case.case_id, rules=rules)
    if not propagate:
        raise MedsamEvalError("prompts on several slices are propagated: leave out --no-propagate")
    session = AnchoredSegmentation(backend, image, case.kind, rules=rules, case_id=case.case_id)
    result = session.propagate(prompts[0], progress)
    for correction in prompts[1:]:
        result = session.correct(correction, progress)
    return result


def run(args: argparse.Namespace) -> int:
    rules = propagation_option(args.propagation)  # every option checked before the data are read
    if rules is not None:
        resolve_rules("volume", rules)
    if args.window is not None:
        try:
            resolve_window(_window(args.window))
        except OptionError:
            raise
        except ValueError as error:
            raise OptionError(f"--window: {error}") from None
    check_not_inputs([("--out", args.out)], [("the input image", args.image), ("--checkpoint", args.checkpoint)])
    case = read_case(args.image, series_id=args.series_id)
    if args.modality:
        case.modality = args.modality
    prompts = _prompts(args, case)
    check_output_path(args.out, case.kind, case)  # before any model work is spent on it (a SEG: a DICOM source)
    check_out_file(args.out, args.overwrite)  # never over a file not ours, never into a dataset
    options = {**json_options(args.model_options, "--model-options"), **embeddings_option(args), "device": args.device}
    if args.checkpoint is not None:
        options["checkpoint"] = str(args.checkpoint)
    if args.engine is not None:
        if args.model != "litemedsam":
            raise MedsamEvalError(f"--engine applies to --model litemedsam only, not {args.model}")
        if options.get("engine", args.engine) != args.engine:
            raise OptionError(f"--engine {args.engine} and --model-options engine {options['engine']!r} disagree: "
                              "give one")
        options["engine"] = args.engine
    options.update(precision_option(args, args.model, options))
    check_calibration_apart(options, [args.image])  # int8: never calibrated on the image it segments
    backend = build_backend(args.model, **options)
    for prompt in prompts:
        if not is_painted(prompt):  # a painted slice is kept as painted, not asked of the model
            backend.check_prompt(prompt)
    from tqdm import tqdm

    with tqdm(total=case.n_slices(), unit="slice", file=sys.stderr, disable=case.kind == "image") as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        result = segment_case(case, prompts, backend, propagate=not args.no_propagate, window=args.window,
                              progress=progress, intensity=args.intensity, rules=rules)
    mask = result.mask
    from ..evaluation.scoring import result_notes

    for note in result_notes(case.image, mask):  # valid, but meaning little: say so
        print(f"warning: {note}", file=sys.stderr)
    if mask.dtype == bool and args.label_value == 1:
        labels = mask.view(np.uint8)  # the mask's own bytes (True is 1): no mask-sized copy
    else:
        labels = mask.astype(np.uint8 if args.label_value < 256 else np.int32)
        labels *= args.label_value  # in place: one copy, not two
    name = case.label_names.get(args.label_value) or f"label {args.label_value}"  # a DICOM SEG's segment label
    path = write_mask(labels, args.out, case, names={args.label_value: name}, model=args.model, protocol="manual")
    record_written(path.parent, [path.name])  # ours now: a re-run may replace it without --overwrite
    print(f"wrote {path} ({int(mask.sum())} voxels on {int(mask.reshape(mask.shape[0], -1).any(axis=1).sum()) if mask.ndim > 2 else 1} slices)")
    if len(prompts) > 1:
        print("prompts on slices " + ", ".join(str(p.slice_index) for p in prompts) + " (the first propagated, "
              "each next one a correction propagated to its neighbours)")
    if result.record.stops:
        print(result.record.summary())
    return 0
