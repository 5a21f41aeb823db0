"""The persistent embedding store: image embeddings kept on disk, re-used by later processes.

* :mod:`.keys`: what identifies an embedding (encoder input, checkpoint, engine,
  preprocessing, storage dtype);
* :mod:`.store`: the zarr folder, its checks, size limit and LRU eviction;
* :mod:`.config`: whether a backend uses it (``embeddings`` option or
  ``MEDSAM_EVAL_EMBEDDINGS``), where, and its limit.

LiteMedSAM and SAM use it: their image embedding is a pure function of the
slice, one ``(1, 256, 64, 64)`` array. SAM2 / MedSAM2 do not. Their per-frame
features are a dict of tensors at three levels (backbone, FPN, positional
encodings), and their
propagation, the reason to use them, runs in the video predictor, which
computes those features inside its own inference state frame by frame as
the memory bank is built; storing them would mean reproducing that state's
internals per sam2 version, so a stored entry could be wrong where it looks
right. They keep their in-memory cache only.

No zarr, torch or model import happens here until a store is opened.
"""
from __future__ import annotations

from .config import ENV_DIR, ENV_LIMIT, default_root, format_size, open_store, parse_size
from .keys import EmbeddingKey, content_hash, engine_identity, sha256_once
from .store import DEFAULT_LIMIT_BYTES, STORAGE_DTYPES, EmbeddingStore, StoreInfo

__all__ = [
    "DEFAULT_LIMIT_BYTES",
    "ENV_DIR",
    "ENV_LIMIT",
    "STORAGE_DTYPES",
    "EmbeddingKey",
    "EmbeddingStore",
    "StoreInfo",
    "content_hash",
    "default_root",
    "engine_identity",
    "format_size",
    "open_store",
    "parse_size",
    "sha256_once",
]
