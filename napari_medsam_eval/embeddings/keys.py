"""What identifies a stored image embedding: the encoder's input and everything that maps it to the output.

An embedding may be re-used only when the same encoder would compute the same
numbers again. That holds when all of these are equal, and each is a field of
:class:`EmbeddingKey`:

* ``content``: a hash of the *array the encoder is given* (after the backend's
  preprocessing: for LiteMedSAM the padded 256 x 256 x 3 float input, for SAM
  the resized uint8 image), with its shape and dtype. A cache key such as
  ``(case_id, z)`` is not enough: a case re-read with another intensity window,
  or two files with the same name, give other pixels under the same name.
* ``checkpoint``: the SHA-256 of the weights file (other weights, other
  embedding; fine-tuned checkpoints keep their architecture and file name).
* ``engine``: where the encoder runs and at which precision, with the runtime's
  version (OpenVINO fp32 and eager torch differ by ~4e-6; bf16 by ~4%).
* ``preprocessing``: a version string of the backend's preprocessing, bumped
  when the recipe changes. The content hash already covers the preprocessed
  pixels, but not what the backend derives beside them.
* ``dtype``: how the embedding is stored (float32 exact, float16 rounded):
  a float16 entry must never answer a float32 request.
* ``model``: the backend's name (two models could share a checkpoint hash only
  by accident, but their embeddings never mix).

The key's :meth:`~EmbeddingKey.digest` names the entry on disk; the full key is
stored with the entry and compared on every read, so an entry written under
another key (a stale format, a hand-copied folder) is detected, not used.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

#: bump when the meaning of a key or the layout of an entry changes: old entries then miss
KEY_FORMAT = 1
#: describe() entries of an encoder engine that do not change its output (paths, threads, fallback notes)
ENGINE_FACTS_IGNORED = frozenset({"export", "engine_threads", "engine_requested", "engine_fallback"})
#: (resolved path, size, mtime) -> SHA-256: each weights file is hashed once per process
_SHA256_SEEN: dict[tuple[str, int, int], str] = {}


def content_hash(array: np.ndarray) -> str:
    """BLAKE2b-128 of an array's bytes, shape and dtype (the encoder's exact input).

    Shape and dtype are hashed too, so a float64 and a float32 array with the
    same bytes, or one buffer seen as 256 x 768 and 768 x 256, differ.
    """
    data = np.ascontiguousarray(array)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{data.shape}|{data.dtype.str}|".encode())
    digest.update(data.view(np.uint8).reshape(-1).data if data.size else b"")
    return digest.hexdigest()


def sha256_once(path: str | Path) -> str:
    """SHA-256 of a checkpoint file, read once per process (again only when its size or mtime changes).

    Backends key their stored embeddings by it; hashing a 40 MB (LiteMedSAM)
    to 2.5 GB (SAM ViT-H) file at every build would cost more than a hit saves.
    """
    from ..core.checksum import sha256_file

    path = Path(path)
    stat = path.stat()
    seen = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if seen not in _SHA256_SEEN:
        _SHA256_SEEN[seen] = sha256_file(path)
    return _SHA256_SEEN[seen]


def engine_identity(description: dict[str, object], *, device: str, torch_version: str,
                    autocast: str | None = None) -> str:
    """The encoder engine as it enters a key: an engine's ``describe()`` facts (name,
    runtime version, precision; not paths or thread counts), the device type, torch's
    version (exports are traced by torch) and the autocast dtype, if any."""
    facts = [f"{k}={description[k]}" for k in sorted(description) if k not in ENGINE_FACTS_IGNORED and k != "engine"]
    return " ".join([str(description.get("engine", "torch")), *facts, f"device={device}",
                     f"autocast={autocast or 'off'}", f"torch={torch_version}"])


@dataclass(frozen=True)
class EmbeddingKey:
    """Everything an embedding depends on (see the module doc for why each field)."""

    model: str
    checkpoint: str
    engine: str
    preprocessing: str
    content: str
    dtype: str = "float32"
    format: int = KEY_FORMAT

    def as_dict(self) -> dict[str, object]:
        """The key as plain JSON-able values (stored with the entry, compared on read)."""
        return asdict(self)

    def digest(self) -> str:
        """A 32-hex-digit name for the entry: BLAKE2b-128 of the key's canonical JSON."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


__all__ = ["KEY_FORMAT", "EmbeddingKey", "content_hash", "engine_identity", "sha256_once"]
