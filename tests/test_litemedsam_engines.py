"""Encoder engines of the LiteMedSAM backend: exported encoders agree with eager torch, the
export is cached on disk and reused, a damaged cache is rebuilt, bad engine names are refused.

One OpenVINO export is made per test module (in a temporary cache folder) and
reused; only the corruption tests export again. No timing is asserted here:
speed lives in ``benchmarks/encoder_variants.py``.
"""
from __future__ import annotations

import json
import sys
import warnings
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from napari_medsam_eval.models import build_backend
from napari_medsam_eval.models import litemedsam_engines as engines
from napari_medsam_eval.models import litemedsam_exports as exports
from napari_medsam_eval.models.litemedsam import LiteMedSAMBackend, build, preprocess_slice, resize_box_to_256

from napari_medsam_eval.models.openvino_quiet import import_openvino

pytestmark = pytest.mark.usefixtures("no_shared_store")  # they count encoder passes

import_openvino()  # a dependency: its absence must fail, not skip (imported without Intel's telemetry)

#: relative L2 error allowed between an exported fp32 encoder's embedding and eager torch's
EMBEDDING_RTOL = 1e-4
#: DSC allowed between masks decoded from the two embeddings
MASK_DSC = 0.99


def dice(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a) > 0, np.asarray(b) > 0
    total = a.sum() + b.sum()
    return 1.0 if total == 0 else float(2.0 * (a & b).sum() / total)


#: the reference and the module's OpenVINO backend keep the three real slices' embeddings in memory: each slice is
#: encoded once per engine (an embedding then its masks, and the later tests' reference, reuse it)
REAL_SLICES_KEPT = 3


@pytest.fixture(scope="module")
def torch_backend() -> LiteMedSAMBackend:
    return build(device="cpu", cache_size=REAL_SLICES_KEPT, engine="torch")


@pytest.fixture(scope="module")
def ov_backend(cache_root: Path) -> LiteMedSAMBackend:
    before = engines.export_counts["openvino"]
    backend = build(device="cpu", cache_size=REAL_SLICES_KEPT, engine="openvino")
    assert engines.export_counts["openvino"] == before + 1  # the first build exports
    return backend


@pytest.fixture(scope="module")
def real_slices(shared_data: Path) -> list[tuple[np.ndarray, tuple[int, int, int, int]]]:
    """Two DeepLesion CT slices (512 x 512) and one hippocampus MR slice, each with its GT box."""
    import SimpleITK as sitk

    from napari_medsam_eval.core.intensity import prepare_intensity

    picked = []
    for name in ("CT_Lesion_000001_02_01_008-023.npz", "CT_Lesion_000010_01_01_078-090.npz"):
        with np.load(shared_data / "deeplesion_ct_npz" / name) as npz:
            imgs, gts = npz["imgs"], npz["gts"]
        z = int(np.argmax((gts > 0).sum(axis=(1, 2))))
        picked.append((imgs[z], gts[z] > 0))
    folder = shared_data / "hippocampus_mri"
    first = sorted((folder / "imagesTr").glob("*.nii.gz"))[0]
    image = sitk.GetArrayFromImage(sitk.ReadImage(str(first)))
    label = sitk.GetArrayFromImage(sitk.ReadImage(str(folder / "labelsTr" / first.name)))
    volume = prepare_intensity(image, "MR")
    z = int(np.argmax((label == 1).sum(axis=(1, 2))))
    picked.append((volume[z], label[z] == 1))
    out = []
    for image, gt in picked:
        ys, xs = np.nonzero(gt)
        out.append((image, (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))))
    return out


def _embedding_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.slow
def test_openvino_embedding_and_masks_match_torch(ov_backend, torch_backend, real_slices):
    assert ov_backend.describe()["engine"] == "openvino"
    assert ov_backend.describe()["inference_precision"] == "f32"
    for image, box in real_slices:
        ours, ref = ov_backend.embed(image)[0], torch_backend.embed(image)[0]
        assert ours.embedding.shape == ref.embedding.shape == (1, 256, 64, 64)
        assert ours.embedding.dtype == torch.float32
        assert _embedding_error(ours.embedding, ref.embedding) < EMBEDDING_RTOL
        box_256 = resize_box_to_256(np.asarray(box), image.shape)
        fast, slow = ov_backend.segment_box256(image, box_256), torch_backend.segment_box256(image, box_256)
        assert slow.mask.any(), "the reference mask should not be empty on a GT box"
        assert dice(fast.mask, slow.mask) >= MASK_DSC


@pytest.mark.slow
def test_openvino_threads_follow_the_budget_and_are_not_pinned(ov_backend, cache_root):
    # benchmark workers get one thread each; pinned, both would land on core 0
    backend = build(device="cpu", cache_size=0, engine="openvino", num_threads=1)
    compiled = backend.encoder_engine.compiled
    assert int(compiled.get_property("INFERENCE_NUM_THREADS")) == 1
    assert compiled.get_property("ENABLE_CPU_PINNING") is False


def test_the_export_cache_is_reused(ov_backend, cache_root):
    folder = cache_root / engines.export_key("openvino", ov_backend.checkpoint_sha256)
    entry = folder / "encoder.xml"
    stamp = entry.stat().st_mtime_ns
    before = engines.export_counts["openvino"]
    again = build(device="cpu", cache_size=0, engine="openvino")
    assert engines.export_counts["openvino"] == before, "a second build must not export again"
    assert entry.stat().st_mtime_ns == stamp
    assert Path(again.describe()["export"]) == entry
    assert not [p for p in cache_root.iterdir() if ".tmp-" in p.name], "no temporary folders left behind"


@pytest.mark.slow
def test_a_corrupt_cached_export_is_rebuilt_with_a_warning(ov_backend, torch_backend, real_slices, cache_root,
                                                          tmp_path, monkeypatch):
    """The rebuild "exports" by copying the module's good export (the export itself is the ov_backend
    fixture's, checked above): what is tested is finding the damage, the warning and the rebuilt files."""
    folder = cache_root / engines.export_key("openvino", ov_backend.checkpoint_sha256)
    for name in ("encoder.xml", "encoder.bin"):
        shutil.copy2(folder / name, tmp_path / name)

    def copy_export(encoder, into: Path) -> str:
        for name in ("encoder.xml", "encoder.bin"):
            shutil.copy2(tmp_path / name, into / name)
        return "encoder.xml"

    monkeypatch.setitem(engines._EXPORTERS, "openvino", copy_export)
    weights = folder / "encoder.bin"
    weights.write_bytes(weights.read_bytes()[:4096])  # truncated weights
    before = engines.export_counts["openvino"]
    with pytest.warns(RuntimeWarning, match="corrupt; rebuilding"):
        rebuilt = build(device="cpu", cache_size=0, engine="openvino")
    assert engines.export_counts["openvino"] == before + 1
    image = real_slices[0][0]
    assert _embedding_error(rebuilt.embed(image)[0].embedding, torch_backend.embed(image)[0].embedding) < EMBEDDING_RTOL


class _FakeEngine(engines.EncoderEngine):
    name = "fake"


@pytest.fixture
def fake_runtime(monkeypatch):
    """An exporter that writes a small text file and a loader that accepts only that text:
    the cache's bookkeeping without the cost of real exports."""
    made: list[Path] = []

    def export(encoder, folder: Path) -> str:
        (folder / "encoder.xml").write_text("model")
        made.append(folder)
        return "encoder.xml"

    def load(engine, path: Path, num_threads, precision):
        if path.read_text() != "model":
            raise RuntimeError("unreadable model")
        return _FakeEngine()

    monkeypatch.setitem(engines._EXPORTERS, "openvino", export)
    monkeypatch.setattr(engines, "_load", load)
    return made


def _fake_build(root: Path) -> engines.EncoderEngine:
    return engines.build_encoder("openvino", torch.nn.Identity(), device=torch.device("cpu"),
                                 checkpoint_sha256="ab" * 32, num_threads=1, root=root)


def test_cache_bookkeeping_reuse_hash_mismatch_and_load_failure(fake_runtime, tmp_path):
    assert isinstance(_fake_build(tmp_path), _FakeEngine) and len(fake_runtime) == 1
    folder = tmp_path / engines.export_key("openvino", "ab" * 32)
    assert (folder / "manifest.json").is_file() and not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    _fake_build(tmp_path)
    assert len(fake_runtime) == 1, "reused, not exported again"

    (folder / "encoder.xml").write_text("damaged")  # the manifest's hash no longer matches
    with pytest.warns(RuntimeWarning, match="corrupt; rebuilding"):
        _fake_build(tmp_path)
    assert len(fake_runtime) == 2 and (folder / "encoder.xml").read_text() == "model"

    manifest = json.loads((folder / "manifest.json").read_text())  # damage the manifest cannot see
    (folder / "encoder.xml").write_text("garbage")
    manifest["files"]["encoder.xml"] = exports.sha256_file(folder / "encoder.xml")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(RuntimeWarning, match="failed to load"):
        assert isinstance(_fake_build(tmp_path), _FakeEngine)
    assert len(fake_runtime) == 3

    (folder / "manifest.json").unlink()  # an export interrupted before its manifest: incomplete
    with pytest.warns(RuntimeWarning, match="incomplete or corrupt"):
        _fake_build(tmp_path)
    assert len(fake_runtime) == 4


@pytest.mark.slow
def test_onnxruntime_engine_matches_torch(cache_root, torch_backend, real_slices):
    import onnxruntime  # noqa: F401 - in the test extra: its absence must fail, not skip
    backend = build(device="cpu", cache_size=0, engine="onnxruntime")
    assert backend.describe()["engine"] == "onnxruntime"
    image = real_slices[0][0]
    assert _embedding_error(backend.embed(image)[0].embedding, torch_backend.embed(image)[0].embedding) < EMBEDDING_RTOL


def test_torch_engine_is_the_plain_path(torch_backend, real_slices):
    assert torch_backend.describe()["engine"] == "torch"
    image = real_slices[0][0]
    padded = preprocess_slice(image)[0]
    with torch.inference_mode():
        expected = torch_backend.model.image_encoder(torch.tensor(padded).float().permute(2, 0, 1).unsqueeze(0))
    assert torch.equal(torch_backend.embed(image)[0].embedding, expected)


def test_auto_picks_openvino_on_cpu_and_torch_without_it(monkeypatch):
    cpu = torch.device("cpu")
    assert engines.resolve_engine("auto", cpu) == "openvino"
    assert engines.resolve_engine(None, cpu) == "openvino"
    assert engines.resolve_engine("TORCH", cpu) == "torch"
    assert engines.resolve_engine("auto", torch.device("cuda")) == "torch"
    monkeypatch.setitem(sys.modules, "openvino", None)  # as if not installed
    assert engines.resolve_engine("auto", cpu) == "torch"
    with pytest.raises(engines.EngineUnavailableError, match="openvino"):
        engines.resolve_engine("openvino", cpu)


def test_unknown_engine_names_are_refused():
    with pytest.raises(ValueError, match="engine must be one of auto, torch, openvino, onnxruntime.*'tensorrt'"):
        build(device="cpu", engine="tensorrt")
    with pytest.raises(ValueError, match="engine"):
        build_backend("litemedsam", device="cpu", engine=3)
    with pytest.raises(ValueError, match="CPU only"):
        engines.resolve_engine("openvino", torch.device("cuda"))


def test_default_build_names_its_engine(cache_root):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the cache made above is sound: no rebuild
        facts = build(device="cpu", cache_size=0).describe()
    assert facts["engine"] == "openvino" and facts["inference_precision"] == "f32"


@pytest.mark.slow
def test_with_a_store_the_export_is_loaded_at_the_first_pass_only(cache_root, real_slices, tmp_path):
    """A re-run that finds every slice stored never loads the exported engine (the hashing,
    fingerprint pass and compile cost about a second); the first miss loads it, and the
    planned description is the loaded one's."""
    image = real_slices[0][0]
    first = build(device="cpu", cache_size=0, engine="openvino", embeddings=tmp_path / "store")
    assert isinstance(first.encoder_engine, engines.LazyEncoder) and not first.encoder_engine.loaded
    planned = first.describe()
    stored = first.embed(image)[0]
    assert first.encoder_engine.loaded and first.encoder_calls == 1
    assert first.describe() == planned, "the planned facts are the loaded engine's"
    again = build(device="cpu", cache_size=0, engine="openvino", embeddings=tmp_path / "store")
    reread = again.embed(image)[0]
    assert again.encoder_calls == 0 and not again.encoder_engine.loaded
    assert torch.equal(reread.embedding, stored.embedding)
    eager = build(device="cpu", cache_size=0, engine="openvino")  # no store: loaded at once (an earlier
    assert not isinstance(eager.encoder_engine, engines.LazyEncoder)  # test damaged ov_backend's mapped files)
    assert torch.equal(eager.embed(image)[0].embedding, stored.embedding)


def test_a_lazy_engine_that_falls_back_stores_under_the_torch_key(torch_backend, real_slices, tmp_path):
    """The key is taken after the pass: embeddings torch computed are never filed as OpenVINO's."""
    from napari_medsam_eval.embeddings import open_store

    planned = {"engine": "openvino", "openvino": "0.0-test", "inference_precision": "f32", "engine_threads": 1}
    fallback = engines.TorchEncoder(torch_backend.model.image_encoder, torch.device("cpu"),
                                    fallback_from="openvino", fallback_reason="test")
    lazy = engines.LazyEncoder(lambda: fallback, planned)
    backend = LiteMedSAMBackend(torch_backend.model, device=torch.device("cpu"),
                                checkpoint_path=torch_backend.checkpoint_path,
                                checkpoint_sha256=torch_backend.checkpoint_sha256, shipped=True, cache_size=0,
                                encoder_engine=lazy, embedding_store=open_store(tmp_path / "store"))
    padded = preprocess_slice(real_slices[0][0])[0]
    planned_key = backend.embedding_key(padded)
    assert planned_key.engine.startswith("openvino")
    backend.embed(real_slices[0][0])
    assert lazy.loaded and lazy.name == "torch"
    torch_key = backend.embedding_key(padded)
    assert torch_key.engine.startswith("torch") and torch_key == torch_backend_key(torch_backend, backend, padded)
    store = backend.embedding_store
    assert store.get(planned_key, (1, 256, 64, 64)) is None
    assert store.get(torch_key, (1, 256, 64, 64)) is not None


def torch_backend_key(torch_backend: LiteMedSAMBackend, backend: LiteMedSAMBackend, padded: np.ndarray):
    """The key the plain torch backend gives ``padded`` in ``backend``'s store."""
    torch_backend.embedding_store = backend.embedding_store
    try:
        return torch_backend.embedding_key(padded)
    finally:
        torch_backend.embedding_store = None
