"""OpenVINO and NNCF without Intel's telemetry.

``import openvino`` (its ``tools.ovc`` package, at import), ``openvino.convert_model`` and
``import nncf`` start Intel's telemetry (the ``openvino_telemetry`` package): unless the user
has opted out with Intel's own tool, it writes a client id and a usage count under
``~/intel`` and sends events to Google Analytics. A tool that reads medical images should do
neither behind its user's back (and nothing of ours writes into the home folder unasked: the
test suite checks it), so every import of OpenVINO or NNCF in the package goes through
:func:`import_openvino` and :func:`import_nncf`, which import them with OpenVINO's own stand-in
(a ``Telemetry`` whose every method does nothing, as OpenVINO's own ``telemetry_stub``) in
place of the telemetry package; the conversion keeps the stand-in. Where another library imported
OpenVINO first, its telemetry is that library's.
"""
from __future__ import annotations

import sys
import threading
import types
from contextlib import contextmanager
from typing import Any, Iterator

#: the modules that hold the telemetry package under the name ``tm`` once imported
_HOLDERS = ("openvino.tools.ovc.telemetry_utils", "openvino.tools.ovc.convert_impl")
_lock = threading.Lock()


class _Silent:
    """A telemetry that does nothing (OpenVINO's ``telemetry_stub``, written here: it must exist before OpenVINO
    is imported)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        return None

    send_event = send_error = send_stack_trace = start_session = end_session = force_shutdown = _nothing


@contextmanager
def telemetry_off() -> Iterator[None]:
    """Imports and conversions inside see a telemetry package that does nothing."""
    stub = types.ModuleType("openvino_telemetry")
    stub.Telemetry = _Silent
    with _lock:
        saved_module = sys.modules.get("openvino_telemetry")
        sys.modules["openvino_telemetry"] = stub
        saved_tm = {}
        for name in _HOLDERS:
            holder = sys.modules.get(name)
            if holder is not None and hasattr(holder, "tm"):
                saved_tm[name] = holder.tm
                holder.tm = stub
        try:
            yield
        finally:
            for name, tm in saved_tm.items():
                sys.modules[name].tm = tm
            if saved_module is None:
                sys.modules.pop("openvino_telemetry", None)
            else:
                sys.modules["openvino_telemetry"] = saved_module


def import_openvino() -> types.ModuleType:
    """The ``openvino`` package, imported with the telemetry off (its first import starts it); ImportError
    where it is not installed."""
    module = sys.modules.get("openvino")
    if module is None:
        with telemetry_off():
            import openvino as module
    return module


def convert_model(model: Any, **options: Any) -> Any:
    """``openvino.convert_model(model, **options)`` with the telemetry off."""
    ov = import_openvino()
    from openvino.tools.ovc import convert_impl, telemetry_utils  # noqa: F401 - loaded, so telemetry_off swaps tm

    with telemetry_off():
        return ov.convert_model(model, **options)


def import_nncf() -> Any:
    """The ``nncf`` package, its telemetry object made inside :func:`telemetry_off` (it is made at import)."""
    if "nncf" not in sys.modules:
        import_openvino()
        with telemetry_off():
            import nncf  # noqa: F401
    return sys.modules["nncf"]
