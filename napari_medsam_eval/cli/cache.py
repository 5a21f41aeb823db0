"""``medsam-eval cache info|clear``: show or empty the persistent embedding store.

The store is the folder given by ``--dir``, else ``$MEDSAM_EVAL_EMBEDDINGS``
(when it names a folder), else the default folder
(:func:`napari_medsam_eval.embeddings.default_root`). ``info`` prints its
location, entries, size and limit (and entries per model/checkpoint/engine);
``clear`` removes every entry, after a yes at the terminal or with ``--yes``
(without a terminal and without ``--yes`` it refuses: a script must say so).
Neither command creates a store that is not there, and ``info`` writes and
deletes nothing. A folder that is not a store (no marker of ours) is refused
with exit status 2; ``clear`` removes only the entries and temporaries the
store can prove its own (:mod:`napari_medsam_eval.embeddings.layout`) and
names what it left.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..embeddings import ENV_DIR, ENV_LIMIT, EmbeddingStore, default_root, format_size
from ..embeddings.config import resolve_limit, resolve_root
from ..embeddings.layout import check_store_folder, foreign_items, is_temporary, listing
from ..core.ownership import SHOWN_ENTRIES
from ..embeddings.store import STORE_FILE, read_limit
from .commands import command_help


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("cache", help=command_help("cache"))
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


def _limit_source(root: Path) -> str:
    if resolve_limit(None) is not None:
        return f"${ENV_LIMIT}"
    return STORE_FILE if read_limit(root) is not None else "default"


def run(args: argparse.Namespace) -> int:
    root, chosen = store_root(args)
    if not check_store_folder(root):  # a folder that is neither missing, empty nor a store: DataError, exit 2
        print(f"embedding store: {root} ({chosen}): none there yet, nothing stored")
        return 0
    store = EmbeddingStore(root, read_only=True)
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
    if not entries and not any(is_temporary(path) for path in listing(store.tmp_dir)):
        print(f"embedding store: {store.root}: already empty")
        _report_left(store.root, foreign_items(store.root))
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
    cleared = store.clear()
    print(f"removed {cleared.entries} stored embeddings ({format_size(cleared.size_bytes)}) from {store.root}"
          + (f" and {cleared.temporaries} unfinished writes" if cleared.temporaries else ""))
    _report_left(store.root, cleared.left)
    return 0


def _report_left(root: Path, left: list[str]) -> None:
    """Name what lies in the store's folder that is not the store's (never removed)."""
    if left:
        more = len(left) - SHOWN_ENTRIES
        shown = ", ".join(left[:SHOWN_ENTRIES]) + (f" and {more} more" if more > 0 else "")
        print(f"left {len(left)} item(s) in {root} that are not the store's: {shown}")
