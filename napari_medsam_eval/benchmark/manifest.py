"""``manifest.json``: what a run needs to be reproduced and resumed.

Written atomically (temporary file + ``os.replace``) when a run starts
(``status`` ``"running"``) and again when it ends (``completed``,
``cancelled``, ``interrupted`` or ``failed``). It records the arguments, the
seed, package/torch/python versions, the platform, the model's own
description (name, checkpoint path and SHA-256, device: ``backend.describe()``),
the protocol with all its options, and the dataset (path, layout, case
count, and a fingerprint of its file listing: relative path and size of every
file the dataset's cases read, whatever ``limit`` selects - cheap, unlike hashing every byte, yet it changes when a
file is added, removed or rewritten to another size).

A run killed by anything (SIGKILL, the out-of-memory killer, a machine that went down) cannot write its
end: its manifest still says ``running``. While it runs the manifest records its ``process`` (host, pid,
start time) and the run holds the folder's lock (:mod:`.run_lock`), so on the next look - ``report``,
``run --resume``, ``explain``, the Benchmark dock - :func:`run_status` reads such a manifest as
:data:`KILLED` when that process is gone (no live process holds the lock); a resumed run's manifest marks
the earlier session that never ended ``killed``.

``--resume`` refuses a run folder whose manifest disagrees on
:data:`RESUME_KEYS`: mixing rows of two configurations in one table would be
silently wrong. Each start appends to ``sessions``. A folder without a
manifest of this format (:func:`is_run_manifest`) is not a run folder:
``--resume`` refuses it before anything in it is touched
(:func:`check_run_folder`), so a user's ``results.csv`` or ``report.md`` is
never replaced.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from ..datasets import CaseRef
from ..core.checksum import sha256_file
from ..core.errors import DataError
from ..core.ownership import folder_contents
from .config import config_differences
from .files import MANIFEST_FILE
from .run_lock import lock_held
from ..core.temp_files import temporary_beside

FORMAT_VERSION = 1
#: what :func:`run_status` reads a ``running`` manifest as when the process that wrote it is gone
KILLED = "killed"
#: a process's start time may be read this many seconds apart (clock ticks, rounding)
_START_SLACK_S = 2.0


def now() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _version(distribution: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(distribution)
    except Exception:  # noqa: BLE001 - not installed
        return None


def environment() -> dict[str, Any]:
    """Versions and platform facts."""
    from .. import __version__

    torch_version = None
    if "torch" in sys.modules:  # never import torch just to record it
        torch_version = getattr(sys.modules["torch"], "__version__", None)
    return {
        "package": "napari-medsam-eval",
        "package_version": __version__,
        "python": sys.version.split()[0],
        "torch": torch_version or _version("torch"),
        "numpy": _version("numpy"),
        "SimpleITK": _version("SimpleITK"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def dataset_fingerprint(refs: Iterable[CaseRef], root: str | Path) -> dict[str, Any]:
    """File count, total bytes and a SHA-256 of the sorted (relative path, size) listing."""
    root = Path(root)
    entries = set()
    for ref in refs:
        for path in ref.files():
            try:
                size = path.stat().st_size
            except OSError:
                continue
            try:
                name = path.resolve().relative_to(root.resolve()).as_posix()
            except ValueError:
                name = path.as_posix()
            entries.add((name, size))
    digest = hashlib.sha256()
    for name, size in sorted(entries):
        digest.update(f"{name}\t{size}\n".encode())
    return {"file_count": len(entries), "total_bytes": sum(s for _, s in entries), "listing_sha256": digest.hexdigest()}


def inputs_sha256(ref: CaseRef) -> str:
    """One SHA-256 of the contents of every file a case reads (:meth:`CaseRef.files`, in their order); "" for a
    case none of whose files can be read. A row keeps it (``input_sha256``): ``--resume`` redoes a case whose
    files changed since, a size kept or not (:func:`changed_inputs`)."""
    digest = hashlib.sha256()
    found = False
    for path in ref.files():
        try:
            digest.update(f"{path.name}\t{sha256_file(path)}\n".encode("utf-8", "surrogateescape"))
            found = True
        except OSError:
            digest.update(f"{path.name}\tunreadable\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest() if found else ""


def changed_inputs(rows: Iterable[dict[str, Any]], refs: Iterable[CaseRef]) -> set[str]:
    """The cases of ``rows`` whose files' contents are not the ones they were computed from (their rows'
    ``input_sha256``; a row without one, from a run folder made before it, is trusted). Each case's files
    are read once."""
    recorded: dict[str, str] = {}
    for row in rows:
        if row.get("input_sha256"):
            recorded[str(row["case_id"])] = str(row["input_sha256"])
    return {ref.case_id for ref in refs if ref.case_id in recorded and inputs_sha256(ref) != recorded[ref.case_id]}


def this_process() -> dict[str, Any]:
    """This process as a ``running`` manifest records it: host, pid and start time (seconds since the epoch;
    None where it cannot be read)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": process_start(os.getpid())}


def process_start(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), from ``/proc`` (or psutil where installed);
    None where neither says (the pid is then the only witness)."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        pass
    try:
        import psutil

        return float(psutil.Process(int(pid)).create_time())
    except Exception:  # noqa: BLE001 - not installed, or no such process
        return None


def process_alive(process: dict[str, Any]) -> bool:
    """Whether the process a manifest recorded (:func:`this_process`) is still running: on this host, its pid
    alive and started when it was (a pid used again by another process is not it)."""
    try:
        pid = int(process["pid"])
    except (KeyError, TypeError, ValueError):
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, someone else's
    except OSError:
        return False
    started, now = process.get("started"), process_start(pid)
    return started is None or now is None or abs(float(started) - now) <= _START_SLACK_S


def run_status(run_dir: str | Path, manifest: dict[str, Any] | None = None) -> str | None:
    """A run's status as it is now: the manifest's ``status``, except a ``running`` one whose process is gone,
    which reads :data:`KILLED` (module doc); None without a manifest. A process recorded on this host is
    looked up by pid and start time; else (another host, a manifest from before the record) a run is running
    while a live process holds the folder's lock."""
    manifest = read_manifest(run_dir) if manifest is None else manifest
    if not manifest:
        return None
    status = manifest.get("status")
    if status != "running":
        return status
    process = manifest.get("process")
    if isinstance(process, dict) and process.get("host") == socket.gethostname():
        alive = process_alive(process)
    else:
        alive = lock_held(run_dir)
    return "running" if alive else KILLED


def killed_words(manifest: dict[str, Any]) -> str:
    """Why a ``running`` manifest reads :data:`KILLED`, in words: the process that wrote it and that it is gone."""
    process = manifest.get("process")
    if isinstance(process, dict) and process.get("pid") is not None:
        return (f"its process {process['pid']} on {process.get('host', 'this machine')} is gone without ending it: "
                "killed (a signal, out of memory) or its machine went down")
    return "no process holds its lock and it never wrote its end: killed (a signal, out of memory) or its machine " \
           "went down"


def write_manifest(run_dir: str | Path, manifest: dict[str, Any]) -> Path:
    """Write ``manifest.json`` atomically; returns its path. A ``running`` manifest records this process
    (:func:`this_process`), and an earlier session that never ended is written as ``killed``."""
    path = Path(run_dir) / MANIFEST_FILE
    manifest = _with_process(manifest)
    handle, temp = temporary_beside(path)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(manifest, stream, indent=2, sort_keys=False, default=str)
            stream.write("\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, path)
    finally:
        Path(temp).unlink(missing_ok=True)
    return path


def _with_process(manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` as written (a copy where anything is added; the caller's dict is left as it is)."""
    sessions = manifest.get("sessions")
    if isinstance(sessions, list) and len(sessions) > 1:
        ended = [dict(s, status=KILLED) if isinstance(s, dict) and not s.get("ended_at") and "status" not in s
                 else s for s in sessions[:-1]]
        manifest = {**manifest, "sessions": ended + sessions[-1:]}
    if manifest.get("status") == "running":
        manifest = {**manifest, "process": this_process()}
    return manifest


def read_manifest(run_dir: str | Path) -> dict[str, Any] | None:
    """The manifest of a run folder, or None without one; DataError when unreadable or of a format this
    version does not read (:data:`FORMAT_VERSION`): it is never reported or compared as if it were."""
    path = Path(run_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DataError(f"run manifest cannot be read ({error})", path) from None
    found = manifest.get("format", "none") if isinstance(manifest, dict) else type(manifest).__name__
    if not isinstance(manifest, dict) or type(found) is not int or found != FORMAT_VERSION:
        raise DataError(f"a run manifest of format {json.dumps(found)}: this version of medsam-eval reads format "
                        f"{FORMAT_VERSION} (the folder was made by another version, or the file was edited); "
                        "run again into a new folder", path)
    return manifest


def is_run_manifest(manifest: Any) -> bool:
    """Whether a parsed ``manifest.json`` is a run manifest of this format (``format``, ``status``, ``config``)."""
    return (isinstance(manifest, dict) and type(manifest.get("format")) is int
            and manifest["format"] == FORMAT_VERSION and isinstance(manifest.get("status"), str)
            and isinstance(manifest.get("config"), dict))


def check_run_folder(run_dir: str | Path, action: str = "resume") -> dict[str, Any]:
    """The manifest of a run folder this tool made; a :class:`DataError` naming the folder and what it holds
    (or what is wrong with its manifest) otherwise, in the words of ``action`` (``"resume"``: "cannot resume";
    another, ``"explain"``: that it is not a run folder, which ``action`` needs). Reads only."""
    run_dir = Path(run_dir)
    resuming = action == "resume"
    start = "cannot resume: " if resuming else ""
    if not (run_dir / MANIFEST_FILE).exists():
        hint = ("--resume continues a run started in that folder, so give that folder or a new one" if resuming
                else f"{action} takes a folder that `medsam-eval run` made")
        raise DataError(f"{start}not a run folder of medsam-eval (no {MANIFEST_FILE}; it holds "
                        f"{folder_contents(run_dir)}); {hint}", run_dir)
    try:
        manifest = read_manifest(run_dir)
    except DataError:
        manifest = None
    if not is_run_manifest(manifest):
        raise DataError(f"{start}{MANIFEST_FILE} is not a run manifest of medsam-eval (format "
                        f"{FORMAT_VERSION} with status and config); give a run folder this tool made"
                        + (", or a new folder" if resuming else ""), run_dir)
    return manifest


def check_resumable(previous: dict[str, Any], current: dict[str, Any], run_dir: str | Path,
                    model_now: dict[str, Any] | None = None) -> None:
    """DataError naming every :data:`RESUME_KEYS` entry that differs from the earlier run,
    and the model's checkpoint when its SHA-256 (``model_now``: ``backend.describe()``) differs."""
    differences = config_differences(previous.get("config", {}), current.get("config", {}))
    model_before = previous.get("model") or {}
    for key in sorted(k for k in (model_now or {}) if k.endswith("sha256")):
        before, now_ = model_before.get(key), model_now[key]
        if before is not None and before != now_:
            differences.append(f"model {key}: {str(before)[:12]}... -> {str(now_)[:12]}...")
    for key in ("precision",):  # fp32 and int8 rows never share a table
        before, now_ = model_before.get(key), (model_now or {}).get(key)
        if before is not None and now_ is not None and before != now_:
            differences.append(f"model {key}: {before} -> {now_}")
    if differences:
        raise DataError("cannot resume: this run folder was made with other settings ("
                        + "; ".join(differences) + "); use a new output folder", run_dir)


def check_same_dataset(previous: dict[str, Any], current: dict[str, Any], run_dir: str | Path) -> None:
    """DataError when the dataset's file listing (names and sizes) changed since the run started:
    rows computed on other files would be mixed into one table."""
    before = previous.get("dataset", {})
    now_ = current.get("dataset", {})
    if before.get("listing_sha256") and before["listing_sha256"] != now_.get("listing_sha256"):
        raise DataError(f"cannot resume: the dataset's files changed since this run started ({before.get('file_count')} "
                        f"files, {before.get('total_bytes')} bytes then; {now_.get('file_count')} files, "
                        f"{now_.get('total_bytes')} bytes now); use a new output folder", run_dir)
