"""The public API (``napari_medsam_eval.api``): light to import, documented, its signatures locked, its docs run.

Every public name and its :func:`inspect.signature` (a class's, and its public methods') is compared with the
snapshot ``tests/data/public_api.json``: a name added, removed or changed fails unless the CHANGELOG's
``[Unreleased]`` section names it. After naming it there, regenerate the snapshot with::

    .venv/bin/python tests/test_public_api.py --update

The examples of ``docs/python.md`` are run here with the runner the site's hook uses (``scripts/doc_examples.py``),
so ``make test`` catches an example that drifted even where the docs test builds the site without running them;
the notebook ``docs/notebooks/from_python.ipynb`` runs in ``make docs`` and in ``make reproduce``.
"""
from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from figures import REPRODUCE

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "data" / "public_api.json"
CHANGELOG = REPO / "CHANGELOG.md"
HEAVY = ("torch", "napari", "qtpy", "PyQt5", "PyQt6")
sys.path.insert(0, str(REPO / "scripts"))


def describe_api() -> dict[str, dict[str, Any]]:
    """Each public name of the API: what it is and its signature (a class: its methods' too)."""
    from napari_medsam_eval import api

    described: dict[str, dict[str, Any]] = {}
    for name in api.__all__:
        obj = getattr(api, name)
        entry: dict[str, Any] = {"kind": "class" if inspect.isclass(obj) else "function",
                                 "signature": str(inspect.signature(obj))}
        if inspect.isclass(obj):  # its own methods and those it inherits from the package's classes
            own = {}
            for cls in reversed([c for c in obj.__mro__ if c.__module__.startswith("napari_medsam_eval")]):
                own.update(vars(cls))
            entry["methods"] = {attr: str(inspect.signature(getattr(obj, attr)))
                                for attr, value in sorted(own.items())
                                if not attr.startswith("_") and isinstance(value, (staticmethod, classmethod))
                                or not attr.startswith("_") and inspect.isfunction(value)}
        described[name] = entry
    return described


def unreleased_section(text: str) -> str:
    """The CHANGELOG's ``## [Unreleased]`` section (up to the next release heading)."""
    match = re.search(r"^## \[Unreleased\]\s*$(.*?)(?=^## \[|\Z)", text, re.S | re.M)
    return match.group(1) if match else ""


def unannounced_changes(old: dict[str, Any], new: dict[str, Any], changelog: str) -> list[str]:
    """The names added, removed or changed between two snapshots that the [Unreleased] section does not name."""
    unreleased = unreleased_section(changelog)
    changed = sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))
    return [name for name in changed if not re.search(rf"\b{re.escape(name)}\b", unreleased)]


def test_importing_the_api_loads_nothing_heavy():
    code = (f"import napari_medsam_eval.api, sys; loaded = {set(HEAVY)!r} & set(sys.modules); "
            "assert not loaded, loaded")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr


def test_all_is_explicit_and_every_name_resolves():
    from napari_medsam_eval import api

    assert api.__all__ == sorted(api.__all__) and len(api.__all__) == len(set(api.__all__))
    assert all(getattr(api, name) is not None for name in api.__all__)
    with pytest.raises(AttributeError):
        api.not_a_public_name  # noqa: B018


def test_every_public_name_has_a_docstring_with_an_example():
    from napari_medsam_eval import api

    missing = [name for name in api.__all__
               if not re.search(r"Example|>>>", inspect.getdoc(getattr(api, name)) or "")]
    assert missing == []


def test_signatures_match_the_snapshot_or_the_changelog_names_the_change():
    snapshot = json.loads(SNAPSHOT.read_text())
    current = describe_api()
    assert unannounced_changes(snapshot, current, CHANGELOG.read_text()) == [], (
        "a public name changed: name it under ## [Unreleased] in CHANGELOG.md, then run "
        "`python tests/test_public_api.py --update`")


def test_the_lock_catches_a_change_the_changelog_does_not_name():
    current = describe_api()
    changed = json.loads(json.dumps(current))
    name = sorted(changed)[0]
    changed[name]["signature"] = "(x)"
    changelog = "# Changelog\n\n## [Unreleased]\n\n- nothing here\n\n## [0.1.0]\n\n- " + name + " once\n"
    assert unannounced_changes(current, changed, changelog) == [name]
    assert unannounced_changes(current, changed, changelog.replace("nothing here", f"`{name}` takes x")) == []
    assert unannounced_changes(current, {**current, "brand_new": {}}, changelog) == ["brand_new"]


def test_version_is_the_installed_metadata():
    from importlib.metadata import version

    import napari_medsam_eval

    assert napari_medsam_eval.__version__ == version("napari-medsam-eval")


def test_the_notebook_is_committed_without_outputs():
    notebook = json.loads((REPO / "docs" / "notebooks" / "from_python.ipynb").read_text())
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code and all(not cell["outputs"] and cell["execution_count"] is None for cell in code)


@pytest.mark.slow
def test_the_python_page_examples_run(tmp_path):
    """Every ```python block of docs/python.md, in order in one namespace, on the sample data (LiteMedSAM)."""
    import doc_examples

    page = (REPO / "docs" / "python.md").read_text()
    assert len(doc_examples.python_blocks(page)) >= 8
    namespace = doc_examples.run_markdown_examples(page, "docs/python.md", workdir=tmp_path)
    assert 0 <= namespace["scores"]["dice"] <= 1 and len(namespace["table"]) >= 1
    assert (tmp_path / "runs" / "phantom_2d").is_dir()
    # regions and lesions: the lesion kept whole inside the liver, judged lesion by lesion
    lesion, liver = namespace["lesion"], namespace["whole_liver"]
    assert lesion.any() and (lesion & liver).any() and namespace["found"].found + namespace["found"].missed == 1


def test_a_broken_example_fails_the_site_build(tmp_path, monkeypatch):
    """The hook turns an example's exception into mkdocs' PluginError (``mkdocs build`` then fails), naming the
    page and the block's line."""
    import doc_examples
    import mkdocs_hooks
    from mkdocs.exceptions import PluginError

    monkeypatch.setattr(doc_examples, "execution_wanted", lambda: True)
    page = type("Page", (), {"file": type("File", (), {"src_path": mkdocs_hooks.EXAMPLES_PAGE})()})()
    broken = "# Page\n\n```python\nx = 1\n```\n\ntext\n\n```python\nraise ValueError('drifted')\n```\n"
    with pytest.raises(PluginError, match=r"docs/python.md: the example at line 10 failed: ValueError: drifted"):
        mkdocs_hooks.on_page_markdown(broken, page, {}, None)
    assert mkdocs_hooks.on_page_markdown(broken.replace("raise ValueError('drifted')", "y = x + 1"), page, {},
                                         None).startswith("# Page")


@REPRODUCE
def test_the_notebook_runs_and_becomes_a_page_with_figures(shared_data, tmp_path):
    """The notebook, executed as ``make docs`` executes it (75 s here: in ``make reproduce``, not ``make test``,
    whose time is kept for behaviour; the page's examples above run in both)."""
    import doc_examples

    assert (shared_data / "deeplesion_ct_npz").is_dir()
    notebook, _seconds = doc_examples.execute_notebook(REPO / "docs" / "notebooks" / "from_python.ipynb",
                                                       workdir=tmp_path)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    markdown, images = doc_examples.notebook_markdown(notebook, "from_python_files")
    assert len(images) >= 2 and all(f"]({name})" in markdown for name in images)


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_public_api.py --update   (rewrites tests/data/public_api.json)")
    sys.path.insert(0, str(REPO))
    SNAPSHOT.write_text(json.dumps(describe_api(), indent=2, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT.relative_to(REPO)}")
