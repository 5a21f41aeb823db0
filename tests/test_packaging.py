"""The package's shape: top-level layout, a wheel that carries what it needs, a core free of Qt/napari."""
from __future__ import annotations

import os
import pkgutil
import shutil
import subprocess
import sys
import tarfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import napari_medsam_eval

REPO = Path(__file__).resolve().parents[1]
GUI_MODULES = ("qtpy", "PyQt5", "PyQt6", "PySide2", "PySide6", "napari", "magicgui", "superqt")
#: the napari layer: the only modules allowed to import Qt/napari
NAPARI_LAYER = ("napari_medsam_eval._widgets", "napari_medsam_eval._reader", "napari_medsam_eval._writer",
                "napari_medsam_eval._sample_data", "napari_medsam_eval._turns", "napari_medsam_eval._meanwhile")


def core_modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(napari_medsam_eval.__path__, "napari_medsam_eval.")]
    return sorted(n for n in names if not n.startswith(NAPARI_LAYER) and not n.endswith("__main__"))


def test_package_sits_at_the_top_level():
    assert Path(napari_medsam_eval.__file__).resolve().parent == REPO / "napari_medsam_eval"
    assert not (REPO / "src").exists()


def _gui_modules_after(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=REPO)


@pytest.mark.slow
def test_core_modules_import_no_gui_toolkit():
    """Every core module imported in one fresh interpreter loads no Qt, napari, magicgui or superqt. Only
    when that fails is each module imported alone in an interpreter of its own, to name the culprits
    (a module importing Qt would leave it in ``sys.modules`` for all the others)."""
    modules = core_modules()
    assert len(modules) > 40 and "napari_medsam_eval.session.session" in modules
    listing = f"print(sorted(m for m in sys.modules if m.split('.')[0] in {GUI_MODULES!r})[:3])"
    together = _gui_modules_after("import importlib, sys\nfor name in sys.argv[1:]: importlib.import_module(name)\n"
                                  + listing, *modules)
    if together.returncode == 0 and together.stdout.strip() == "[]":
        return
    script = "import importlib, sys; importlib.import_module(sys.argv[1]); " + listing
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = list(pool.map(lambda name: _gui_modules_after(script, name), modules))
    failures = {name: (run.stdout.strip() or run.stderr.strip()[-300:]) for name, run in zip(modules, runs)
                if run.returncode != 0 or run.stdout.strip() != "[]"}
    assert failures, f"the modules together loaded a GUI toolkit, none alone: {together.stdout or together.stderr}"
    assert failures == {}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"  # built from a copy: setuptools leaves build/ in the tree it builds
    shutil.copytree(REPO / "napari_medsam_eval", source / "napari_medsam_eval",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(source)], check=True, capture_output=True, cwd=out)
    (path,) = out.glob("napari_medsam_eval-*.whl")
    return path


def test_wheel_carries_manifest_configs_and_sample_generator(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("napari_medsam_eval/napari.yaml", "napari_medsam_eval/models/configs/sam2.1_hiera_t512.yaml",
                     "napari_medsam_eval/_sample_data.py", "napari_medsam_eval/datasets/phantoms.py"):
        assert required in names
    assert not any(n.startswith(("tests/", "src/", "sample_data/")) for n in names)


def test_the_license_travels_with_the_wheel_and_the_sdist(wheel, tmp_path):
    """pyproject declares Apache-2.0: the license text itself goes with every form the package is given in."""
    license_text = (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0" in license_text
    wheel_files = zipfile.ZipFile(wheel)
    (in_wheel,) = [n for n in wheel_files.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert wheel_files.read(in_wheel).decode() == license_text
    metadata = next(n for n in wheel_files.namelist() if n.endswith(".dist-info/METADATA"))
    assert "License-File: LICENSE" in wheel_files.read(metadata).decode()
    source = wheel.parent / "source"
    script = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    built = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, cwd=source)
    assert built.returncode == 0, built.stderr[-2000:]
    with tarfile.open(tmp_path / built.stdout.strip().splitlines()[-1]) as sdist:
        (member,) = [m for m in sdist.getnames() if m.count("/") == 1 and m.endswith("/LICENSE")]
        assert sdist.extractfile(member).read().decode() == license_text


def test_sample_data_opens_from_an_installed_wheel(wheel, tmp_path):
    """Unpacked away from the checkout, the plugin's manifest validates and both samples build."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import napari_medsam_eval, npe2\n"
        "from pathlib import Path\n"
        "root = Path(napari_medsam_eval.__file__).parent\n"
        "npe2.PluginManifest.from_file(root / 'napari.yaml')\n"
        "from napari_medsam_eval._sample_data import phantom_ct, phantom_video\n"
        "ct, video = phantom_ct(), phantom_video()\n"
        "print(root, ct[0][0].shape, ct[1][2], video[0][0].shape)\n"
    )
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    root, rest = out.stdout.split(" ", 1)
    assert Path(root) == site / "napari_medsam_eval"
    assert "(40, 96, 96)" in rest and "labels" in rest and "(24, 128, 128, 3)" in rest
