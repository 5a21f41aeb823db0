"""The house's rules that are not about rooms: no circle between modules, sizes, one way to work off the GUI thread.

Read from the source with :mod:`ast` (nothing is imported), like ``test_import_graph.py``, whose import
reader these tests share.
"""
from __future__ import annotations

import ast
from pathlib import Path

from test_import_graph import PACKAGE, _edges, _module_name, imports_of

#: the napari layer (widgets, reader, writer, sample data): what may import Qt or napari
WIDGETS = PACKAGE / "_widgets"
#: a dock widget's module: the most lines it may have
WIDGET_LINES = 250
#: any other module: the most lines it may have without saying why at its top
CORE_LINES = 400
#: what a module's docstring says when it is longer on purpose
LONGER_ON_PURPOSE = "lines on purpose"
#: the dock widgets napari builds (``napari.yaml``); their sections never see them
PARENTS = {"SegmentWidget": "segment.dock", "BenchmarkWidget": "benchmark.dock", "CompareWidget": "compare.dock"}
#: where background work starts: the one worker glue of the widgets and its job tracking
WORKER_MODULES = {"_worker.py", "_jobs.py"}
#: calls that start work off the GUI thread
THREAD_STARTS = {"create_worker", "thread_worker", "Thread", "start_new_thread", "ThreadPoolExecutor"}


def _circles() -> list[list[str]]:
    """The package's strongly connected module groups (Tarjan), each a circle of imports."""
    graph = {source: {t for t in targets if t != source} for source, targets in _edges().items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_circle_between_modules():
    """No module imports one that imports it back, directly or around a ring (type-checking imports too)."""
    assert _circles() == []


def test_the_circle_finder_sees_a_ring(monkeypatch):
    """The check itself: a ring of three modules is one circle."""
    ring = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    monkeypatch.setattr(f"{__name__}._edges", lambda: ring)
    assert _circles() == [["p.a", "p.b", "p.c"]]


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_widget_modules_stay_small():
    """A dock widget's module is at most 250 lines: a widget composes sections, each in its own module."""
    too_long = {path.name: _lines(path) for path in sorted(WIDGETS.rglob("*.py")) if _lines(path) > WIDGET_LINES}
    assert too_long == {}


def test_other_modules_stay_small_or_say_why():
    """Any other module is at most 400 lines, or its docstring says why it is longer."""
    too_long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if WIDGETS in path.parents or _lines(path) <= CORE_LINES:
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if LONGER_ON_PURPOSE not in doc:
            too_long[str(path.relative_to(PACKAGE))] = _lines(path)
    assert too_long == {}


def _names(node: ast.AST) -> set[str]:
    """The names and attributes ``node`` uses, and the words of its string type hints (not its docstrings)."""
    found = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    found |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    hints = [n.annotation for n in ast.walk(node) if isinstance(n, ast.arg) and n.annotation]
    hints += [n.annotation for n in ast.walk(node) if isinstance(n, ast.AnnAssign)]
    hints += [n.returns for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns]
    for hint in hints:
        found |= {word for c in ast.walk(hint) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                  for word in c.value.replace("[", " ").replace("]", " ").replace("|", " ").replace(".", " ").split()}
    return found


def test_widget_sections_never_see_their_parent():
    """A section is given the session, the worker runner, the viewer and plain callbacks: no module but the
    parent's own imports a dock widget's module or names its class (in a type hint or anywhere else)."""
    seen = []
    for path in sorted(WIDGETS.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for parent, parent_module in PARENTS.items():
            if module.endswith(f"._widgets.{parent_module}") or path.name == "__init__.py":
                continue
            if f"{PACKAGE.name}._widgets.{parent_module}" in imports_of(path):
                seen.append(f"{module} imports {parent_module}")
            if parent in _names(tree):
                seen.append(f"{module} names {parent}")
    assert seen == []


def test_background_work_goes_through_the_worker_runner():
    """Only the worker glue starts threads or napari workers; every other widget module asks a WorkerRunner."""
    starts = []
    for path in sorted(WIDGETS.rglob("*.py")):
        if path.name in WORKER_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in THREAD_STARTS:
                    starts.append(f"{path.name}:{node.lineno} {name}")
            elif isinstance(node, ast.FunctionDef) and any(
                    THREAD_STARTS & _names(decorator) for decorator in node.decorator_list):
                starts.append(f"{path.name}:{node.lineno} @{node.name}")
    assert starts == []
