"""A package's names imported on first use (PEP 562), so importing the package loads none of its modules.

``__getattr__, __dir__ = lazy_exports(__name__, {"name": "module", ...}, __all__)`` in a package's
``__init__``: ``package.name`` imports ``package.module`` then. The benchmark and report packages and the
widgets use it: a dock, a script or ``--help`` that needs one name does not load the rest (torch, matplotlib).
"""
from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, Iterable


def lazy_exports(package: str, homes: dict[str, str], public: Iterable[str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` whose names live in the modules ``homes`` names."""
    names = sorted(set(public) | set(homes))

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's name
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:  # noqa: N807
        return names

    return __getattr__, __dir__


__all__ = ["lazy_exports"]
