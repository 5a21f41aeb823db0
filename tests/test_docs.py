"""The README and the documentation site: short, linked, built strictly, and true to the code.

The command-line reference is generated from the live parsers (``scripts/cli_reference.py``), so
these tests check the generator covers every subcommand and option ``--help`` shows; the site is
built with ``mkdocs build --strict`` (the ``docs`` extra, installed by ``make install``), and the
README's and docs' quick example commands are run.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from napari_medsam_eval.cli import main
from napari_medsam_eval.cli.commands import COMMANDS

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = sorted(DOCS.glob("*.md"))
MARKDOWN = [REPO / "README.md", REPO / "CHANGELOG.md", *PAGES]
sys.path.insert(0, str(REPO / "scripts"))
import cli_reference  # noqa: E402 - the generator the site's hook runs

#: the README's first two commands, as they were before the README was shortened
SET_UP = (
    "make demo   # creates .venv, installs everything, benchmarks the sample video with LiteMedSAM "
    "(report in out/demo/), segments and scores the CT phantom",
    "make test   # installs what the tests need (Xvfb included) and runs the whole test suite",
)


def _help(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_readme_is_short_and_starts_with_the_two_commands():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    first_block = re.search(r"```bash\n(.*?)```", text, re.S).group(1).splitlines()
    assert tuple(first_block) == SET_UP
    assert text.index("```bash") < text.index("\n## ")  # before any section
    assert "make test-quick" in text and "make reproduce" in text
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", text))
    assert linked == {p.name for p in PAGES} - {"index.md"}  # a link into every page
    targets = set(re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), re.M))
    assert {"demo", "test", "test-quick", "reproduce", "docs"} <= targets


def test_every_page_is_in_the_navigation():
    config = (REPO / "mkdocs.yml").read_text()
    assert {p.name for p in PAGES} == set(re.findall(r":\s+([\w-]+\.md)$", config, re.M))


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_and_image_resolves(path: Path):
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # links in code blocks are not links
    targets = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", text) + re.findall(r'<img[^>]+src="([^"]+)"', text)
    relative = [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    missing = [t for t in relative if not (path.parent / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_cli_reference_covers_every_subcommand_and_option_help_shows(capsys):
    """Each subcommand's ``--help`` (run here, as a user would) against the generated reference."""
    reference = cli_reference.render()
    top = _help(capsys, ["--help"])
    for name in COMMANDS:
        assert name in top
        assert f"## `medsam-eval {name}`" in reference
        shown = _help(capsys, [name, "--help"])
        options = {o for pair in re.findall(r"^\s{2}(-[^\s,]+)(?:[^,\n]*?, (-[^\s,]+))?", shown, re.M)
                   for o in pair if o}
        assert "--help" in options and len(options) > 1
        section = reference.split(f"## `medsam-eval {name}`", 1)[1].split("\n## ", 1)[0]
        assert [o for o in sorted(options) if not re.search(rf"`{re.escape(o)}[ `,]", section)] == []


def test_cli_reference_gives_every_option_its_default():
    top, subs = cli_reference.parsers()
    reference = cli_reference.render()
    for name, parser in subs.items():
        section = reference.split(f"## `medsam-eval {name}`", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            if action.option_strings and action.default not in (None, False, "==SUPPRESS==") \
                    and not isinstance(action.default, (list, tuple)):
                line = next(l for l in section.splitlines() if f"`{action.option_strings[0]}" in l)
                assert f"(default `{action.default}`)" in line, (name, line)


def test_code_blocks_name_only_options_the_cli_has():
    """What the site's hook warns about (an error under --strict), on the README too; and it does catch one."""
    assert {p.name: cli_reference.unknown_options(p.read_text()) for p in MARKDOWN} == {p.name: [] for p in MARKDOWN}
    bad = "```bash\nmedsam-eval run DATA --out RUN --no-such-option 3\nmedsam-eval frobnicate X\n```\n"
    assert len(cli_reference.unknown_options(bad)) == 2


def test_quick_example_commands_run(capsys, monkeypatch):
    """Every ``info`` and ``score`` line of the README's and the docs' code blocks on the bundled sample data."""
    monkeypatch.chdir(REPO)
    lines = [line for path in MARKDOWN for line in cli_reference.command_lines(path.read_text())
             if line.split()[1] in ("info", "score") and "sample_data/" in line]
    assert len(lines) >= 3
    for line in lines:
        assert main(shlex.split(line)[1:]) == 0, line
    assert "label_rater2" in "".join(lines) and "DSC" in capsys.readouterr().out


def _module_from(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)  # without importing napari with its package
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shortcut_table_lists_every_key():
    keys = _module_from(REPO / "napari_medsam_eval" / "_widgets" / "common" / "_shortcuts.py")
    table = (DOCS / "napari.md").read_text().split("## Keyboard shortcuts", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| ")]
    listed = {key.strip() for cell in first_cells for key in cell.split(" (")[0].split("/")}
    bound = {keys.key_text(key) for shortcuts in (keys.SEGMENT_SHORTCUTS, keys.COMPARE_SHORTCUTS,
                                                  keys.BENCHMARK_SHORTCUTS) for key in shortcuts.values()}
    assert bound and bound <= listed, bound - listed


def test_run_folder_files_and_columns_are_documented():
    from napari_medsam_eval.benchmark import files, schema

    page = (DOCS / "protocols.md").read_text().split("## The run folder", 1)[1]
    names = [getattr(files, n) for n in files.__all__] + list(schema.COLUMNS) + list(schema.STATUSES)
    assert [n for n in names if f"`{n}`" not in page + (DOCS / "guarantees.md").read_text()] == []


def test_version_is_pyproject_s_and_a_run_records_it(capsys, tmp_path):
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert _help(capsys, ["--version"]).strip() == f"medsam-eval {version}"
    assert main(["run", str(REPO / "sample_data" / "phantom_2d"), "--model", "box", "--out", str(tmp_path / "run"),
                 "--no-report", "--quiet"]) == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["environment"]["package_version"] == version


def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "NO_MKDOCS_2_WARNING": "1",
           # the page's examples and the notebook are run by tests/test_public_api.py (slow), not again here
           "MEDSAM_EVAL_DOCS_EXECUTE": "0"}
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=REPO, env=env, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    cli = (tmp_path / "site" / "cli" / "index.html").read_text()
    assert all(f'id="medsam-eval-{name}"' in cli for name in COMMANDS)
    assert "--save-predictions" in cli and "screenshots" in (tmp_path / "site" / "napari" / "index.html").read_text()


def test_every_figure_make_reproduce_checks_is_stated_where_it_says():
    """``make reproduce`` prints each figure beside the value the docs state: that value is in the line named."""
    from figures import STATED

    missing = [f"{key}: docs/{entry.page} has no line with {entry.line!r} and {entry.text!r}"
               for key, entry in STATED.items() if not entry.stated_in()]
    assert not missing, missing
    assert STATED["kidney"].matches(0.8694) and not STATED["kidney"].matches(0.8684)
    assert STATED["corrections_box"].matches([0.8021, 0.806, 0.821, 0.834, 0.842, 0.841])
    assert not STATED["corrections_box"].matches([0.802, 0.806, 0.821, 0.834, 0.842])
