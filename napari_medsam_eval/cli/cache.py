"""``medsam-eval cache info|clear``: show or empty the persistent embedding store.

The store is the folder given by ``--dir``, else ``$MEDSAM_EVAL_EMBEDDINGS``
(when it names a folder), else the default folder
(:func:`napari_medsam_eval.embeddings.default_root`). ``info`` prints its
location, entries, size and limit (and entries per model/checkpoint/engine);
``clear`` removes every entry, after a yes at the terminal or with ``--yes``
(without a terminal and without ``--yes`` it refuses: a script must say so).
Neither command creates a store that is not there.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..embeddings import ENV_DIR, ENV_LIMIT, EmbeddingStore, default_root, format_size
from ..embeddings.config import resolve_limit, resolve_root
from ..embeddings.store import ENTRIES, STORE_FILE, read_limit


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("cache", help="show or clear the persistent embedding store")
    parser.add_argument("action", choices=("info", "clear"), help="info: location, entries, size, limit; "
                                                                  "clear: remove every stored embedding")
    parser.add_argument("--dir", type=Path, help=f"the store's folder (default: ${ENV_DIR}, else embeddings/ in the package's cache folder)")
    parser.add_argument("--yes", action="store_true", help="clear without asking")
    parser.set_defaults(func=run)


def store_root(args: argparse.Namespace) -> tuple[Path, str]:
    """The folder the command works on and what chose it."""
    if args.dir is not None:
        return args.dir.expanduser(), "--dir"
    from_env = resolve_root(None) if os.environ.get(ENV_DIR) else None
    if from_env is not None:
        return from_env, f"${ENV_DIR}"
    return default_root(), "default"


def _is_store(root: Path) -> bool:
    return root.is_dir() and ((root / STORE_FILE).is_file() or (root / ENTRIES).is_dir())


def _limit_source(root: Path) -> str:
    if resolve_limit(None) is not None:
        return f"${ENV_LIMIT}"
    return STORE_FILE if read_limit(root) is not None else "default"


def run(args: argparse.Namespace) -> int:
    root, chosen = store_root(args)
    if not _is_store(root):
        print(f"embedding store: {root} ({chosen}): none there yet, nothing stored")
        return 0
    store = EmbeddingStore(root, limit_bytes=None)
    if args.action == "info":
        return _info(store, chosen)
    return _clear(store, args.yes)


def _info(store: EmbeddingStore, chosen: str) -> int:
    source = _limit_source(store.root)
    limit = resolve_limit(None) if source.startswith("$") else store.limit_bytes
    info = store.info(source)
    share = f" ({100 * info.size_bytes / limit:.0f}%)" if limit else ""
    print(f"embedding store: {info.root} ({chosen})")
    print(f"entries: {info.entries}")
    print(f"size: {format_size(info.size_bytes)} of {format_size(limit)} limit{share}, limit from {source}")
    for name, (count, size) in sorted(info.groups.items()):
        print(f"  {name}: {count} entries, {format_size(size)}")
    return 0


def _clear(store: EmbeddingStore, yes: bool) -> int:
    entries = store.scan()
    if not entries:
        print(f"embedding store: {store.root}: already empty")
        return 0
    size = format_size(sum(e.size for e in entries))
    if not yes:
        if not sys.stdin.isatty():
            print(f"error: this removes {len(entries)} stored embeddings ({size}) from {store.root}; "
                  "add --yes to do it without a terminal", file=sys.stderr)
            return 2
        answer = input(f"remove {len(entries)} stored embeddings ({size}) from {store.root}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return 1
    count, removed = store.clear()
    print(f"removed {count} stored embeddings ({format_size(removed)}) from {store.root}")
    return 0
