"""``medsam-eval run DATASET --out RUN_DIR``: benchmark a model on a dataset folder.

Writes results.jsonl/csv/parquet, manifest.json and run.log into RUN_DIR (see
:mod:`napari_medsam_eval.benchmark.runner`), then, when the report module is
installed, the report. A non-empty RUN_DIR is refused unless ``--resume``.

``--executor ray`` runs the cases on Ray actors (:mod:`napari_medsam_eval.benchmark.ray_executor`):
a local Ray, or the cluster of ``--ray-address``, ``--gpus-per-worker`` GPUs each.

``--prompts LOG.csv`` replays the prompts a person drew (a prompt log of the Segment
widget, :mod:`napari_medsam_eval.protocols.prompt_log`): it selects the ``replay`` protocol
(:mod:`napari_medsam_eval.protocols.replay`) and cannot be combined with another
``--protocol``; a malformed log is refused before any work, naming the file and the line.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..benchmark.files import CSV_FILE
from ..datasets import available_layouts
from ..core.glossary import TERMS
from ..core.intensity import INTENSITY_MODES
from .common import (add_embeddings_argument, add_engine_argument, add_precision_argument, add_targets_argument,
                     embeddings_option, engine_option, json_options, lesion_option, non_negative_float, positive_int,
                     precision_option, propagation_option, seed_int, targets_option)
from .commands import command_help
from ..core.errors import InputError, os_error_words

#: the exit status of a run whose results are complete and on disk but whose report could not be written
#: (a full disk at the end of the run): not a clean success, not a refusal (docs/guarantees.md)
REPORT_NOT_WRITTEN = 3


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from ..models import available_backends
    from ..protocols import PROTOCOLS

    parser = subparsers.add_parser("run", help=command_help("run"))
    parser.add_argument("dataset", type=Path, help="dataset folder (MedSAM npz, MSD/nnU-Net, CAMUS, SUN-SEG, "
                                                   "images/+masks/, SAM-Med2D)")
    parser.add_argument("--out", type=Path, required=True, help="run folder for results, manifest and log")
    parser.add_argument("--model", default="litemedsam", choices=available_backends(), help="model backend")
    parser.add_argument("--protocol", default=None, choices=sorted(PROTOCOLS),
                        help="prompt protocol (default medsam2; replay with --prompts)")
    parser.add_argument("--prompts", type=Path, metavar="LOG.csv",
                        help="replay the drawn prompts of a prompt log (the Segment widget's): protocol replay; "
                             "cases and labels without a logged prompt are failed rows saying so")
    parser.add_argument("--protocol-options", metavar="JSON", help="protocol options as JSON, e.g. '{\"margin\": 5}'")
    parser.add_argument("--model-options", metavar="JSON", help="extra backend options as JSON")
    add_embeddings_argument(parser)
    add_precision_argument(parser)
    add_engine_argument(parser)
    parser.add_argument("--checkpoint", type=Path, help="model checkpoint (default: the model's shipped weights)")
    parser.add_argument("--device", help="cpu, cuda, cuda:N, mps or auto (default: the model's choice)")
    parser.add_argument("--workers", type=positive_int, default=1,
                        help="cases in parallel: local processes, or Ray actors with --executor ray (default 1)")
    parser.add_argument("--executor", choices=("local", "ray"), default="local", help=TERMS["executor"])
    parser.add_argument("--ray-address", metavar="ADDRESS", help=TERMS["ray address"])
    parser.add_argument("--gpus-per-worker", type=non_negative_float, default=0.0, metavar="F",
                        help="GPUs each Ray worker reserves (e.g. 1 for MedSAM2, 0.5 shares a GPU; default 0)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    parser.add_argument("--limit", type=positive_int, help="only the first K cases")
    parser.add_argument("--save-predictions", action="store_true", help="write each case's predicted label map")
    parser.add_argument("--prediction-format", choices=("nifti", "dicom-seg"), default="nifti",
                        help="format of --save-predictions: nifti (default; npz beside npz sources, PNG for 2D "
                             "images) or dicom-seg (a DICOM SEG on each case's DICOM series, a segment per target)")
    parser.add_argument("--allow-outside", action="store_true",
                        help="read the files a dataset lists outside its folder (dataset.json's '../..' or absolute "
                             "paths); without it each such case is a failed row naming the file")
    parser.add_argument("--layout", choices=available_layouts(), help="dataset layout (default: detected)")
    parser.add_argument("--seed", type=seed_int, default=0, help=TERMS["seed"])
    parser.add_argument("--propagation", metavar="PRESET|JSON",
                        help="propagation rules of per-slice models: a preset (volume, video, legacy) or JSON options, "
                             "e.g. '{\"intensity_k\": 3}' (default: each kind's measured rules)")
    parser.add_argument("--intensity", choices=INTENSITY_MODES, default="auto",
                        help="how intensities are taken: auto (by modality; MedSAM npz are prepared), prepared (0..255 already), raw (always apply the rule)")
    add_targets_argument(parser)
    parser.add_argument("--no-report", action="store_true", help="do not write the report after the run")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def _write_report(run_dir: Path) -> bool:
    """Call ``napari_medsam_eval.report.write_report(run_dir)`` when that module provides it; False (the reason
    printed as an ``error:`` line) when the report could not be written."""
    try:
        from ..report import write_report  # type: ignore[attr-defined]
    except ImportError as error:
        if getattr(error, "name", None) not in (None, "napari_medsam_eval.report"):
            print(f"error: {run_dir}: no report: {error}", file=sys.stderr)
            return False  # a module the report needs is missing
        return True  # a package without the report module: nothing to write
    try:
        written = write_report(run_dir)
    except Exception as error:  # noqa: BLE001 - the results stand even if the report fails
        why = os_error_words(error) if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
        print(f"error: {run_dir}: the report could not be written ({why}); the results are complete: "
              f"`medsam-eval report {run_dir}` writes it", file=sys.stderr)
        return False
    if written:
        print(f"report: {written}")
    return True


def _summary(table) -> str:
    ok = table[table["status"] == "ok"]
    lines = []
    for task, group in ok.groupby("task", sort=True):
        dice = group["dice"].dropna()
        if len(dice):
            q25, q50, q75 = dice.quantile([0.25, 0.5, 0.75])
            lines.append(f"  {task}: median DSC {q50:.4f} [IQR {q25:.4f}-{q75:.4f}], n={len(dice)}")
        lines.extend(_lesion_line(task, group))
    for task, group in table.groupby("task", sort=True):
        if (group["status"] == "empty_gt").all():
            lines.append(f"  warning: {task}: no case holds its labels ({group['error'].iloc[0]})")
    from ..evaluation.cvpr25 import task_lines

    lines.extend(f"  {line}" for line in task_lines(table))
    failed = int((table["status"] == "failed").sum())
    empty = int((table["status"] == "empty_gt").sum())
    lines.append(f"  rows: {len(table)}, failed: {failed}" + (f", empty ground truth: {empty}" if empty else ""))
    lines.extend(_notes(ok))
    return "\n".join(lines)


def _lesion_line(task: str, group) -> list[str]:
    """``task: lesions found 5 of 6 (detection F1 0.833), 1 false positive`` for a lesion-by-lesion task."""
    counts = group[["lesions_true", "lesions_found", "lesions_false"]].dropna()
    if counts.empty:
        return []
    true, found, false = (int(counts[c].sum()) for c in ("lesions_true", "lesions_found", "lesions_false"))
    f1 = 1.0 if true + false == 0 else 2 * found / (found + true + false)
    return [f"  {task}: lesions found {found} of {true} (detection F1 {f1:.3f}), {false} false positive"
            f"{'' if false == 1 else 's'}"]


def _notes(ok) -> list[str]:
    """A warning line per kind of note on the scored rows (results that mean little), with its cases."""
    cases: dict[str, list[str]] = {}
    for case_id, text in zip(ok["case_id"], ok["notes"] if "notes" in ok else []):
        for note in json.loads(text) if text else []:
            cases.setdefault(note, []).append(str(case_id))
    return [f"  warning: {len(ids)} rows: {note} ({', '.join(sorted(set(ids))[:5])}"
            f"{', ...' if len(set(ids)) > 5 else ''})" for note, ids in cases.items()]


def _protocol(args: argparse.Namespace) -> tuple[str, dict]:
    """The protocol and its options: ``--prompts`` selects ``replay`` with the log (read now, so a
    malformed one is refused before the run folder is made)."""
    options = json_options(args.protocol_options, "--protocol-options")
    prompts = getattr(args, "prompts", None)
    if prompts is None:
        return args.protocol or "medsam2", options
    if args.protocol not in (None, "replay"):
        raise InputError(f"--prompts {prompts} replays logged prompts (protocol replay); it cannot be combined "
                         f"with --protocol {args.protocol}")
    if "log" in options and Path(options["log"]) != prompts:
        raise InputError(f"--prompts {prompts} and --protocol-options log={options['log']} name two logs; give one")
    from ..protocols.prompt_log import read_log

    rows = read_log(prompts)
    replayable = [r for r in rows if r.replayable]
    if not replayable:
        raise InputError(f"{prompts}: the prompt log holds no replayable prompt ({len(rows)} rows; "
                         "correct rows are not replayed)")
    if not getattr(args, "quiet", False):
        cases = len({r.case_id for r in replayable})
        print(f"replaying {len(replayable)} logged prompts of {cases} case(s) from {prompts}", file=sys.stderr)
    return "replay", {**options, "log": str(prompts)}


def _say_if_killed(out: Path) -> None:
    """One line when the run resumed was killed (its manifest says running, its process is gone)."""
    from ..benchmark.manifest import KILLED, killed_words, read_manifest, run_status
    from ..core.errors import MedsamEvalError

    try:
        manifest = read_manifest(out)
    except MedsamEvalError:
        return  # the run refuses it in its own words
    if manifest and run_status(out, manifest) == KILLED:
        print(f"resuming a run that was killed ({killed_words(manifest)}); its finished cases are kept",
              file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    model_options = {**json_options(args.model_options, "--model-options"), **embeddings_option(args)}
    model_options.update(precision_option(args, args.model, model_options))
    model_options.update(engine_option(args, args.model, model_options))
    if args.checkpoint is not None:
        model_options["checkpoint"] = str(args.checkpoint)
    if args.device:
        model_options["device"] = args.device
    try:
        protocol, protocol_options = _protocol(args)
        from ..benchmark.config import RunConfig  # (imported here: `run --help` loads no benchmark)
        from ..benchmark.runner import run_benchmark

        config = RunConfig(
            args.dataset, args.out, args.model, protocol, model_options=model_options,
            protocol_options=protocol_options, layout=args.layout, limit=args.limit, workers=args.workers,
            resume=args.resume, save_predictions=args.save_predictions,
            prediction_format=getattr(args, "prediction_format", "nifti"), seed=args.seed, intensity=args.intensity,
            propagation=propagation_option(args.propagation), executor=getattr(args, "executor", "local"),
            ray_address=getattr(args, "ray_address", None), gpus_per_worker=getattr(args, "gpus_per_worker", 0.0),
            allow_outside=args.allow_outside, targets=targets_option(args), lesions=lesion_option(args))
        if args.resume:
            _say_if_killed(args.out)
        table = run_benchmark(config, progress_bar=not args.quiet)
    except (ValueError, TypeError) as error:  # settings refused before any case ran (cases record their own)
        if getattr(args, "debug", False):
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"results: {args.out / CSV_FILE}")
    print(_summary(table))
    if not args.no_report and not _write_report(args.out):
        return REPORT_NOT_WRITTEN
    return 0
