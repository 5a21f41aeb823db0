"""Image features a SAM2-family model computed, kept for the next propagation over the same frames.

SAM2's video predictor keeps the features of one frame only (``inference_state["cached_features"]``):
every propagation encodes every frame again. A correction, a prompt-sensitivity repeat, a second
protocol or a second run over the same volume then pays the image encoder (most of a CPU
propagation's time) once more for features it already had. :class:`FrameFeatures` keeps them, least
recently used first out, within a byte limit; :func:`features_kept` puts it in front of the model's
``forward_image`` for the length of one call of the backend.

A frame's features are found by its model identity (the weights' SHA-256, the config, the device,
the autocast dtype, torch's thread count: anything that can change a bit of them; seeded random
weights by the SHA-1 of their bytes) and the SHA-1 of
the exact input tensor, so a hit returns the very tensors the encoder made: the masks are those of
an empty cache, bit for bit. Features live on the CPU (a CUDA model's are copied back on a hit); the
positional encodings, equal for every frame of one size, are kept once.
"""
from __future__ import annotations

import contextlib
import hashlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Hashable, Iterator

from .checkpoint_files import ModelOptionError, plain

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: the default limit of the process's feature cache: ~250 frames of MedSAM2 (512 px, 4.2 MB each)
DEFAULT_LIMIT = 1 << 30


def parse_limit(value: Any) -> int:
    """The ``feature_cache`` model option in bytes: a number, a size text (``"500MB"``), or 0/off/false."""
    if value is False or (isinstance(value, str) and value.strip().lower() in {"0", "off", "false", "no", "none"}):
        return 0
    if value is True:
        return DEFAULT_LIMIT
    from ..embeddings.config import parse_size

    try:
        return parse_size(value)
    except (ValueError, ModelOptionError):
        raise ModelOptionError(f"feature_cache must be a size such as 1GiB, or off; got {plain(value)}") from None


def _nbytes(tensors: list["torch.Tensor"]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class FrameFeatures:
    """A least-recently-used map (model identity, input digest) -> ``forward_image`` output, on the CPU."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = int(limit)
        self._entries: OrderedDict[tuple[Hashable, str], tuple[list, list, int]] = OrderedDict()
        self._positions: dict[tuple, list] = {}
        self._lock = threading.Lock()
        self.size = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._positions.clear()
            self.size = 0

    def get(self, key: tuple[Hashable, str], device: "torch.device") -> dict[str, Any] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
        fpn, positions, _ = entry
        fpn = [t.to(device) for t in fpn]
        # fresh lists: forward_image's callers replace list items (never the tensors themselves)
        return {"vision_features": fpn[-1], "vision_pos_enc": [p.to(device) for p in positions], "backbone_fpn": fpn}

    def put(self, key: tuple[Hashable, str], out: dict[str, Any]) -> None:
        import torch

        if out["vision_features"] is not out["backbone_fpn"][-1]:
            return  # not the layout SAM2's image encoder returns: not ours to rebuild
        fpn = [t.detach().to("cpu") for t in out["backbone_fpn"]]
        positions = [p.detach().to("cpu") for p in out["vision_pos_enc"]]
        shape_key = (key[0], tuple(tuple(p.shape) for p in positions))
        with self._lock:
            shared = self._positions.setdefault(shape_key, positions)  # a few MB per model and frame size
            if shared is positions or all(torch.equal(a, b) for a, b in zip(shared, positions)):
                positions, extra = shared, 0
            else:
                extra = _nbytes(positions)
            cost = _nbytes(fpn) + extra
            if cost > self.limit:
                return
            old = self._entries.pop(key, None)
            if old is not None:
                self.size -= old[2]
            self._entries[key] = (fpn, positions, cost)
            self.size += cost
            while self.size > self.limit and self._entries:
                _, (_, _, freed) = self._entries.popitem(last=False)
                self.size -= freed


#: the process's cache, shared by every SAM2-family backend (features are found by model identity)
SHARED = FrameFeatures()


def shared_cache(limit: int) -> FrameFeatures | None:
    """The process's cache set to ``limit`` bytes (the latest model built sets it), or None for 0."""
    if limit <= 0:
        return None
    SHARED.limit = limit
    return SHARED


def parameters_digest(model: Any) -> str:
    """SHA-1 of a model's parameters and buffers (names, shapes, bytes): the identity of weights that
    came from no checkpoint file (seeded random weights), ~0.2 s for MedSAM2."""
    import torch

    digest = hashlib.sha1()
    for name, tensor in sorted(model.state_dict().items()):
        array = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}{tuple(array.shape)}{array.dtype}".encode())
        digest.update(array.view(-1).view(torch.uint8).numpy().tobytes() if array.numel() else b"")
    return digest.hexdigest()


def input_digest(image: "torch.Tensor") -> str:
    """SHA-1 of the exact input tensor (shape, dtype and bytes)."""
    array = image.detach().to("cpu").contiguous().numpy()
    digest = hashlib.sha1(f"{array.shape}{array.dtype}".encode())
    digest.update(array.tobytes())
    return digest.hexdigest()


@contextlib.contextmanager
def features_kept(model: Any, identity: Hashable, cache: FrameFeatures | None) -> Iterator[None]:
    """Within the block, ``model.forward_image`` answers from ``cache`` and fills it (no-op for None)."""
    if cache is None:
        yield
        return
    compute = model.forward_image

    def forward_image(img_batch: "torch.Tensor") -> dict[str, Any]:
        if img_batch.shape[0] != 1:
            return compute(img_batch)
        key = (identity, input_digest(img_batch))
        found = cache.get(key, img_batch.device)
        if found is not None:
            return found
        out = compute(img_batch)
        cache.put(key, out)
        return out

    own = vars(model).get("forward_image")  # a wrapper someone set on this instance is kept, and put back
    model.forward_image = forward_image  # an instance attribute in front of the class's method
    try:
        yield
    finally:
        if own is None:
            del model.forward_image
        else:
            model.forward_image = own
