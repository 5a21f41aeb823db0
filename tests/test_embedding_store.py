"""The persistent embedding store (napari_medsam_eval.embeddings) with real LiteMedSAM weights on real CT.

Four slices of a DeepLesion case, the torch encoder (no export to build):
the key follows the image, checkpoint, engine, preprocessing and storage
dtype; a damaged or stale entry is recomputed with a warning; eviction keeps
the store under its limit, least recently used first; a case re-opened in a
new process makes no encoder call and gives the same masks; float16 storage
round-trips. Every store lives in a pytest tmp folder.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import zarr

import napari_medsam_eval.models.litemedsam as lm
from napari_medsam_eval.cli import main
from napari_medsam_eval.embeddings import (
    ENV_DIR,
    EmbeddingKey,
    EmbeddingStore,
    engine_identity,
    open_store,
    parse_size,
)
from napari_medsam_eval.embeddings.store import ENTRIES
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.propagation import segment_by_kind

LESION = "CT_Lesion_000009_03_01_036-048.npz"
SLICES = slice(4, 8)  # four slices with the lesion on each
PROMPTED = 2  # index in the sub-volume

#: the second process: re-open the case with the store named by the environment, print its counters
REOPEN = """
import json, sys
import numpy as np
from napari_medsam_eval.models import build_backend
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.propagation import segment_by_kind
volume = np.load(sys.argv[1])["imgs"]
box = tuple(int(v) for v in sys.argv[3].split(","))
backend = build_backend("litemedsam", device="cpu", engine="torch")
result = segment_by_kind(backend, volume, "volume", Prompt(1, slice_index=int(sys.argv[4]), boxes=[box]),
                         case_id="reopened")
np.save(sys.argv[2], result.mask)
print(json.dumps({"encoder_calls": backend.encoder_calls, **backend.embedding_store.stats()}))
"""


def gt_box(mask: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())


@pytest.fixture(scope="module")
def case(shared_data: Path) -> dict:
    with np.load(shared_data / "deeplesion_ct_npz" / LESION) as npz:
        imgs, gts = npz["imgs"][SLICES], npz["gts"][SLICES] > 0
    return {"imgs": imgs, "box": gt_box(gts[PROMPTED])}


@pytest.fixture(scope="module")
def backend() -> lm.LiteMedSAMBackend:
    """One torch-engine backend; each test gives it its own store (``use_store``)."""
    return lm.build(device="cpu", engine="torch")


def use_store(backend: lm.LiteMedSAMBackend, store: EmbeddingStore | None) -> lm.LiteMedSAMBackend:
    """``backend`` as if just built with ``store``: nothing in memory, counters at zero."""
    backend.clear_cache()
    backend.embedding_store = store
    backend.encoder_calls = backend.cache_hits = 0
    return backend


def propagate(backend: lm.LiteMedSAMBackend, case: dict) -> np.ndarray:
    prompt = Prompt(1, slice_index=PROMPTED, boxes=[case["box"]])
    return segment_by_kind(backend, case["imgs"], "volume", prompt, case_id="lesion9").mask


@pytest.fixture(scope="module")
def filled(backend, case, tmp_path_factory) -> dict:
    """A store holding the four slices' embeddings, the propagated mask and the embeddings themselves."""
    root = tmp_path_factory.mktemp("filled-store")
    store = EmbeddingStore(root)
    mask = propagate(use_store(backend, store), case)
    assert backend.encoder_calls == 4 and store.writes == 4 and store.hits == 0
    embeddings = [backend.embed(image)[0].embedding.clone() for image in case["imgs"]]
    assert backend.encoder_calls == 4, "the embeddings come back from the store"
    plain = propagate(use_store(backend, None), case)
    assert np.array_equal(mask, plain), "float32 storage gives the masks of no store"
    return {"root": root, "mask": mask, "embeddings": embeddings}


def copy_store(filled: dict, tmp_path: Path) -> EmbeddingStore:
    root = tmp_path / "store"
    shutil.copytree(filled["root"], root)
    return EmbeddingStore(root)


def entry_paths(store: EmbeddingStore) -> list[Path]:
    return sorted((store.root / ENTRIES).glob("*.zarr"))


# --- the key ------------------------------------------------------------------

def test_key_follows_image_engine_preprocessing_dtype(backend, case, monkeypatch):
    padded = lm.preprocess_slice(case["imgs"][PROMPTED])[0]
    key = use_store(backend, None).embedding_key(padded)
    assert key == backend.embedding_key(padded.copy()), "the key is the content, not the array object"
    changed = case["imgs"][PROMPTED].copy()
    changed[100:102, 100:102] += 8  # one pixel of the 256 x 256 encoder input
    assert backend.embedding_key(lm.preprocess_slice(changed)[0]).digest() != key.digest()
    averaged_away = case["imgs"][PROMPTED].copy()
    averaged_away[100, 100] ^= 1  # INTER_AREA averages it with 3 neighbours and rounds: same encoder input,
    assert backend.embedding_key(lm.preprocess_slice(averaged_away)[0]) == key  # same embedding, same key
    other_slice = backend.embedding_key(lm.preprocess_slice(case["imgs"][0])[0])
    assert other_slice.content != key.content

    # the engine: OpenVINO's describe() (as OpenVINOEncoder gives it) against the torch encoder's
    openvino = {"engine": "openvino", "openvino": "2026.4.1-22982", "inference_precision": "f32",
                "engine_threads": 2, "export": "/cache/encoder.xml"}
    ov_identity = engine_identity(openvino, device="cpu", torch_version=torch.__version__)
    assert ov_identity != backend._engine_identity() and "openvino" in ov_identity
    same_engine = dict(openvino, engine_threads=1, export="/elsewhere/encoder.xml")
    assert engine_identity(same_engine, device="cpu", torch_version=torch.__version__) == ov_identity
    bf16 = dict(openvino, inference_precision="bf16")
    assert engine_identity(bf16, device="cpu", torch_version=torch.__version__) != ov_identity
    monkeypatch.setattr(backend, "_engine_identity", lambda: ov_identity)
    assert backend.embedding_key(padded).digest() != key.digest()
    monkeypatch.undo()

    monkeypatch.setattr(lm, "EMBEDDING_PREPROCESSING", "cvpr24-litemedsam-infer/2")
    assert backend.embedding_key(padded).preprocessing != key.preprocessing
    assert backend.embedding_key(padded).digest() != key.digest()
    monkeypatch.undo()

    assert EmbeddingKey(**{**key.as_dict(), "dtype": "float16"}).digest() != key.digest()


@pytest.mark.slow
def test_key_follows_the_checkpoint(case, filled, tmp_path):
    """Other weights (one tensor changed, saved as a user checkpoint) miss every entry of the shipped ones."""
    state = torch.load(lm.shipped_checkpoint_path(), map_location="cpu", weights_only=True)
    name = next(k for k in state if k.startswith("image_encoder."))
    state[name] = state[name] + 1e-3
    path = tmp_path / "tuned_lite_medsam.pth"
    torch.save(state, path)
    tuned = lm.build(path, device="cpu", engine="torch", embeddings=filled["root"])
    assert tuned.checkpoint_sha256 != lm.SHIPPED_CHECKPOINT_SHA256
    tuned.embed(case["imgs"][PROMPTED])
    assert tuned.encoder_calls == 1 and tuned.embedding_store.hits == 0
    assert tuned.embedding_store.writes == 1
    shutil.rmtree(tuned.embedding_store.path_of(tuned.embedding_key(lm.preprocess_slice(case["imgs"][PROMPTED])[0])))


# --- re-opening, damage, eviction ----------------------------------------------

@pytest.mark.slow
def test_case_reopened_in_a_new_process_makes_no_encoder_call(case, filled, tmp_path):
    volume, out = tmp_path / "volume.npz", tmp_path / "mask.npy"
    np.savez(volume, imgs=case["imgs"])
    env = {**os.environ, ENV_DIR: str(filled["root"])}
    box = ",".join(str(v) for v in case["box"])
    done = subprocess.run([sys.executable, "-c", REOPEN, str(volume), str(out), box, str(PROMPTED)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["encoder_calls"] == 0
    assert facts["embeddings_hits"] == 4 and facts["embeddings_writes"] == 0
    assert np.array_equal(np.load(out), filled["mask"])


@pytest.mark.parametrize("damage", ["flipped byte", "chunk missing", "stored under another key"])
@pytest.mark.slow
def test_damaged_entry_is_recomputed_with_a_warning(backend, case, filled, tmp_path, damage):
    store = copy_store(filled, tmp_path)
    padded = lm.preprocess_slice(case["imgs"][PROMPTED])[0]
    entry = store.path_of(use_store(backend, store).embedding_key(padded))
    chunk = next(p for p in entry.rglob("*") if p.is_file() and p.name != "zarr.json")
    if damage == "flipped byte":
        data = bytearray(chunk.read_bytes())
        data[len(data) // 2] ^= 0xFF
        chunk.write_bytes(bytes(data))
    elif damage == "chunk missing":
        chunk.unlink()
    else:
        meta = json.loads((entry / "zarr.json").read_text())
        meta["attributes"]["key"]["engine"] = "openvino"
        (entry / "zarr.json").write_text(json.dumps(meta))
    with pytest.warns(RuntimeWarning, match="corrupt or stale"):
        mask = propagate(backend, case)
    assert backend.encoder_calls == 1 and store.rejected == 1 and store.hits == 3
    assert np.array_equal(mask, filled["mask"])
    assert torch.equal(backend.embed(case["imgs"][PROMPTED])[0].embedding, filled["embeddings"][PROMPTED])
    fresh = EmbeddingStore(store.root)  # the entry was written again, whole
    assert propagate(use_store(backend, fresh), case) is not None and backend.encoder_calls == 0


@pytest.mark.slow
def test_eviction_keeps_the_store_under_its_limit(filled, tmp_path, capsys):
    arrays = [e.numpy() for e in filled["embeddings"]]
    keys = [EmbeddingKey("litemedsam", "c" * 64, "torch", "p", f"slice{i}") for i in range(4)]
    probe = EmbeddingStore(tmp_path / "probe")
    probe.put(keys[0], arrays[0])
    entry_size = probe.size_bytes()
    limit = int(2.5 * entry_size)
    store = EmbeddingStore(tmp_path / "store", limit_bytes=limit)
    store.put(keys[0], arrays[0])
    store.put(keys[1], arrays[1])
    assert store.get(keys[0], arrays[0].shape) is not None  # slice 0 used again: slice 1 is the oldest
    store.put(keys[2], arrays[2])
    assert store.size_bytes() <= limit and store.evicted == 1
    assert store.get(keys[1], arrays[1].shape) is None
    assert np.array_equal(store.get(keys[0], arrays[0].shape), arrays[0])
    store.put(keys[3], arrays[3])
    assert store.size_bytes() <= limit and len(entry_paths(store)) == 2
    reopened = EmbeddingStore(tmp_path / "store")  # the limit is the store's, recorded in store.json
    assert reopened.limit_bytes == limit

    assert main(["cache", "info", "--dir", str(store.root)]) == 0
    shown = capsys.readouterr().out
    assert "entries: 2" in shown and "limit from store.json" in shown and str(store.root) in shown
    assert main(["cache", "clear", "--dir", str(store.root), "--yes"]) == 0
    assert "removed 2" in capsys.readouterr().out and entry_paths(store) == []
    assert main(["cache", "info", "--dir", str(tmp_path / "none")]) == 0
    assert "none there yet" in capsys.readouterr().out and not (tmp_path / "none").exists()


@pytest.mark.slow
def test_float16_storage_round_trips(backend, case, filled, tmp_path):
    image = case["imgs"][PROMPTED]
    store = EmbeddingStore(tmp_path / "half", dtype="float16")
    first = use_store(backend, store).embed(image)[0].embedding.clone()
    mask = propagate(backend, case)
    assert backend.encoder_calls == 4 and store.writes == 4
    exact = filled["embeddings"][PROMPTED]
    assert torch.equal(first, exact.half().float()), "a fresh embedding is rounded as the stored one"
    assert float((first - exact).norm() / exact.norm()) < 1e-3
    stored = zarr.open_array(store=str(entry_paths(store)[0]), mode="r")
    assert str(stored.dtype) == "float16"
    assert store.size_bytes() < 0.6 * EmbeddingStore(filled["root"]).size_bytes()

    again = EmbeddingStore(tmp_path / "half", dtype="float16")
    assert torch.equal(use_store(backend, again).embed(image)[0].embedding, first)
    assert np.array_equal(propagate(backend, case), mask) and backend.encoder_calls == 0
    exact_store = EmbeddingStore(tmp_path / "half")  # a float32 request never takes a float16 entry
    use_store(backend, exact_store).embed(image)
    assert backend.encoder_calls == 1 and exact_store.hits == 0


# --- off unless asked for, SAM -------------------------------------------------

def test_store_is_off_unless_asked_for(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_DIR, raising=False)
    assert open_store(None) is None and open_store(False) is None and open_store("off") is None
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "from-env"))
    assert open_store(None).root == tmp_path / "from-env"
    assert open_store(False) is None, "the option turns off what the environment turns on"
    monkeypatch.setenv("NAPARI_MEDSAM_EVAL_CACHE", str(tmp_path / "cache"))
    assert open_store("default").root == tmp_path / "cache" / "embeddings"
    assert open_store(str(tmp_path / "opt"), limit="2GiB").limit_bytes == 2 * 2**30
    assert parse_size("500MB") == 500_000_000 and parse_size(1024) == 1024
    with pytest.raises(ValueError, match="embeddings_limit"):
        parse_size("lots")
    with pytest.raises(ValueError, match="embeddings_dtype"):
        open_store(str(tmp_path / "opt"), dtype="int8")


@pytest.mark.slow
def test_sam_reopened_makes_no_encoder_call(case, tmp_path):
    """SAM (seeded random weights of the small vit_tiny configuration: no SAM checkpoint is shipped) reads its
    features back."""
    from napari_medsam_eval.models import sam_backend as sam

    image = case["imgs"][PROMPTED]
    prompt = Prompt(1, slice_index=0, boxes=[case["box"]])
    first = sam.build(random_init=True, model_type="vit_tiny", device="cpu", embeddings=tmp_path / "sam")
    expected = first.segment(image, prompt)
    assert first.encoder_calls == 1 and first.embedding_store.writes == 1
    again = sam.build(random_init=True, model_type="vit_tiny", device="cpu", embeddings=tmp_path / "sam")
    result = again.segment(image, prompt)
    assert again.encoder_calls == 0 and again.embedding_store.hits == 1
    assert np.array_equal(result.logits, expected.logits)
    assert np.array_equal(result.candidates, expected.candidates)


@pytest.mark.slow
def test_run_cli_reruns_from_the_store_with_no_encoder_call(shared_data, tmp_path, monkeypatch):
    """``medsam-eval run --embeddings DIR`` twice over one DeepLesion case: the second run encodes nothing
    and writes the same results."""
    import pandas as pd

    calls: list[int] = []
    encode = lm.LiteMedSAMBackend._run_encoder

    def counted(self, padded):
        calls.append(1)
        return encode(self, padded)

    monkeypatch.setattr(lm.LiteMedSAMBackend, "_run_encoder", counted)
    store = tmp_path / "store"
    tables = []
    for attempt in ("first", "second"):
        calls.clear()
        out = tmp_path / attempt
        assert main(["run", str(shared_data / "deeplesion_ct_npz"), "--limit", "1", "--model", "litemedsam",
                     "--out", str(out), "--embeddings", str(store), "--quiet"]) == 0
        tables.append((pd.read_csv(out / "results.csv"), len(calls)))
    (first, first_calls), (second, second_calls) = tables
    assert first_calls > 0 and second_calls == 0
    pd.testing.assert_series_equal(first["dice"], second["dice"])
