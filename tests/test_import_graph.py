"""Arrows point down: the package's rooms in one order, no import from a lower room into a higher one
(imports inside functions and under ``TYPE_CHECKING`` included), and no circle between rooms.

Read from the source with :mod:`ast` (nothing is imported), so the check is deterministic and fast.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "napari_medsam_eval"
NAME = PACKAGE.name

#: the rooms, lowest first: a module may import its own room and the rooms before it, never one after it
FLOORS: tuple[tuple[str, frozenset[str]], ...] = tuple((name, frozenset(rooms)) for name, rooms in (
    ("foundations", {"", "core"}),
    ("io", {"io"}),
    ("datasets", {"datasets"}),
    ("embeddings", {"embeddings"}),
    ("models", {"models"}),
    ("evaluation", {"evaluation"}),
    ("protocols", {"protocols"}),
    ("propagation", {"propagation"}),
    ("studies", {"studies"}),
    ("benchmark", {"benchmark"}),
    ("report and analysis", {"report"}),
    ("session", {"session"}),
    ("public API", {"api"}),
    ("cli and napari", {"cli", "_widgets", "_reader", "_writer", "_sample_data", "_layer_style", "_turns", "_meanwhile",
                        "_set_aside",
                        "__main__"}),
))
FLOOR_OF = {room: index for index, (_name, rooms) in enumerate(FLOORS) for room in rooms}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str:
    """``napari_medsam_eval.io.reader`` -> ``io``; the package itself -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _is_module(module: str) -> bool:
    relative = Path(*module.split(".")[1:]) if "." in module else Path()
    return (PACKAGE / relative).with_suffix(".py").is_file() or (PACKAGE / relative / "__init__.py").is_file()


def imports_of(path: Path) -> set[str]:
    """The package's modules ``path`` imports, wherever the import statement stands."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == NAME)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != NAME:
                continue
            for alias in node.names:  # `from . import session` imports the module session
                found.add(f"{target}.{alias.name}" if _is_module(f"{target}.{alias.name}") else target)
    return found


def _edges() -> dict[str, set[str]]:
    return {_module_name(path): imports_of(path) for path in sorted(PACKAGE.rglob("*.py"))}


def test_every_room_has_a_floor():
    rooms = {_room(module) for module in _edges()}
    assert rooms - set(FLOOR_OF) == set(), "a new room: give it its floor in FLOORS"


def test_no_import_points_up():
    upward = sorted(f"{source} -> {target} ({FLOORS[FLOOR_OF[_room(source)]][0]} -> {FLOORS[FLOOR_OF[_room(target)]][0]})"
                    for source, targets in _edges().items() for target in targets
                    if FLOOR_OF.get(_room(target), -1) > FLOOR_OF.get(_room(source), len(FLOORS)))
    assert upward == []


def test_no_circle_between_rooms():
    graph: dict[str, set[str]] = {}
    for source, targets in _edges().items():
        graph.setdefault(_room(source), set()).update(_room(t) for t in targets if _room(t) != _room(source))
    circles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            room, trail = stack.pop()
            for nxt in graph.get(room, ()):
                if nxt == start:
                    circles.append(" -> ".join(trail + [start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, trail + [nxt]))
    assert circles == []


@pytest.mark.parametrize("source, expected", [
    ("from ..models.litemedsam import X", {f"{NAME}.models.litemedsam"}),
    ("from .. import session", {f"{NAME}.session"}),
    ("if TYPE_CHECKING:\n    from ..report import results", {f"{NAME}.report.results"}),
    ("def f():\n    from ..cli import main", {f"{NAME}.cli"}),
])
def test_the_reader_sees_every_kind_of_import(tmp_path, monkeypatch, source, expected):
    """The check itself: relative, package-level, type-checking and function-level imports are all seen."""
    path = PACKAGE / "protocols" / "_import_graph_probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: source)
    assert imports_of(path) == expected
