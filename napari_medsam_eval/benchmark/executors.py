"""Where a run's cases go: the executor names and the check of their settings before any work.

Kept apart from :mod:`.ray_executor` (which runs the cases on Ray) so that the run config
(:mod:`.config`) checks its executor without importing the executors that receive it.
"""
from __future__ import annotations

from typing import Any

from ..core.errors import MedsamEvalError, OptionError
from ..core.errors import InputError

EXECUTORS = ("local", "ray")
INSTALL_HINT = "pip install 'napari-medsam-eval[ray]'"


class RayUnavailable(MedsamEvalError):
    """The Ray executor was asked for and ``ray`` is not installed."""


def import_ray() -> Any:
    """The ``ray`` module, or :class:`RayUnavailable` naming the extra to install."""
    try:
        import ray
    except ImportError as error:
        raise RayUnavailable(f"the Ray executor needs the ray package ({error}); install it with {INSTALL_HINT}") \
            from None
    return ray


def check_executor(executor: str, workers: int, gpus_per_worker: float, address: str | None) -> None:
    """ValueError for settings that cannot run; :class:`RayUnavailable` when Ray is asked for and missing."""
    if executor not in EXECUTORS:
        raise InputError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if executor == "local":
        if address or gpus_per_worker:
            raise InputError("a Ray address and GPUs per worker need the Ray executor (--executor ray)")
        return
    if gpus_per_worker < 0:
        raise InputError(f"GPUs per worker must be >= 0, got {gpus_per_worker}")
    import_ray()
    if address:
        check_reachable(address)


#: seconds to wait for a Ray cluster's port to answer before calling the address wrong
CONNECT_TIMEOUT_S = 5.0


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """OptionError when nothing answers at a ``host:port`` (or ``ray://host:port``) Ray address: ``ray.init``
    itself retries such an address for minutes. ``auto`` and ``local`` are left to Ray."""
    import socket

    text = address.strip()
    if text in ("auto", "local"):
        return
    where = text.split("://", 1)[-1]
    host, sep, port = where.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise OptionError(f"Ray address {address!r} is not host:port (or auto); e.g. 10.0.0.5:6379, as "
                          "'ray start --head' prints it")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        raise OptionError(f"Ray address {address!r}: nothing answers there ({error.strerror or error}); start the "
                          "cluster with 'ray start --head', or leave the address empty for a local Ray") from None
