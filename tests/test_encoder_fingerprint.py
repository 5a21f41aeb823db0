"""LiteMedSAM's exported encoder is checked by its output, not only by file hashes.

A cached export whose weights were damaged and whose manifest hash was rewritten to
match loads fine and gives wrong (here: empty) masks; the fingerprint check (the engine's
output on a fixed input against the torch encoder's, stored in the manifest at export
time) finds it, the export is rebuilt, and when the rebuilt one is wrong too - or the
cache folder cannot be written - the encoder runs in torch, with a warning.

The module starts from a copy of the run's real OpenVINO export (``run_openvino_export``); rebuilds
"export" by copying that export's files (intact or damaged), so only the detection and recovery logic
costs time here.
"""
from __future__ import annotations

import errno
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from napari_medsam_eval.cli import main
from napari_medsam_eval.models import litemedsam_engines as engines
from napari_medsam_eval.models import litemedsam_exports as exports
from napari_medsam_eval.models import litemedsam_fingerprint as fp
from napari_medsam_eval.models.litemedsam import LiteMedSAMBackend, build
from napari_medsam_eval.core.prompt import Prompt

from napari_medsam_eval.models.openvino_quiet import import_openvino

pytestmark = pytest.mark.usefixtures("no_shared_store")  # they count encoder passes

import_openvino()  # a dependency: its absence must fail, not skip (imported without Intel's telemetry)

CASE = "CT_Lesion_000001_02_01_008-023.npz"


@pytest.fixture(scope="module")
def torch_backend() -> LiteMedSAMBackend:
    return build(device="cpu", cache_size=0, engine="torch")


@pytest.fixture(scope="module")
def good_export(run_openvino_export, cache_root, tmp_path_factory) -> tuple[LiteMedSAMBackend, Path]:
    """A real export (the run's, copied into the module's cache under its key: not exported again) and a copy
    of its model files."""
    shutil.copytree(run_openvino_export, cache_root / run_openvino_export.name)
    backend = build(device="cpu", cache_size=0, engine="openvino")
    assert Path(backend.describe()["export"]).parent == cache_root / run_openvino_export.name
    folder = Path(backend.describe()["export"]).parent
    saved = tmp_path_factory.mktemp("saved-export")
    for name in ("encoder.xml", "encoder.bin"):
        shutil.copy2(folder / name, saved / name)
    return backend, saved


@pytest.fixture(scope="module")
def real_slice(shared_data) -> tuple[np.ndarray, Prompt]:
    with np.load(shared_data / "deeplesion_ct_npz" / CASE) as npz:
        imgs, gts = npz["imgs"], npz["gts"]
    z = int(np.argmax((gts > 0).sum(axis=(1, 2))))
    ys, xs = np.nonzero(gts[z])
    box = (float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max()))
    return imgs[z], Prompt(target_label=1, boxes=[box])


def _damage(bin_path: Path) -> None:
    """Zero an eighth of the weights: the file still loads, the embedding is wrong."""
    data = bytearray(bin_path.read_bytes())
    n = len(data)
    data[n // 4 : n // 4 + n // 8] = bytes(n // 8)
    bin_path.write_bytes(bytes(data))


def _damage_cached_and_rehash(folder: Path) -> None:
    _damage(folder / "encoder.bin")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["encoder.bin"] = exports.sha256_file(folder / "encoder.bin")
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _replay(saved: Path, damaged: bool):
    def export(encoder, folder: Path) -> str:
        for name in ("encoder.xml", "encoder.bin"):
            shutil.copy2(saved / name, folder / name)
        if damaged:
            _damage(folder / "encoder.bin")
        return "encoder.xml"

    return export


def _mask(backend: LiteMedSAMBackend, case: tuple[np.ndarray, Prompt]) -> np.ndarray:
    image, prompt = case
    return backend.segment(image, prompt).mask


@pytest.mark.slow
def test_the_manifest_holds_the_torch_fingerprint_and_a_sound_export_matches_it(good_export, torch_backend):
    backend, _ = good_export
    manifest = json.loads((Path(backend.describe()["export"]).parent / "manifest.json").read_text())
    reference = manifest["fingerprint"]
    assert reference["shape"] == [1, 256, 64, 64]
    assert len(reference["values"]) == fp.SAMPLE_COUNT and len(reference["channel_means"]) == 256
    assert fp.fingerprint_error(torch_backend.encoder_engine, reference) < 1e-6  # the same computation
    error = fp.fingerprint_error(backend.encoder_engine, reference)
    assert 0 < error < fp.TOLERANCE["f32"] / 20, error  # measured ~4e-6: fp32 OpenVINO vs eager torch
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        again = build(device="cpu", cache_size=0, engine="openvino")
    assert again.describe()["engine"] == "openvino"


@pytest.mark.slow
def test_a_load_of_files_checked_before_in_this_process_skips_the_check_pass(good_export, monkeypatch):
    """The check pass runs once per export and state of its files in a process: loading the same files
    again skips it; a file rewritten since (here with the same bytes) is checked again."""
    backend, _ = good_export
    folder = Path(backend.describe()["export"]).parent
    checks = []
    real = engines.fingerprint_mismatch
    monkeypatch.setattr(engines, "fingerprint_mismatch", lambda *args: checks.append(args) or real(*args))
    assert build(device="cpu", cache_size=0, engine="openvino").describe()["engine"] == "openvino"
    assert checks == [], "good_export's load checked these files in this process"
    weights = folder / "encoder.bin"
    weights.write_bytes(weights.read_bytes())
    assert build(device="cpu", cache_size=0, engine="openvino").describe()["engine"] == "openvino"
    assert len(checks) == 1


@pytest.mark.slow
def test_a_damaged_export_with_a_matching_hash_is_found_and_rebuilt(
    good_export, torch_backend, real_slice, monkeypatch
):
    backend, saved = good_export
    folder = Path(backend.describe()["export"]).parent
    _damage_cached_and_rehash(folder)
    # what the hash check alone lets through: it loads, and its mask is wrong
    damaged = LiteMedSAMBackend(torch_backend.model, device=torch.device("cpu"),
                                checkpoint_path=torch_backend.checkpoint_path,
                                checkpoint_sha256=torch_backend.checkpoint_sha256, shipped=True, cache_size=0,
                                encoder_engine=engines.OpenVINOEncoder(folder / "encoder.xml", 2))
    reference = _mask(torch_backend, real_slice)
    assert reference.sum() > 50
    bad_mask = _mask(damaged, real_slice)
    assert (bad_mask & reference).sum() < 0.5 * reference.sum(), "the damage should spoil the mask"

    monkeypatch.setitem(engines._EXPORTERS, "openvino", _replay(saved, damaged=False))
    before = engines.export_counts["openvino"]
    with pytest.warns(RuntimeWarning, match=r"gives a wrong embedding \(its output on the check input differs "
                                            r"from the torch encoder's by .*\); rebuilding it"):
        rebuilt = build(device="cpu", cache_size=0, engine="openvino")
    assert engines.export_counts["openvino"] == before + 1
    assert rebuilt.describe()["engine"] == "openvino"
    mask = _mask(rebuilt, real_slice)
    assert mask.any() and np.array_equal(mask, reference)


@pytest.mark.slow
def test_a_rebuilt_export_that_is_wrong_too_falls_back_to_torch(good_export, torch_backend, real_slice, monkeypatch):
    backend, saved = good_export
    folder = Path(backend.describe()["export"]).parent
    _damage_cached_and_rehash(folder)
    monkeypatch.setitem(engines._EXPORTERS, "openvino", _replay(saved, damaged=True))  # every export is bad
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fallen = build(device="cpu", cache_size=0, engine="openvino")
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 2, messages
    assert "gives a wrong embedding" in messages[0] and "rebuilding it" in messages[0]
    assert "export made now gives a wrong embedding" in messages[1]
    assert "image encoder runs in torch instead of openvino" in messages[1]
    facts = fallen.describe()
    assert facts["engine"] == "torch" and facts["engine_requested"] == "openvino"
    assert "wrong embedding" in facts["engine_fallback"]
    assert not folder.exists(), "a known-bad export must not stay in the cache"
    mask = _mask(fallen, real_slice)
    assert mask.any() and np.array_equal(mask, _mask(torch_backend, real_slice))


@pytest.mark.slow
def test_a_read_only_cache_folder_falls_back_to_torch(tmp_path, monkeypatch, torch_backend, real_slice):
    folder = tmp_path / "read-only-cache"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        probe = folder / "probe"
        try:
            probe.write_text("x")  # root ignores permission bits: then make the OS's refusal happen here
        except PermissionError:
            pass
        else:
            probe.unlink()

            def refuse(*args, dir=None, **kwargs):
                raise PermissionError(errno.EACCES, "Permission denied", str(dir))

            monkeypatch.setattr(exports.tempfile, "mkdtemp", refuse)
        monkeypatch.setenv("NAPARI_MEDSAM_EVAL_CACHE", str(folder))
        with pytest.warns(RuntimeWarning, match=r"cannot be written to the cache folder .*read-only-cache.*"
                                                r"Permission denied.*runs in torch instead of openvino"):
            backend = build(device="cpu", cache_size=0, embeddings=False)  # engine "auto": OpenVINO on a CPU
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)
    facts = backend.describe()
    assert facts["engine"] == "torch" and facts["engine_requested"] == "openvino"
    assert "NAPARI_MEDSAM_EVAL_CACHE" in facts["engine_fallback"]
    assert np.array_equal(_mask(backend, real_slice), _mask(torch_backend, real_slice))


def test_a_cache_path_under_a_file_does_not_stop_the_cli(tmp_path, monkeypatch, shared_data, capsys):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("NAPARI_MEDSAM_EVAL_CACHE", str(blocker / "cache"))
    out = tmp_path / "pred.npz"
    args = ["segment", str(shared_data / "deeplesion_ct_npz" / CASE), "--out", str(out),
            "--box", "150", "150", "350", "350", "--no-propagate"]
    with pytest.warns(RuntimeWarning, match="cannot be written to the cache folder"):
        assert main(args) == 0
    captured = capsys.readouterr()
    assert "internal error" not in captured.err and out.is_file()


# --- the check's logic, with a small stand-in encoder (no export, no OpenVINO) -----------------


class _Engine(engines.EncoderEngine):
    """A verifiable engine running ``encoder`` with its output scaled by ``1 + error``."""

    name = "openvino"
    verifiable = True

    def __init__(self, encoder: torch.nn.Module, error: float) -> None:
        self.encoder, self.error = encoder, error

    def __call__(self, padded: np.ndarray) -> torch.Tensor:
        with torch.inference_mode():
            out = self.encoder(torch.tensor(padded).float().permute(2, 0, 1).unsqueeze(0))
        return out * (1 + self.error)


@pytest.fixture
def small_encoder() -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return torch.nn.Conv2d(3, 8, kernel_size=4, stride=4).eval()


def test_tolerances_follow_the_precision(small_encoder):
    reference = fp.reference_fingerprint(small_encoder)
    assert reference["shape"] == [1, 8, 64, 64]
    assert fp.fingerprint_mismatch(_Engine(small_encoder, 1e-5), reference) is None
    problem = fp.fingerprint_mismatch(_Engine(small_encoder, 1e-2), reference)
    assert problem is not None and "differs from the torch encoder's by 0.01 (relative; allowed 0.001)" in problem
    assert fp.fingerprint_mismatch(_Engine(small_encoder, 1e-2), reference, "bf16") is None
    assert fp.fingerprint_mismatch(_Engine(small_encoder, 0.5), reference, "bf16") is not None
    assert "no reference fingerprint" in fp.fingerprint_mismatch(_Engine(small_encoder, 0), None)
    nan = _Engine(small_encoder, float("nan"))
    assert "not finite or of the wrong shape" in fp.fingerprint_mismatch(nan, reference)


def test_rebuild_then_fallback_logic(small_encoder, tmp_path, monkeypatch):
    quality = {"export": 0.0}

    def export(encoder, folder: Path) -> str:
        (folder / "encoder.xml").write_text(str(quality["export"]))
        return "encoder.xml"

    monkeypatch.setitem(engines._EXPORTERS, "openvino", export)
    monkeypatch.setattr(engines, "_load", lambda engine, path, threads, precision: _Engine(small_encoder,
                                                                                            float(path.read_text())))

    def build_engine():
        return engines.build_encoder("openvino", small_encoder, device=torch.device("cpu"),
                                     checkpoint_sha256="cd" * 32, num_threads=1, root=tmp_path)

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert isinstance(build_engine(), _Engine)  # sound export: checked, no warning
    folder = tmp_path / engines.export_key("openvino", "cd" * 32)
    (folder / "encoder.xml").write_text("0.3")  # damaged, and the manifest made to agree
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["encoder.xml"] = exports.sha256_file(folder / "encoder.xml")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(RuntimeWarning, match="wrong embedding.*rebuilding it"):
        assert isinstance(build_engine(), _Engine)
    assert (folder / "encoder.xml").read_text() == "0.0"

    quality["export"] = 0.3  # from now on every export is wrong
    shutil.rmtree(folder)
    with pytest.warns(RuntimeWarning, match="export made now gives a wrong embedding.*runs in torch"):
        engine = build_engine()
    assert isinstance(engine, engines.TorchEncoder) and engine.describe()["engine_requested"] == "openvino"
    assert not folder.exists()
