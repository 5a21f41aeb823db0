"""Running cases one after another or in worker processes; the caller writes the rows.

Both executors yield ``(ref, rows)`` as cases finish and accept
:meth:`request_stop`: no new case starts, the ones already running finish
and are still yielded (so a cancelled run keeps every row it computed).
A ``cancel`` does not wait for the running cases: :class:`SerialExecutor` passes
it (with the run's ``steps``) into the case's propagation, which stops after
its slice and raises :class:`~napari_medsam_eval.core.errors.Cancelled`;
:class:`ParallelExecutor` yields the cases already finished and ends, the
workers terminated. Either way a case that did not finish gives no rows.

:class:`ParallelExecutor` uses a ``spawn`` :class:`~concurrent.futures.ProcessPoolExecutor`
(fork is unsafe once torch has started threads). The initializer sets the
worker's torch/OpenMP threads to ``max(1, cores // workers)`` and builds the
model and protocol *once* per worker from a picklable :class:`~.config.RunConfig`. At
most ``2 x workers`` cases are submitted at a time, so a stop takes effect
quickly and results stream back in completion order.

The workers are capped (:func:`worker_cap`): never more than the CPU cores this process may use, the
memory available (``MemAvailable``) at :data:`WORKER_MEMORY_BYTES` a worker after a reserve for the rest of
the machine, or the cases to run; a cap is said in one line (stderr and ``run.log``): ``--workers 99999``
on 2 cores runs 2 processes, not one per case.

A worker that dies (segfault, out-of-memory kill) breaks the whole pool. The
pool is then rebuilt and the cases that were running are retried one at a
time; a case that breaks a pool twice gets a ``failed`` row saying so. A
worker whose parent dies (the run was killed) exits within a second.
"""
from __future__ import annotations

import importlib
import logging
import multiprocessing
import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Iterable, Iterator

from ..datasets import CaseRef, get_layout
from .config import RunConfig
from .evaluator import CaseEvaluator, error_text, failed_case_rows
from .case_progress import StepProgress
from ..core.errors import InputError

Rows = list[dict[str, Any]]
#: times a case may be running when a worker dies before it is given up
MAX_CRASHES = 2
#: seconds between two looks at the cancel event while parallel cases run
CANCEL_POLL_S = 0.2
#: the memory one worker process is counted at: a LiteMedSAM worker segmenting a hippocampus or DeepLesion
#: case holds about 450 MB (torch, the model, the case, its embeddings cache), rounded up
WORKER_MEMORY_BYTES = 600 * 2**20
#: the memory left to this process and the rest of the machine when workers are counted
RESERVED_MEMORY_BYTES = 2**30

logger = logging.getLogger(__name__)


def build_model(model: str, options: dict[str, Any]) -> Any:
    """A backend by registry name, or by ``"package.module:builder"`` (a backend outside the registry).

    The import-path form lets a run use a backend defined elsewhere, including
    in worker processes, which do not see registry entries added at run time.
    """
    from ..models import BACKENDS, build_backend

    if ":" in model and model not in BACKENDS:
        module_name, _, function = model.partition(":")
        return getattr(importlib.import_module(module_name), function)(**options)
    return build_backend(model, **options)


def build_evaluator(config: RunConfig, backend: Any = None) -> CaseEvaluator:
    """The evaluator of a resolved ``config`` (:meth:`RunConfig.resolved`); ``backend`` reuses one already built."""
    from ..protocols import build_protocol

    if backend is None:
        backend = build_model(config.model, config.model_options)
    protocol = build_protocol(config.protocol, **config.protocol_options)
    return CaseEvaluator(get_layout(config.layout), backend, protocol, config)


def threads_per_worker(workers: int, cores: int | None = None) -> int:
    """CPU threads each of ``workers`` processes may use: ``max(1, cores // workers)``."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # pragma: no cover - non-Linux
            cores = os.cpu_count() or 1
    return max(1, int(cores) // max(1, int(workers)))


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity; ``os.cpu_count`` where that is unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def available_memory() -> int | None:
    """The memory available for new processes, in bytes (``MemAvailable`` of ``/proc/meminfo``, else psutil's);
    None where neither says."""
    try:
        for line in open("/proc/meminfo", encoding="ascii"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - not installed
        return None


class WorkerCap:
    """How many worker processes a run starts: ``used`` of ``asked``, and why (:attr:`words`, "" uncapped)."""

    def __init__(self, asked: int, cases: int | None = None, cores: int | None = None,
                 memory: int | None = -1) -> None:
        self.asked = int(asked)
        self.cores = usable_cores() if cores is None else int(cores)
        self.memory = available_memory() if memory == -1 else memory
        limits = {"cores": max(1, self.cores)}
        if self.memory is not None:
            limits["memory"] = max(1, (self.memory - RESERVED_MEMORY_BYTES) // WORKER_MEMORY_BYTES)
        if cases is not None:
            limits["cases"] = max(1, int(cases))
        self.used = min(self.asked, *limits.values())
        self.limits = limits

    @property
    def words(self) -> str:
        """``workers: 99999 asked, 2 used (2 CPU cores; 5.1 GB memory available, 0.6 GB a worker)``; "" when
        the machine takes every worker asked (fewer cases than workers start fewer processes, unsaid)."""
        if min(self.asked, *(v for k, v in self.limits.items() if k != "cases")) >= self.asked:
            return ""
        why = [f"{self.cores} CPU core{'s' if self.cores != 1 else ''}"]
        if self.memory is not None:
            why.append(f"{self.memory / 1e9:.1f} GB memory available, {WORKER_MEMORY_BYTES / 1e9:.1f} GB a worker "
                       f"after {RESERVED_MEMORY_BYTES / 1e9:.1f} GB kept free")
        if "cases" in self.limits:
            why.append(f"{self.limits['cases']} case{'s' if self.limits['cases'] != 1 else ''} to run")
        return f"workers: {self.asked} asked, {self.used} used ({'; '.join(why)})"


def worker_cap(asked: int, cases: int | None = None) -> WorkerCap:
    """The workers a run of ``cases`` cases asking ``asked`` starts (:class:`WorkerCap`; module doc)."""
    return WorkerCap(asked, cases)


class SerialExecutor:
    """Cases in this process, in order, with one evaluator; ``progress`` goes into each case
    (:meth:`CaseEvaluator.evaluate`: its answer False cancels the case running)."""

    def __init__(self, evaluator: CaseEvaluator, refs: Iterable[CaseRef],
                 progress: StepProgress | None = None) -> None:
        self.evaluator = evaluator
        self.refs = list(refs)
        self.progress = progress
        self._stop = False

    def request_stop(self) -> None:
        self._stop = True

    def __iter__(self) -> Iterator[tuple[CaseRef, Rows]]:
        for ref in self.refs:
            if self._stop:
                return
            yield ref, self.evaluator.evaluate(ref, progress=self.progress)


# -- worker side ---------------------------------------------------------------

_EVALUATOR: CaseEvaluator | None = None


def _set_threads(threads: int) -> None:
    try:
        import torch
    except ImportError:  # pragma: no cover - baselines run without torch
        return
    torch.set_num_threads(threads)


def limit_threads(threads: int) -> None:
    """This worker process computes on ``threads`` threads: torch's count and the variables the
    libraries it starts (OpenMP, MKL, OpenBLAS) read."""
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(threads)
    _set_threads(threads)


def _exit_with_parent(parent: int, interval_s: float = 1.0) -> None:
    """End this worker once its parent is gone (a killed run must not leave busy orphans)."""
    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _init_worker(config: RunConfig, threads: int) -> None:
    """Process-pool initializer: limit threads, then build the model once."""
    global _EVALUATOR
    _exit_with_parent(os.getppid())
    limit_threads(threads)
    _EVALUATOR = build_evaluator(config)
    _set_threads(threads)  # a builder may have changed it


def _evaluate_in_worker(ref_data: dict[str, Any]) -> Rows:
    if _EVALUATOR is None:  # pragma: no cover - the initializer failed
        raise RuntimeError("worker has no evaluator")
    return _EVALUATOR.evaluate(CaseRef.from_dict(ref_data))


# -- main side -----------------------------------------------------------------

class ParallelExecutor:
    """Cases spread over ``workers`` spawned processes; yields in completion order.

    ``cancel`` set: the cases finished so far are yielded, then iteration ends and the
    cases still running are abandoned (their workers terminated).
    """

    def __init__(self, config: RunConfig, refs: Iterable[CaseRef], cancel: threading.Event | None = None) -> None:
        if config.workers < 2:
            raise InputError(f"ParallelExecutor needs at least 2 workers, got {config.workers}")
        self.config = config
        self.pending: deque[CaseRef] = deque(refs)
        self.cap = worker_cap(config.workers, len(self.pending))
        self.workers = self.cap.used
        if self.cap.words:
            logger.warning("%s", self.cap.words)
            print(f"note: {self.cap.words}", file=sys.stderr)
        self.threads = threads_per_worker(self.workers)
        self.suspects: deque[CaseRef] = deque()
        self.crashes: dict[str, int] = {}
        self.cancel = cancel
        self._stop = False

    def request_stop(self) -> None:
        self._stop = True

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def _pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_init_worker, initargs=(self.config, self.threads))

    def _fill(self, pool: ProcessPoolExecutor, running: dict[Future, CaseRef]) -> None:
        if self._stop or self._cancelled():
            return
        if self.suspects:  # after a crash, the cases that were running go alone
            if not running:
                ref = self.suspects.popleft()
                running[pool.submit(_evaluate_in_worker, ref.to_dict())] = ref
            return
        while self.pending and len(running) < 2 * self.workers:
            ref = self.pending.popleft()
            running[pool.submit(_evaluate_in_worker, ref.to_dict())] = ref

    def __iter__(self) -> Iterator[tuple[CaseRef, Rows]]:
        pool = self._pool()
        running: dict[Future, CaseRef] = {}
        finished = False
        try:
            while True:
                self._fill(pool, running)
                if not running:
                    finished = True
                    return
                poll = None if self.cancel is None else CANCEL_POLL_S
                done, _ = wait(running, timeout=poll, return_when=FIRST_COMPLETED)
                broken = False
                for future in done:
                    ref = running.pop(future)
                    try:
                        rows = future.result()
                    except BrokenProcessPool:
                        broken = True
                        running[future] = ref  # handled with the others below
                        continue
                    except Exception as error:  # noqa: BLE001 - e.g. rows that failed to pickle
                        rows = failed_case_rows(ref, get_layout(self.config.layout), self.config,
                                                error_text(error))
                    yield ref, rows
                if self._cancelled():
                    return  # the running cases are abandoned (finally), none of them recorded
                if broken:
                    yield from self._recover(running)
                    pool.shutdown(wait=True, cancel_futures=True)
                    pool = self._pool()
        finally:
            if finished:
                pool.shutdown(wait=True)
            else:  # Ctrl-C, an error, or the caller stopped iterating: do not wait for running cases
                _abandon(pool)

    def _recover(self, running: dict[Future, CaseRef]) -> Iterator[tuple[CaseRef, Rows]]:
        """Cases lost with a broken pool: retried alone, or failed after :data:`MAX_CRASHES`."""
        for ref in sorted(running.values(), key=lambda r: r.case_id):
            self.crashes[ref.case_id] = self.crashes.get(ref.case_id, 0) + 1
            if self.crashes[ref.case_id] >= MAX_CRASHES:
                message = ("a worker process died while segmenting this case (out of memory, a native crash, "
                           "or the worker could not start)")
                yield ref, failed_case_rows(ref, get_layout(self.config.layout), self.config, message)
            else:
                self.suspects.append(ref)
        running.clear()


def _abandon(pool: ProcessPoolExecutor) -> None:
    """Shut ``pool`` down without waiting: pending cases cancelled, workers terminated.

    ``ProcessPoolExecutor`` has no public way to stop running tasks before
    Python 3.14 (``terminate_workers``); its ``_processes`` map is used instead.
    """
    processes = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=10)
