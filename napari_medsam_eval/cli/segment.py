"""``medsam-eval segment IMAGE --box x0 y0 x1 y1 --slice Z --out PRED``: one case, one prompt.

The prompted slice/frame is segmented and, for volumes and videos, propagated
(volumes both ways, videos forward) unless ``--no-propagate``. The mask is
written with :func:`napari_medsam_eval.io.write_mask`: ``.npz`` under the key
``segs``, NIfTI/NRRD/MHA with the source image's geometry.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..case import Case
from ..errors import MedsamEvalError
from ..intensity import INTENSITY_MODES, case_intensity, prepare_image
from ..io import read_case, write_mask
from ..io.writers import check_output_path
from ..models import available_backends, build_backend
from ..prompt import Prompt, check_prompt_in_image
from ..propagation import PropagationResult, segment_by_kind
from .common import json_options, propagation_option


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("segment", help="segment one image/volume/video from a box or points and write the mask")
    parser.add_argument("image", type=Path, help="image file or folder (any format `info` reads)")
    parser.add_argument("--out", type=Path, required=True, help="output mask: .npz (key 'segs'), .nii.gz, .nrrd, .mha or .png")
    parser.add_argument("--box", type=float, nargs=4, metavar=("X0", "Y0", "X1", "Y1"), help="inclusive pixel box on the slice")
    parser.add_argument("--point", type=float, nargs=3, action="append", metavar=("X", "Y", "LABEL"),
                        help="a point with label 1 (positive) or 0 (negative); repeatable")
    parser.add_argument("--slice", type=int, help="slice (z) or frame (t) of the prompt; default: the middle slice / first frame")
    parser.add_argument("--label-value", type=int, default=1, help="value written for the segmented target (default 1)")
    parser.add_argument("--model", default="litemedsam", choices=available_backends(), help="model (default litemedsam)")
    parser.add_argument("--checkpoint", type=Path, help="model checkpoint (required for medsam2, sam2, sam)")
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
    parser.set_defaults(func=run)


def _prompt(args: argparse.Namespace, case: Case) -> Prompt:
    if args.box is None and not args.point:
        raise MedsamEvalError("give a prompt: --box X0 Y0 X1 Y1 and/or --point X Y LABEL")
    slice_index = None
    if case.kind != "image":
        default = case.n_slices() // 2 if case.kind == "volume" else 0
        slice_index = default if args.slice is None else args.slice
        if not 0 <= slice_index < case.n_slices():
            raise MedsamEvalError(f"--slice {slice_index} is outside 0..{case.n_slices() - 1}", case.metadata.get("image_path"))
    points = [(x, y) for x, y, _ in args.point or []]
    labels = [int(label) for _, _, label in args.point or []]
    prompt = Prompt(target_label=args.label_value, slice_index=slice_index, boxes=[tuple(args.box)] if args.box else [],
                    points=points, point_labels=labels, protocol="manual")
    shape_hw = case.image.shape[:2] if case.kind == "image" else case.image.shape[1:3]
    return check_prompt_in_image(prompt, shape_hw)  # a box partly outside is clipped, with a warning


def _window(text: str | None):
    if text is None or "," not in text:
        return text
    level, width = (float(v) for v in text.split(","))
    return level, width


def segment_case(case: Case, prompt: Prompt, backend, *, propagate: bool = True, window=None, progress=None,
                 intensity: str = "auto", rules: str | dict | None = None) -> PropagationResult:
    """``case`` segmented from ``prompt`` (one slice, or propagated): the mask and where it stopped."""
    image = prepare_image(case.image, case.kind, case.modality, _window(window), case_intensity(case.metadata, intensity))
    how = "propagate" if propagate else "slice"
    return segment_by_kind(backend, image, case.kind, prompt, how=how, progress=progress, case_id=case.case_id,
                           rules=rules)


def run(args: argparse.Namespace) -> int:
    case = read_case(args.image)
    if args.modality:
        case.modality = args.modality
    prompt = _prompt(args, case)
    check_output_path(args.out, case.kind)  # before any model work is spent on it
    options = {**json_options(args.model_options, "--model-options"), "device": args.device}
    if args.checkpoint is not None:
        options["checkpoint"] = str(args.checkpoint)
    if args.engine is not None:
        if args.model != "litemedsam":
            raise MedsamEvalError(f"--engine applies to --model litemedsam only, not {args.model}")
        options["engine"] = args.engine
    backend = build_backend(args.model, **options)
    backend.check_prompt(prompt)
    from tqdm import tqdm

    with tqdm(total=case.n_slices(), unit="slice", file=sys.stderr, disable=case.kind == "image") as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        result = segment_case(case, prompt, backend, propagate=not args.no_propagate, window=args.window,
                              progress=progress, intensity=args.intensity, rules=propagation_option(args.propagation))
    mask = result.mask
    labels = mask.astype(np.uint8 if args.label_value < 256 else np.int32) * args.label_value
    path = write_mask(labels, args.out, case)
    print(f"wrote {path} ({int(mask.sum())} voxels on {int(mask.reshape(mask.shape[0], -1).any(axis=1).sum()) if mask.ndim > 2 else 1} slices)")
    if result.record.stops:
        print(result.record.summary())
    return 0
