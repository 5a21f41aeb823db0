"""Executes the documentation's Python: every ```python block of a page, and a notebook.

The site's hook (``scripts/mkdocs_hooks.py``) runs both during ``mkdocs build`` so that an example that no
longer works fails the build; ``tests/test_public_api.py`` runs the same functions so that ``make test``
catches it too. Both run in a temporary working folder with ``MEDSAM_EVAL_REPO`` (the checkout, where
``sample_data/`` is) and ``MEDSAM_EVAL_SHARED_DATA`` (default ``../shared/data`` beside the checkout) set.
``MEDSAM_EVAL_DOCS_EXECUTE=0`` makes the hook skip running them (the notebook's page is then made from the
notebook as committed, without outputs): the docs test does that, the public-API tests run them instead.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
#: the variable that turns the execution off (``0``); anything else, or unset, runs the examples
EXECUTE = "MEDSAM_EVAL_DOCS_EXECUTE"
NOTEBOOK_TIMEOUT_S = 600  # per cell


def execution_wanted() -> bool:
    return os.environ.get(EXECUTE, "1") != "0"


def shared_data() -> Path:
    return Path(os.environ.get("MEDSAM_EVAL_SHARED_DATA") or REPO.parent / "shared" / "data")


def python_blocks(markdown: str) -> list[tuple[int, str]]:
    """Every fenced ```python block of ``markdown``, with the line its code starts on (1-based)."""
    blocks = []
    for match in re.finditer(r"^```python[^\n]*\n(.*?)^```", markdown, re.S | re.M):
        blocks.append((markdown.count("\n", 0, match.start(1)) + 1, match.group(1)))
    return blocks


@contextlib.contextmanager
def example_environment(workdir: Path) -> Iterator[Path]:
    """``workdir`` as the working folder, the data variables set, and Jupyter/IPython kept out of the home
    folder; all put back afterwards."""
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ["MEDSAM_EVAL_REPO"] = str(REPO)
    os.environ["MEDSAM_EVAL_SHARED_DATA"] = str(shared_data())
    for name, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"), ("IPYTHONDIR", "ipython"),
                      ("JUPYTER_CONFIG_DIR", "config")):
        os.environ[name] = str(workdir / ".jupyter" / sub)
    os.chdir(workdir)
    try:
        yield workdir
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def run_markdown_examples(markdown: str, name: str, workdir: Path | None = None) -> dict[str, Any]:
    """Run the ```python blocks of ``markdown`` in order in one namespace (in ``workdir``, default a new
    temporary folder); an exception is re-raised as a RuntimeError naming ``name`` and the block's line.
    Returns the namespace."""
    namespace: dict[str, Any] = {"__name__": "__docs_example__"}
    with tempfile.TemporaryDirectory(prefix="medsam-eval-docs-") as temporary:
        with example_environment(Path(workdir or temporary)):
            for line, code in python_blocks(markdown):
                printed = io.StringIO()  # what the examples print stays out of the build's log
                try:
                    with contextlib.redirect_stdout(printed):
                        exec(compile(code, f"{name}:{line}", "exec"), namespace)
                except Exception as error:
                    raise RuntimeError(f"{name}: the example at line {line} failed: {type(error).__name__}: "
                                       f"{error}\n{printed.getvalue()[-2000:]}") from error
    return namespace


def _kernel_spec(folder: Path) -> None:
    """A ``python3`` kernel spec that is this interpreter (the virtual environment's), in ``folder``."""
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (medsam-eval docs)", "language": "python"}))


def execute_notebook(path: Path, workdir: Path | None = None) -> tuple[Any, float]:
    """Run the notebook at ``path`` with this interpreter as its kernel, in ``workdir`` (default a temporary
    folder); a failing cell raises (nbclient's CellExecutionError). Returns the notebook with its outputs and
    the seconds it took."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="medsam-eval-notebook-") as temporary:
        with example_environment(Path(workdir or temporary)) as folder:
            kernels = folder / ".jupyter" / "kernels-path"
            _kernel_spec(kernels)
            os.environ["JUPYTER_PATH"] = str(kernels)  # searched first: python3 is this interpreter
            os.environ.pop("MPLBACKEND", None)  # the kernel's own inline backend: figures become outputs
            start = time.perf_counter()
            NotebookClient(notebook, kernel_name="python3", timeout=NOTEBOOK_TIMEOUT_S,
                           resources={"metadata": {"path": str(folder)}}).execute()
            return notebook, time.perf_counter() - start


def notebook_markdown(notebook: Any, files_dir: str) -> tuple[str, dict[str, bytes]]:
    """The notebook as Markdown (its outputs included) and its images, named ``files_dir/...`` as the
    Markdown links them."""
    from nbconvert import MarkdownExporter

    body, resources = MarkdownExporter().from_notebook_node(notebook, resources={"output_files_dir": files_dir})
    return body, dict(resources.get("outputs", {}))
