"""MkDocs hook: writes the command-line reference into ``docs/cli.md`` from the live parsers, and
warns (an error under ``--strict``) on a ``medsam-eval`` code line naming a command or an option the
parsers do not have. It runs every ```python block of ``docs/python.md`` and executes the notebook
``docs/notebooks/from_python.ipynb``, whose Markdown (outputs and images included) becomes the page
``notebooks/from_python.md``: a failing example or cell fails the build (``scripts/doc_examples.py``;
``MEDSAM_EVAL_DOCS_EXECUTE=0`` skips running them). Listed under ``hooks:`` in ``mkdocs.yml``."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cli_reference  # noqa: E402 - the generator beside this file
import doc_examples  # noqa: E402 - the runner of the docs' Python, beside this file
from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File  # noqa: E402

log = logging.getLogger("mkdocs.hooks.medsam_eval")
#: the page whose ```python blocks are run, and the notebook made into a page
EXAMPLES_PAGE = "python.md"
NOTEBOOK = "notebooks/from_python.ipynb"


def on_files(files, config):
    """Add the notebook's page (executed unless turned off) and its images to the site."""
    import nbformat

    source = Path(config["docs_dir"]) / NOTEBOOK
    page = NOTEBOOK.replace(".ipynb", ".md")
    if doc_examples.execution_wanted():
        try:
            notebook, seconds = doc_examples.execute_notebook(source)
        except Exception as error:  # a failing cell (CellExecutionError), a kernel that did not start
            raise PluginError(f"{NOTEBOOK}: {type(error).__name__}: {error}") from error
        log.info("%s executed in %.1f s", NOTEBOOK, seconds)
    else:
        notebook = nbformat.read(source, as_version=4)
        log.info("%s not executed (%s=0)", NOTEBOOK, doc_examples.EXECUTE)
    stem = Path(page).stem
    body, images = doc_examples.notebook_markdown(notebook, f"{stem}_files")
    download = f"*This page is the notebook [`{Path(NOTEBOOK).name}`]({Path(NOTEBOOK).name}), run when the site was built.*\n\n"
    files.append(File.generated(config, page, content=download + body))
    folder = str(Path(page).parent)
    for name, data in images.items():
        files.append(File.generated(config, f"{folder}/{name}", content=data))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    for problem in cli_reference.unknown_options(markdown):
        log.warning("%s: %s", page.file.src_path, problem)
    if cli_reference.MARKER in markdown:
        markdown = markdown.replace(cli_reference.MARKER, cli_reference.render())
    if page.file.src_path == EXAMPLES_PAGE and doc_examples.execution_wanted():
        try:
            doc_examples.run_markdown_examples(markdown, f"docs/{EXAMPLES_PAGE}")
        except RuntimeError as error:
            raise PluginError(str(error)) from error
    return markdown
