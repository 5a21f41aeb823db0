"""Cases on Ray actors (``medsam-eval run --executor ray``); the caller writes the rows.

:class:`RayExecutor` is the third executor beside :class:`~.local_executor.SerialExecutor` and
:class:`~.local_executor.ParallelExecutor`: it yields ``(ref, rows)`` as cases finish and
accepts :meth:`RayExecutor.request_stop` and a ``cancel`` event the same way, so the
runner writes every row through the same atomic store (``--resume`` works after
the driver or a worker is killed) and the table equals a local run's.

* Ray: with no ``address`` a local Ray is started in this process (``address="local"``,
  ``num_cpus`` the cores this process may use, no dashboard) and shut down at the end;
  with an address (``ray start --head`` printed it; ``auto`` finds a local one) the run
  joins that cluster and leaves it running. When this process already called
  ``ray.init`` (tests, a notebook), that Ray is used as it is.
* Workers are actors (:class:`CaseActor`) that build the model and protocol *once*
  from the run's picklable :class:`~.config.RunConfig` (:func:`~.local_executor.build_evaluator`,
  as the local workers do) and segment many cases. Each actor has one case at a time and
  a free actor takes the next case (dynamic scheduling: a large case holds up no queue).
  Each reserves ``num_cpus`` = its torch threads and ``gpus_per_worker`` GPUs.
* A worker that dies (:class:`ray.exceptions.RayActorError`: a native crash, out of
  memory, its node lost) is replaced by a new actor, which retries the case; a case on
  which workers died :data:`~.local_executor.MAX_CRASHES` times gets ``failed`` rows saying so
  (:func:`~.evaluator.failed_case_rows`, as the local pool does).
* Data: workers read case files by path (a shared filesystem). Before the first case,
  the first actor checks that the first case's files exist where it runs; a file it cannot
  see stops the run with a :class:`~napari_medsam_eval.core.errors.DataError` naming it.
* Non-detached actors die with their driver: a killed run leaves no busy workers.

``ray`` is an optional dependency (``pip install 'napari-medsam-eval[ray]'``), imported
only here and only when this executor is asked for (:func:`import_ray`).
"""
from __future__ import annotations

import json
import os
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..datasets import CaseRef, get_layout
from ..core.errors import DataError
from .evaluator import CaseEvaluator, error_text, failed_case_rows
from .config import RunConfig
from .local_executor import CANCEL_POLL_S, MAX_CRASHES, _set_threads, build_evaluator, limit_threads, threads_per_worker
from .executors import RayUnavailable, import_ray  # noqa: F401 - RayUnavailable: callers catch it from here
from ..core.errors import InputError

Rows = list[dict[str, Any]]
#: test-only: JSON ``{"case_id": ..., "marker_dir": ..., "times": N}`` read by the driver; an actor given
#: that case ends its process (``os._exit``) while ``marker_dir`` holds fewer than N crash markers
CRASH_HOOK_ENV = "MEDSAM_EVAL_RAY_TEST_CRASH"
WORKER_DIED = ("a Ray worker died while segmenting this case (out of memory, a native crash, its node lost, "
               "or the worker could not start)")


# -- worker side ---------------------------------------------------------------

class CaseActor:
    """One Ray worker: the run's evaluator, built once; then one case per call."""

    def __init__(self, config: RunConfig, threads: int, sys_path: list[str], cwd: str,
                 crash_hook: dict[str, Any] | None = None) -> None:
        for entry in reversed(sys_path):  # as a spawned process gets its parent's (a "module:builder" model)
            if entry not in sys.path and os.path.isdir(entry or "."):
                sys.path.insert(0, entry)
        if os.path.isdir(cwd):  # relative case paths and run folders mean what they mean to the driver
            os.chdir(cwd)
        limit_threads(threads)
        self.evaluator: CaseEvaluator = build_evaluator(config)
        _set_threads(threads)  # a builder may have changed it
        self.crash_hook = crash_hook

    def where(self) -> str:
        import socket

        return f"{socket.gethostname()} (pid {os.getpid()})"

    def missing_file(self, paths: list[str]) -> str | None:
        """The first of ``paths`` this worker cannot see, or None."""
        return next((path for path in paths if not os.path.exists(path)), None)

    def evaluate(self, ref_data: dict[str, Any]) -> Rows:
        hook = self.crash_hook
        if hook and ref_data["case_id"] == hook["case_id"]:
            markers = Path(hook["marker_dir"])
            count = len(list(markers.glob("crash-*")))
            if count < int(hook.get("times", 1)):
                (markers / f"crash-{count + 1}-{os.getpid()}").touch()
                os._exit(1)
        return self.evaluator.evaluate(CaseRef.from_dict(ref_data))


def _crash_hook() -> dict[str, Any] | None:
    text = os.environ.get(CRASH_HOOK_ENV)
    return json.loads(text) if text else None


def _declared_files(ref: CaseRef) -> list[str]:
    """Every path a case names (not only those that exist here)."""
    found: list[str] = []
    for value in ref.paths.values():
        found.extend(str(item) for item in (value if isinstance(value, (list, tuple)) else [value]))
    return found


# -- driver side ---------------------------------------------------------------

class RayExecutor:
    """Cases spread over ``workers`` Ray actors; yields in completion order.

    ``address``: a Ray cluster to join (None: a local Ray in this process);
    ``gpus_per_worker``: the GPUs each actor reserves (fractions share one GPU).
    ``cancel`` set: the cases finished so far are yielded, then iteration ends and
    the actors are killed (the cases running give no rows).
    """

    def __init__(self, config: RunConfig, refs: Iterable[CaseRef], cancel: threading.Event | None = None) -> None:
        if config.workers < 1:
            raise InputError(f"workers must be >= 1, got {config.workers}")
        self.config = config
        self.workers = int(config.workers)
        self.address = config.ray_address or None
        self.gpus = float(config.gpus_per_worker)
        self.pending: deque[CaseRef] = deque(refs)
        self.crashes: dict[str, int] = {}
        self.cancel = cancel
        self.threads = 1
        self._stop = False
        self._ray: Any = None
        self._actor_class: Any = None
        #: where each started actor ran (``host (pid N)``), for logs and tests
        self.started_on: list[str] = []

    def request_stop(self) -> None:
        self._stop = True

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def _connect(self) -> bool:
        """Ray initialised for this run; True when this call did it (and shuts it down after)."""
        ray = self._ray
        if ray.is_initialized():
            return False
        if self.address:
            ray.init(address=self.address, log_to_driver=False)
        else:
            ray.init(address="local", num_cpus=threads_per_worker(1), include_dashboard=False,
                     log_to_driver=False, _node_ip_address="127.0.0.1")
        return True

    def _size(self) -> None:
        """Threads per actor from the cluster's CPUs; fewer actors than asked when they would not fit."""
        ray = self._ray
        total = ray.cluster_resources()
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        cpus = int(total.get("CPU", 1))
        largest = max((int(n.get("CPU", 0)) for n in nodes), default=cpus) or 1
        self.threads = max(1, min(cpus // self.workers, largest))
        fit = max(1, cpus // self.threads)
        if self.gpus > 0:
            gpus = float(total.get("GPU", 0))
            if gpus < self.gpus:
                raise InputError(f"{self.gpus:g} GPUs per worker asked for; the Ray cluster has {gpus:g}")
            fit = min(fit, int(gpus // self.gpus))
        if fit < self.workers:
            print(f"warning: the Ray cluster fits {fit} workers of {self.threads} CPUs"
                  + (f" and {self.gpus:g} GPUs" if self.gpus else "") + f", not {self.workers}", file=sys.stderr)
            self.workers = fit

    def _new_actor(self) -> Any:
        return self._actor_class.options(num_cpus=self.threads, num_gpus=self.gpus, max_restarts=0).remote(
            self.config, self.threads, list(sys.path), os.getcwd(), _crash_hook())

    def _check_data(self, actor: Any) -> None:
        """The first actor started and sees the first case's files; else a clear error now."""
        ray = self._ray
        first = self.pending[0]
        try:
            where = ray.get(actor.where.remote())
            missing = ray.get(actor.missing_file.remote(_declared_files(first)))
        except ray.exceptions.RayActorError as error:
            raise RuntimeError(f"the first Ray worker could not start: {_reason(error)}") from None
        self.started_on.append(where)
        if missing is not None:
            raise DataError(f"a Ray worker on {where} cannot see this file of case {first.case_id}; the workers "
                            "read case files by path, so the dataset must be on a filesystem shared by the "
                            "driver and every worker node, at the same path", missing)

    def __iter__(self) -> Iterator[tuple[CaseRef, Rows]]:
        if not self.pending:
            return
        self._ray = ray = import_ray()
        self._actor_class = ray.remote(CaseActor)
        started = self._connect()
        actors: list[Any] = []
        try:
            self._size()
            actors = [self._new_actor() for _ in range(self.workers)]
            self._check_data(actors[0])
            yield from self._schedule(actors)
        finally:
            for actor in actors:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:  # noqa: BLE001 - already dead
                    pass
            if started:
                ray.shutdown()

    def _schedule(self, actors: list[Any]) -> Iterator[tuple[CaseRef, Rows]]:
        ray = self._ray
        idle = deque(range(len(actors)))
        running: dict[Any, tuple[int, CaseRef]] = {}

        def submit(slot: int, ref: CaseRef) -> None:
            running[actors[slot].evaluate.remote(ref.to_dict())] = (slot, ref)

        while True:
            while idle and self.pending and not (self._stop or self._cancelled()):
                submit(idle.popleft(), self.pending.popleft())
            if not running:
                return
            poll = None if self.cancel is None else CANCEL_POLL_S
            done, _ = ray.wait(list(running), num_returns=1, timeout=poll)
            for result in done:
                slot, ref = running.pop(result)
                try:
                    rows = ray.get(result)
                except ray.exceptions.RayActorError as error:
                    ray.kill(actors[slot], no_restart=True)
                    actors[slot] = self._new_actor()
                    self.crashes[ref.case_id] = self.crashes.get(ref.case_id, 0) + 1
                    if self.crashes[ref.case_id] >= MAX_CRASHES:
                        idle.append(slot)
                        yield ref, self._failed(ref, f"{WORKER_DIED}: {_reason(error)}")
                    elif not (self._stop or self._cancelled()):
                        submit(slot, ref)  # retried on the new actor
                    else:
                        idle.append(slot)  # stopped: no row; a resumed run does the case again
                    continue
                except Exception as error:  # noqa: BLE001 - e.g. rows that failed to pickle
                    rows = self._failed(ref, error_text(getattr(error, "cause", None) or error))
                idle.append(slot)
                yield ref, rows
            if self._cancelled():
                return  # the running cases are abandoned (their actors killed), none of them recorded

    def _failed(self, ref: CaseRef, reason: str) -> Rows:
        return failed_case_rows(ref, get_layout(self.config.layout), self.config, reason)


def _reason(error: BaseException) -> str:
    """The first line of a Ray error that says what happened."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = next((line for line in lines if "died" in line or "Error" in line), lines[0] if lines else "")
    return " ".join(text.split())[:300] or type(error).__name__
