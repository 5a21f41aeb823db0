"""``medsam-eval prompt-study DATASET --out DIR``: Mazurowski et al.'s prompt modes 1-5 on 2D images.

Writes ``rows.csv`` (IoU per image, class and mode), ``mode_table.csv/.md``
(tasks x modes, like their Fig. 2), ``mode_table.png``, ``images.csv`` and
``study.json``; with ``--iterative N`` also ``iterative.csv`` and a plot.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..core.errors import MedsamEvalError
from ..protocols.geometry import DT_BACKENDS
from ..protocols.mazurowski import MODES, SEEDINGS
from .common import (add_embeddings_argument, add_overwrite_argument, add_precision_argument, add_targets_argument,
                     check_calibration_apart, embeddings_option, legacy_seed_int, non_negative_int, positive_int,
                     precision_option, targets_option)
from .commands import command_help


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "prompt-study",
        help=command_help("prompt-study"),
        description="Run the five prompt modes of Mazurowski et al. 2023 (arXiv:2304.10517) on 2D images "
        "(each image encoded once) and write the per-image rows, the task x mode table and a bar chart.",
    )
    parser.add_argument("dataset", type=Path, nargs="+",
                        help="folder with images/ + masks/ (X.png label map, or SAM-Med2D X_<object>_NNN.png), "
                        "or an MSD volume folder (imagesTr/ + labelsTr/: middle slices)")
    parser.add_argument("--out", type=Path, required=True, help="output folder (made if needed)")
    parser.add_argument("--model", choices=["litemedsam", "sam", "medsam2", "sam2"],
                        help="backend (default: sam when --checkpoint is given, else litemedsam)")
    parser.add_argument("--checkpoint", type=Path, help="model weights (required for sam)")
    add_embeddings_argument(parser)
    add_precision_argument(parser)
    parser.add_argument("--device", help="cpu, cuda, cuda:N (default: CUDA when present)")
    parser.add_argument("--modes", type=int, nargs="+", choices=MODES, default=list(MODES), help="modes to run")
    parser.add_argument("--limit", type=positive_int, help="first K images per dataset (file-name order)")
    parser.add_argument("--iterative", type=non_negative_int, default=0, metavar="N",
                        help="also run iterative points (Algorithm 1) for N points")
    parser.add_argument("--no-oracle", action="store_true", help="leave out the oracle (best candidate) columns")
    parser.add_argument("--select", choices=["first", "score", "mask"], default="first",
                        help="candidate scored without oracle: first (their code), score (highest-rated), mask")
    parser.add_argument("--seed", type=legacy_seed_int, default=1, help="seed for tie-breaking (their 1)")
    parser.add_argument("--seeding", choices=SEEDINGS, default="per-mask", help="RNG reset per mask or shared")
    parser.add_argument("--dt-backend", choices=DT_BACKENDS, default="opencv-c", help="distance transform")
    parser.add_argument("--volume-slices", choices=["middle", "all"], default="middle",
                        help="slices of volume datasets to study")
    parser.add_argument("--instances", choices=["union", "separate"], default="union",
                        help="SAM-Med2D masks X_<object>_NNN: one class per object (union) or per file")
    add_targets_argument(parser, lesions=False)
    parser.add_argument("--no-figure", action="store_true", help="skip the PNG figures")
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no table on stdout")
    add_overwrite_argument(parser)
    parser.set_defaults(func=run)


def build_study_backend(model: str | None, checkpoint: Path | None, device: str | None, **options: Any):
    """The backend: ``model``, or SAM when a checkpoint is given, else LiteMedSAM (``options``: more
    backend options, e.g. the embedding store)."""
    from ..models import build_backend

    name = model or ("sam" if checkpoint else "litemedsam")
    if name in ("sam", "sam2", "medsam2") and checkpoint is None:
        raise MedsamEvalError(f"--model {name} needs --checkpoint PATH")
    if checkpoint is not None:
        options["checkpoint"] = str(checkpoint)
    if device:
        options["device"] = device
    return build_backend(name, **options)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..core.targets import parse_targets
    from ..datasets.prompt_mode_samples import study_samples, with_targets
    from ..report.prompt_mode_study import study_markdown, write_study
    from ..studies.prompt_mode_study import run_prompt_mode_study

    if args.limit is not None and args.limit < 1:
        raise MedsamEvalError("--limit must be >= 1")
    if args.iterative < 0:
        raise MedsamEvalError("--iterative must be >= 0")
    from ..report.folder import check_output_folder, record_written
    from ..report.prompt_mode_study import FILES

    check_output_folder(args.out, tuple(FILES.values()), "prompt study", args.overwrite)  # before any work
    skipped: list[dict] = []
    samples = study_samples(list(args.dataset), limit=args.limit, volume_slices=args.volume_slices,
                            skipped=skipped, instances=args.instances)
    samples = with_targets(samples, parse_targets(targets_option(args)))
    options = embeddings_option(args)
    options.update(precision_option(args, args.model or ("sam" if args.checkpoint else "litemedsam"), options))
    check_calibration_apart(options, list(args.dataset))
    backend = build_study_backend(args.model, args.checkpoint, args.device, **options)
    with tqdm(total=len(samples), unit="image", disable=args.quiet, desc="prompt-study") as bar:
        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)

        results = run_prompt_mode_study(samples, backend, modes=args.modes, oracle=not args.no_oracle,
                                        iterative_points=args.iterative, progress=progress, seed=args.seed,
                                        seeding=args.seeding, dt_backend=args.dt_backend, select=args.select)
    results.skipped[:0] = skipped
    results.config["limit"] = args.limit
    paths = write_study(results, args.out, figure=not args.no_figure)
    record_written(args.out, tuple(FILES.values()))
    if not args.quiet:
        print(study_markdown(results))
        print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
