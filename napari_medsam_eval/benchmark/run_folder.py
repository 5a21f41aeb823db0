"""A run's folder before the run: made when missing, checked empty (or resumed, or an earlier run replaced), apart
from every input, and removed again when a refused start left nothing in it but the lock (:mod:`.runner`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core.errors import DataError, os_problem
from ..core.ownership import check_not_inputs
from ..io.writers import check_writable_folder
from .files import LOCK_FILE
from .manifest import check_run_folder
from .run_replace import earlier_run_entries


def check_out_dir(out_dir: Path, resume: bool, overwrite: bool = False) -> None:
    """The run folder is a folder (or can be made), writable, and empty unless resumed or replaced
    (``overwrite``: a run folder holding nothing but an earlier run's files, :mod:`.run_replace`).

    Called before the lock (a clear error early) and again under it (another
    run may have written into the folder in between); the lock file alone
    does not count as content.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise DataError("the run output path exists and is not a folder", out_dir)
    check_writable_folder(out_dir)
    held = out_dir.is_dir() and any(p.name != LOCK_FILE for p in out_dir.iterdir())
    if held and not resume and overwrite:
        earlier_run_entries(out_dir)  # refuses (removing nothing) a folder holding more than a run
        return
    if held and not resume:
        raise _in_cli_words(DataError("the run folder is not empty; resume it with resume=True, replace the earlier "
                                      "run with overwrite=True, or choose a new folder", out_dir),
                            "the run folder is not empty; resume it with --resume, or choose a new folder")
    if held:
        check_run_folder(out_dir)  # only a folder holding our manifest is resumed; nothing else is touched


def _in_cli_words(error: DataError, problem: str) -> DataError:
    """``error`` carrying ``problem`` as the command line says it (``--resume`` where the API says
    ``resume=True``): :func:`napari_medsam_eval.cli.main` prints its ``cli_text``."""
    error.cli_text = str(DataError(problem, error.path))  # type: ignore[attr-defined]
    return error


def check_apart_from_inputs(out_dir: Path, dataset: Path, model_options: dict[str, Any],
                             protocol_options: dict[str, Any]) -> None:
    """The run folder is not, is not inside and does not hold an input: the dataset, the checkpoint,
    the prompt log or the embedding store (:func:`~napari_medsam_eval.core.ownership.check_not_inputs`)."""
    from ..embeddings.config import resolve_root

    def path(value: Any) -> Any:
        return value if isinstance(value, (str, os.PathLike)) else None

    inputs = [("the dataset", dataset), ("the checkpoint", path(model_options.get("checkpoint"))),
              ("the prompt log", path(protocol_options.get("log")))]
    try:
        inputs.append(("the embedding store", resolve_root(model_options.get("embeddings"))))
    except ValueError:  # not a folder, true or false: the model's builder names the option
        pass
    check_not_inputs([("the run folder", out_dir)], inputs)


def make_out_dir(out_dir: Path) -> bool:
    """Create the run folder; True when this call created it."""
    if out_dir.is_dir():
        return False
    try:
        out_dir.mkdir(parents=True)
    except FileExistsError:
        return False
    except OSError as error:
        raise DataError(f"cannot create the run folder: {os_problem(error)}", out_dir) from None
    return True


def remove_if_untouched(out_dir: Path) -> None:
    """Remove a run folder this run created when it holds nothing but the lock (a refused start leaves no trace)."""
    try:
        if all(p.name == LOCK_FILE for p in out_dir.iterdir()):
            (out_dir / LOCK_FILE).unlink(missing_ok=True)
            out_dir.rmdir()
    except OSError:
        pass


__all__ = ["check_apart_from_inputs", "check_out_dir", "make_out_dir", "remove_if_untouched"]
