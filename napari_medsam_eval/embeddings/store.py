"""Image embeddings kept on disk between processes, one zarr array per encoded slice.

Why zarr, one small array per slice: micro-sam keeps its embeddings in zarr
too, and zarr gives three things this store needs without code of ours: a
chunked binary layout any tool can read (``zarr.open_array(path)``), JSON
attributes beside the data (the full :class:`~.keys.EmbeddingKey` and the
backend's metadata), and a CRC32C checksum codec, so a flipped or truncated
chunk raises on read instead of giving a wrong embedding.

An entry holds one slice as one chunk (``(1, 256, 64, 64)``: 4 MiB in float32,
2 MiB in float16), because the backends encode one slice at a time, on demand
and in any order (the nearest slice first when encoding ahead), and two cases
sharing a slice share its entry; a per-volume array would need the whole
volume hashed before its first slice could be looked up. Entries are stored
uncompressed: zstd, with or without blosc's byte shuffle, keeps 92-93% of the
bytes of real LiteMedSAM embeddings, not worth its time on every read.

Layout under the store's root::

    store.json                  {"kind": "napari-medsam-eval embedding store", "format": 1, "limit_bytes": N}
    entries/<key digest>.zarr/  zarr.json (shape, dtype, codecs, attributes) + c/0/0/0/0
    tmp/                        entries being written (renamed into entries/ when complete)

Ownership (:mod:`.layout`): only a missing or empty folder becomes a store, only one marked by
``store.json`` is used as one, and only entries and temporaries of the store's own naming and
format are ever removed.

Safety between processes (benchmark workers, a napari session and a CLI run at
once): an entry is written under ``tmp/`` and renamed into place, so a reader
sees a whole entry or none; two writers of one key both rename, the second
fails and drops its copy.

Checks on every read: the stored key equals the requested one, shape and dtype
are the expected ones, the chunk is present (zarr would silently return zeros
for a missing one), the checksum matches and every value is finite. An entry
failing any of them is removed with a :class:`RuntimeWarning` and the caller
recomputes it.

Least-recently-used eviction: a read touches the entry folder's mtime; when the
store grows past ``limit_bytes`` the oldest entries are removed until it is at
90% of the limit (so eviction does not run on every write near the limit). Each
process counts its own writes and rescans the folder when its count passes
the limit or every :data:`RESCAN_EVERY` writes, so several writing processes
overshoot the limit by at most their recent writes, and only briefly.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core.errors import DataError
from .keys import EmbeddingKey
from .layout import (ENTRIES, STORE_FILE, SUFFIX, TMP, check_store_folder, entry_shaped, entry_size, file_size, foreign_items,
                     is_temporary, listing, marker_text, read_limit)
from ..core.errors import InputError

#: how embeddings may be stored: float32 (exact, the default) or float16 (half the size, rounded)
STORAGE_DTYPES = ("float32", "float16")
#: the size limit when none is given (option, environment, store.json): ~1000 LiteMedSAM slices in float32
DEFAULT_LIMIT_BYTES = 4 * 2**30
#: eviction brings the store down to this fraction of the limit
LOW_WATER = 0.9
#: a writing process rescans the folder at least this often (other processes write too)
RESCAN_EVERY = 32
#: a tmp/ folder older than this is a crashed writer's leftover
STALE_TMP_SECONDS = 3600.0


@dataclass
class StoreEntry:
    """One entry on disk: its folder, size in bytes and last use (mtime, ns)."""

    path: Path
    size: int
    last_used_ns: int


@dataclass
class StoreInfo:
    """What ``medsam-eval cache info`` shows."""

    root: Path
    entries: int
    size_bytes: int
    limit_bytes: int
    limit_source: str
    #: "model checkpoint[:12] engine dtype" -> [entries, bytes]
    groups: dict[str, list[int]] = field(default_factory=dict)


def folder_size(path: Path) -> int:
    """Bytes of the files under ``path`` (0 when it vanished meanwhile)."""
    return sum(file_size(os.path.join(dirpath, name)) for dirpath, _, files in os.walk(path) for name in files)


@dataclass
class Cleared:
    """What :meth:`EmbeddingStore.clear` removed, and what it left because it is not the store's."""

    entries: int
    size_bytes: int
    temporaries: int
    #: paths relative to the store's root, folders with a trailing ``/``
    left: list[str] = field(default_factory=list)


class EmbeddingStore:
    """A folder of embeddings keyed by :class:`~.keys.EmbeddingKey` (see the module doc).

    ``limit_bytes``: the size limit; when given it is also recorded in
    ``store.json`` (what ``cache info`` shows), else the recorded one or
    :data:`DEFAULT_LIMIT_BYTES` applies. ``dtype``: ``"float32"`` (exact) or
    ``"float16"``. Counters: ``hits``, ``misses``, ``writes``, ``evicted``,
    ``rejected``. ``read_only`` (``cache info``/``clear``): nothing is created, written, touched or
    swept (only :meth:`clear` removes). A folder neither missing, empty nor a store is a DataError.
    """

    def __init__(self, root: str | Path, *, limit_bytes: int | None = None, dtype: str = "float32",
                 read_only: bool = False) -> None:
        if dtype not in STORAGE_DTYPES:
            raise InputError(f"embedding store dtype must be one of {', '.join(STORAGE_DTYPES)}, got {dtype!r}")
        if limit_bytes is not None and limit_bytes < 0:
            raise InputError(f"embedding store limit must be >= 0 bytes, got {limit_bytes}")
        self.root = Path(root).expanduser().absolute()
        self.dtype = dtype
        self.read_only = read_only
        self.entries_dir = self.root / ENTRIES
        self.tmp_dir = self.root / TMP
        existing = check_store_folder(self.root)  # refuses a folder that is not ours before anything is written
        if read_only and not existing:
            raise DataError("no embedding store there to open", self.root)
        recorded = read_limit(self.root) if existing else None
        self.limit_bytes = int(limit_bytes if limit_bytes is not None else recorded if recorded is not None
                               else DEFAULT_LIMIT_BYTES)
        if not read_only:
            if not existing or (limit_bytes is not None and recorded != self.limit_bytes):
                self.root.mkdir(parents=True, exist_ok=True)
                self._write_settings(self.limit_bytes if limit_bytes is not None or recorded is not None else None)
            self.entries_dir.mkdir(exist_ok=True)
            self.tmp_dir.mkdir(exist_ok=True)
        self.hits = self.misses = self.writes = self.evicted = self.rejected = 0
        self._lock = threading.Lock()
        self._estimate: int | None = None  # bytes in the store as this process last saw it, plus its writes
        self._writes_since_scan = 0
        self._write_failed = False

    def __repr__(self) -> str:
        return f"EmbeddingStore({str(self.root)!r}, dtype={self.dtype!r}, limit_bytes={self.limit_bytes})"

    def _write_settings(self, limit: int | None) -> None:
        """The marker first: a folder holding anything of ours holds it (only a limit someone set is recorded)."""
        text = marker_text(limit)
        tmp = self.root / f".{STORE_FILE}.{os.getpid()}"
        tmp.write_text(text)
        os.replace(tmp, self.root / STORE_FILE)

    def path_of(self, key: EmbeddingKey) -> Path:
        """The entry folder of ``key`` (present or not)."""
        return self.entries_dir / (key.digest() + SUFFIX)

    # -- reading ----------------------------------------------------------

    def get(self, key: EmbeddingKey, shape: tuple[int, ...]) -> np.ndarray | None:
        """The stored embedding of ``key`` as float32, or None (absent, or corrupt/stale: removed, warned)."""
        import zarr  # noqa: F401 - outside the try: a missing package must not pass for a damaged entry

        path = self.path_of(key)
        if not path.is_dir():
            self.misses += 1
            return None
        try:
            array = self._read(path, key, tuple(shape))
        except Exception as exc:  # noqa: BLE001 - whatever a damaged entry raises, it is recomputed
            if not path.exists():  # evicted by another process while being read: a plain miss
                self.misses += 1
                return None
            self._reject(path, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
            return None
        try:
            if not self.read_only:
                os.utime(path)  # least-recently-used order across processes
        except OSError:
            pass
        self.hits += 1
        return array

    @staticmethod
    def _read(path: Path, key: EmbeddingKey, shape: tuple[int, ...]) -> np.ndarray:
        import zarr

        stored = zarr.open_array(store=str(path), mode="r")
        if stored.attrs.get("key") != key.as_dict():
            raise InputError(f"stale: stored under another key ({stored.attrs.get('key')})")
        if tuple(stored.shape) != shape or str(stored.dtype) != key.dtype:
            raise InputError(f"stale: shape {tuple(stored.shape)} {stored.dtype}, expected {shape} {key.dtype}")
        if stored.nchunks_initialized != stored.nchunks:
            raise InputError(f"corrupt: {stored.nchunks - stored.nchunks_initialized} chunk(s) missing")
        array = np.asarray(stored[...])  # the CRC32C codec raises on a damaged chunk
        if not np.isfinite(array).all():
            raise InputError("corrupt: non-finite values")
        return array.astype(np.float32, copy=False)

    def _reject(self, path: Path, why: str) -> None:
        removed = "left as it is (read-only)" if self.read_only else "removed"
        warnings.warn(f"embedding store: entry {path} is corrupt or stale ({why}); {removed}, it will be recomputed",
                      RuntimeWarning, stacklevel=4)
        if not self.read_only and entry_shaped(path):  # only an entry of the store's own making
            shutil.rmtree(path, ignore_errors=True)
        self.rejected += 1
        self.misses += 1

    # -- writing ----------------------------------------------------------

    def as_stored(self, array: np.ndarray) -> np.ndarray:
        """``array`` as a read of its entry will give it back: float32, rounded through float16 when so stored.

        A backend uses this for a freshly computed embedding too, so its masks
        do not depend on whether the embedding came from the store.
        """
        array = np.asarray(array, dtype=np.float32)
        return array.astype(np.float16).astype(np.float32) if self.dtype == "float16" else array

    def put(self, key: EmbeddingKey, array: np.ndarray, meta: dict[str, Any] | None = None) -> None:
        """Store ``array`` under ``key`` (a write that fails warns once and is skipped: the store is a cache)."""
        data = np.ascontiguousarray(array, dtype=self.dtype)
        if data.nbytes > self.limit_bytes or self.read_only:
            return
        try:
            size = self._write(key, data, meta or {})
        except OSError as exc:
            if not self._write_failed:
                self._write_failed = True
                warnings.warn(f"embedding store {self.root}: cannot write ({exc}); embeddings are not kept",
                              RuntimeWarning, stacklevel=3)
            return
        self.writes += 1
        with self._lock:
            self._writes_since_scan += 1
            if self._estimate is not None:
                self._estimate += size
            if self._estimate is None or self._estimate > self.limit_bytes or self._writes_since_scan >= RESCAN_EVERY:
                self._evict_to_fit()

    def _write(self, key: EmbeddingKey, data: np.ndarray, meta: dict[str, Any]) -> int:
        import zarr
        from zarr.codecs import Crc32cCodec

        final = self.path_of(key)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=final.stem + ".", suffix=SUFFIX, dir=self.tmp_dir))
        try:
            stored = zarr.create_array(
                store=str(tmp), shape=data.shape, dtype=data.dtype, chunks=data.shape, compressors=[Crc32cCodec()],
                fill_value=0, overwrite=True,
                attributes={"key": key.as_dict(), "meta": meta, "written": time.strftime("%Y-%m-%dT%H:%M:%S")},
            )
            stored[...] = data
            size = folder_size(tmp)
            if entry_shaped(final):  # replaced (a removed corrupt entry's key may be rewritten by another process)
                shutil.rmtree(final, ignore_errors=True)
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():
                    raise
                return 0  # another process stored the same key first: its entry is as good as ours
            os.utime(final)
            return size
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def cached(self, key: EmbeddingKey, shape: tuple[int, ...],
               compute: Callable[[], tuple[np.ndarray, dict[str, Any]]]) -> tuple[np.ndarray, bool]:
        """The stored embedding of ``key``, else ``compute()``'s, stored; and whether it was stored already.

        ``compute`` returns the embedding and metadata kept beside it. The
        array returned is :meth:`as_stored` (float16-rounded in a float16 store).
        """
        found = self.get(key, shape)
        if found is not None:
            return found, True
        array, meta = compute()
        array = self.as_stored(array)
        if tuple(array.shape) == tuple(shape):
            self.put(key, array, meta)
        return array, False

    # -- size and eviction ------------------------------------------------

    def scan(self) -> list[StoreEntry]:
        """Every complete entry of the store's own naming and format, least recently used first. Reads only."""
        entries: list[StoreEntry] = []
        for path in listing(self.entries_dir):
            size = entry_size(path)
            if size is None:
                continue  # not an entry of ours: never counted, evicted or cleared
            try:
                mtime = path.stat().st_mtime_ns
            except OSError:
                continue
            entries.append(StoreEntry(path, size, mtime))
        entries.sort(key=lambda e: e.last_used_ns)
        return entries

    def _remove_stale_tmp(self) -> None:
        """Remove crashed writers' temporaries: the store's own names only, older than :data:`STALE_TMP_SECONDS`."""
        now = time.time()
        for path in listing(self.tmp_dir):
            try:
                if now - path.stat().st_mtime > STALE_TMP_SECONDS and is_temporary(path):
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass

    def size_bytes(self) -> int:
        """Bytes held by the store's entries now."""
        return sum(e.size for e in self.scan())

    def _evict_to_fit(self) -> None:
        self._remove_stale_tmp()
        entries = self.scan()
        total = sum(e.size for e in entries)
        if total > self.limit_bytes:
            target = int(self.limit_bytes * LOW_WATER)
            for entry in entries:
                if total <= target:
                    break
                shutil.rmtree(entry.path, ignore_errors=True)
                total -= entry.size
                self.evicted += 1
        self._estimate = total
        self._writes_since_scan = 0

    # -- the cache command ------------------------------------------------

    def info(self, limit_source: str = "") -> StoreInfo:
        """Entries, size and limit, with entries grouped by model, checkpoint, engine and dtype."""
        entries = self.scan()
        groups: dict[str, list[int]] = {}
        for entry in entries:
            try:
                key = json.loads((entry.path / "zarr.json").read_text())["attributes"]["key"]
                name = f"{key['model']} {str(key['checkpoint'])[:12]} {key['engine']} {key['dtype']}"
            except (OSError, ValueError, KeyError, TypeError):
                name = "unreadable"
            group = groups.setdefault(name, [0, 0])
            group[0] += 1
            group[1] += entry.size
        return StoreInfo(self.root, len(entries), sum(e.size for e in entries), self.limit_bytes,
                         limit_source, groups)

    def clear(self) -> Cleared:
        """Remove every entry and temporary the store can prove its own (:mod:`.layout`); settings stay.

        Anything else under the store's folder is left, and listed in the result.
        """
        entries = self.scan()
        for entry in entries:
            shutil.rmtree(entry.path, ignore_errors=True)
        temporaries = [path for path in listing(self.tmp_dir) if is_temporary(path)]
        for path in temporaries:
            shutil.rmtree(path, ignore_errors=True)
        with self._lock:
            self._estimate = 0
        return Cleared(len(entries), sum(e.size for e in entries), len(temporaries), foreign_items(self.root))

    def stats(self) -> dict[str, object]:
        """This process's use of the store (recorded in a backend's ``describe()``)."""
        return {"embeddings": str(self.root), "embeddings_dtype": self.dtype, "embeddings_limit_bytes": self.limit_bytes,
                "embeddings_hits": self.hits, "embeddings_misses": self.misses, "embeddings_writes": self.writes,
                "embeddings_evicted": self.evicted, "embeddings_rejected": self.rejected}


__all__ = [
    "Cleared",
    "DEFAULT_LIMIT_BYTES",
    "EmbeddingStore",
    "STORAGE_DTYPES",
    "StoreEntry",
    "StoreInfo",
    "folder_size",
    "read_limit",
]
