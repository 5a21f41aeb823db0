"""Option parsing the subcommands share."""
from __future__ import annotations

import argparse
import math
from typing import Any

from ..core.options import MAX_SEED, json_object, propagation_value

#: ``--embeddings``' help, one text for every subcommand that builds a model
EMBEDDINGS_HELP = ("keep the model's image embeddings in this folder (the embedding store, docs/embeddings.md)"
                   ": a re-run over the same images skips the image encoder; LiteMedSAM and SAM only")


# -- argparse types: a bad value is refused by argparse itself, naming the option (exit 2) ------------------


def finite_float(text: str) -> float:
    """A finite number (``nan`` and ``inf`` are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def positive_int(text: str) -> int:
    """A whole number >= 1 (a count: cases, workers, images)."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (a seed, a number of steps)."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


#: the largest seed of numpy's legacy ``RandomState`` (the prompt study seeds it, as Mazurowski et al.'s code)
MAX_LEGACY_SEED = 2**32 - 1


def _seed(text: str, most: int, said: str) -> int:
    value = _whole(text)
    if not 0 <= value <= most:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to {most} ({said}), got {value}")
    return value


def seed_int(text: str) -> int:
    """A seed: a whole number from 0 to :data:`MAX_SEED`, checked when the options are parsed (before any
    model loads or case runs)."""
    return _seed(text, MAX_SEED, "2**63 - 1")


def legacy_seed_int(text: str) -> int:
    """A seed of numpy's ``RandomState``: 0 to :data:`MAX_LEGACY_SEED`, checked when the options are parsed."""
    return _seed(text, MAX_LEGACY_SEED, "2**32 - 1, what numpy's RandomState takes")


def non_negative_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


#: the label values a written mask can hold (0 is the background: nothing would be written)
LABEL_RANGE = (1, 65535)


def label_value(text: str) -> int:
    """A target's label value, 1..65535."""
    value = _whole(text)
    low, high = LABEL_RANGE
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be {low}..{high} (0 is the background), got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0 (a size, a limit)."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


#: the commands that read images, each taking ``--max-decoded-gb`` (added by :func:`add_decoded_limit_argument`)
IMAGE_COMMANDS = ("info", "score", "segment", "run", "prompt-study", "propagation-study")


def add_decoded_limit_argument(parser: argparse.ArgumentParser) -> None:
    """``--max-decoded-gb GB``: the decoded-size limit of :mod:`napari_medsam_eval.core.decoded_limit` for this command."""
    from ..core.decoded_limit import CEILING_ENV, CEILING_OPTION, MEMORY_FRACTION

    parser.add_argument(CEILING_OPTION, type=positive_float, metavar="GB", dest="max_decoded_gb",
                        help=f"refuse an image whose header declares more than GB (10^9 bytes) decoded, before "
                             f"reading it (default: {MEMORY_FRACTION * 100:.0f}%% of memory, or ${CEILING_ENV})")


def decoded_limit(args: argparse.Namespace):
    """A context in which ``--max-decoded-gb`` (when given) is the decoded-size limit (:func:`ceiling_set_to`)."""
    from ..core.decoded_limit import ceiling_set_to

    return ceiling_set_to(getattr(args, "max_decoded_gb", None))


def add_embeddings_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--embeddings", metavar="DIR", help=EMBEDDINGS_HELP)


def embeddings_option(args: argparse.Namespace) -> dict[str, Any]:
    """The backend option of ``--embeddings`` (empty when it was not given); a folder that is not a store is refused."""
    folder = getattr(args, "embeddings", None)
    if folder:
        from ..embeddings.config import check_embeddings_folder

        check_embeddings_folder(str(folder))  # before any work: never a user's folder
    return {"embeddings": str(folder)} if folder else {}


def json_options(text: str | None, what: str) -> dict[str, Any]:
    """A JSON object given on the command line (``what`` names the option in errors: exit 2)."""
    return json_object(text, what)


def propagation_option(text: str | None) -> str | dict | None:
    """A preset name as it is, JSON options as a dict."""
    return propagation_value(text, "--propagation")


#: ``--precision``'s values (LiteMedSAM's ``precision`` option: :mod:`napari_medsam_eval.models.litemedsam_precision`)
PRECISION_CHOICES = ("fp32", "bf16", "int8")


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--precision", choices=PRECISION_CHOICES,
                        help="litemedsam only: the image encoder's precision: fp32 (default, exact), bf16 (OpenVINO "
                             "bf16: faster, masks move) or int8 (NNCF post-training quantization on a calibration "
                             "set that is not the evaluated data; README 'Precision')")


def precision_option(args: argparse.Namespace, model: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """The model option of ``--precision`` (empty for fp32, the default, and when not given): LiteMedSAM
    only; it must agree with a ``precision`` in ``--model-options``."""
    from ..core.errors import OptionError

    precision = getattr(args, "precision", None)
    if precision is None:
        return {}
    if (model or "litemedsam") != "litemedsam":
        if precision == "fp32":
            return {}
        raise OptionError(f"--precision {precision} applies to --model litemedsam only, not {model}")
    if options.get("precision", precision) != precision:
        raise OptionError(f"--precision {precision} and --model-options precision {options['precision']!r} "
                          "disagree: give one")
    return {} if precision == "fp32" else {"precision": precision}


def add_engine_argument(parser: argparse.ArgumentParser) -> None:
    from ..core.options import ENGINE_CHOICES

    parser.add_argument("--engine", choices=ENGINE_CHOICES,
                        help="litemedsam only: the image encoder's engine (default auto: OpenVINO where it loads, "
                             "else torch; the official-script mode, litemedsam-3dbox: torch, the script's own)")


def engine_option(args: argparse.Namespace, model: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """The model option of ``--engine`` (empty when not given): LiteMedSAM only; it must agree with an
    ``engine`` in ``--model-options``."""
    from ..core.errors import OptionError

    engine = getattr(args, "engine", None)
    if engine is None:
        return {}
    if (model or "litemedsam") != "litemedsam":
        raise OptionError(f"--engine {engine} applies to --model litemedsam only, not {model}")
    if options.get("engine", engine) != engine:
        raise OptionError(f"--engine {engine} and --model-options engine {options['engine']!r} disagree: give one")
    return {"engine": engine}


def check_calibration_apart(options: dict[str, Any], inputs: list[Any]) -> None:
    """With ``precision`` int8: refuse inputs (files or folders) that are the calibration set's data, before any work."""
    if options.get("precision") != "int8":
        return
    from pathlib import Path

    from ..models.litemedsam_precision import calibration_set

    calibration = calibration_set(options.get("calibration"))
    for item in inputs:
        path = Path(item)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        calibration.check_apart(files, path)


#: ``--overwrite``'s help, one text for every command that writes a named file
OVERWRITE_HELP = ("replace an existing output file that medsam-eval did not write (or that changed since); "
                  "a file inside a dataset folder is never replaced (docs/guarantees.md)")


def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)


def check_out_file(path: Any, overwrite: bool, option: str = "--out") -> Any:
    """``path`` when a command may write that file (:func:`~napari_medsam_eval.core.ownership.check_may_write`,
    with where it lies in a dataset), else a DataError naming it: before any work."""
    from ..core.ownership import check_may_write
    from ..datasets.dataset_roots import dataset_holding

    return check_may_write(path, overwrite=overwrite, option=option, dataset=dataset_holding(path))


#: ``--targets``' help, one text for every command that scores targets
TARGETS_HELP = ("what is scored, each target as NAME=V[,V...][:lesions]: a region uniting label values "
                "(\"liver=1,3\"), one label (\"tumour=3\"), or a label's lesions one by one (\"lesion=1:lesions\"); "
                "default: the regions of the dataset's dataset.json, else each label (docs/targets.md)")


def add_targets_argument(parser: argparse.ArgumentParser, lesions: bool = True) -> None:
    """``--targets`` (and, when ``lesions``, how lesions are matched and sized)."""
    parser.add_argument("--targets", nargs="+", metavar="NAME=V[,V...][:lesions]", help=TARGETS_HELP)
    if not lesions:
        return
    parser.add_argument("--lesion-match", choices=("iou", "overlap"),
                        help="lesion targets: a true and a predicted lesion match when their IoU is above "
                             "--lesion-iou, one to one (iou, the default: Panoptica, Metrics Reloaded), or when "
                             "they touch (overlap: BraTS 2023, autoPET)")
    parser.add_argument("--lesion-iou", type=non_negative_float, metavar="T",
                        help="lesion targets: the IoU a match must exceed (default 0.5)")
    parser.add_argument("--lesion-sizes", type=positive_float, nargs=2, metavar=("SMALL_ML", "LARGE_ML"),
                        help="lesion targets: small below SMALL_ML mL, large from LARGE_ML mL (default 1 10)")


def targets_option(args: argparse.Namespace) -> list[str] | None:
    """``--targets`` as given (checked: a text that is not NAME=V[,V...][:lesions] is an OptionError)."""
    texts = getattr(args, "targets", None)
    if not texts:
        return None
    from ..core.targets import parse_targets

    return [t.text() for t in parse_targets(texts)]


def lesion_option(args: argparse.Namespace) -> dict[str, Any] | None:
    """The lesion rule's options given (None: its defaults), checked now."""
    options: dict[str, Any] = {}
    if getattr(args, "lesion_match", None):
        options["match"] = args.lesion_match
    if getattr(args, "lesion_iou", None) is not None:
        options["threshold"] = args.lesion_iou
    if getattr(args, "lesion_sizes", None):
        options["small_ml"], options["large_ml"] = args.lesion_sizes
    if not options:
        return None
    from ..evaluation.lesions import LesionRule

    LesionRule(**options)
    return options


#: ``--series-id``'s help: one series of a DICOM folder holding several
SERIES_HELP = "a DICOM folder holding several series: the SeriesInstanceUID of the one to read (the error lists them)"
