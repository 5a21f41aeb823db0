"""Symbolic and hard links inside a dataset: each case counted once, loops never followed.

A dataset folder may reach one file twice: a folder link back to an enclosing
folder (``selfdir -> .``), two links to one file, a hard link. Listing such a
folder naively counts those cases twice in ``n`` and in every median. Here

* :func:`loops_back` tells a folder link that leads back to the folder holding
  it (or one above it): following it lists the same cases again, forever if
  walked recursively, so the listing does not enter it and says so;
* :func:`count_once` keeps one :class:`~.case_ref.CaseRef` per set of files (the
  identity of a file is its device and inode, so symbolic and hard links both
  count), preferring the path with the fewest links, and warns naming the link
  through which each dropped case was reached.

Warnings are :class:`DatasetWarning` (a ``UserWarning``): the listing goes on.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..io.formats import is_link_loop, link_target
from .case_ref import CaseRef

#: case ids shown in one warning before "..."
_SHOWN = 5


class DatasetWarning(UserWarning):
    """A dataset listing met a link that reaches a case twice, or a link loop, and left it out."""


def loops_back(link: Path) -> bool:
    """True when the folder link ``link`` leads to the folder holding it or one above it."""
    if not link.is_symlink():
        return False
    target = os.path.realpath(link)
    here = os.path.realpath(link.parent)
    return here == target or here.startswith(target.rstrip(os.sep) + os.sep)


def warn_loop(link: Path) -> None:
    """Say that the folder link ``link`` is a loop and is not followed.

    The warning is attributed to this line whoever lists the folder, so Python
    shows it once, not once per layout that looked at the folder.
    """
    if is_link_loop(link):
        problem = "is a symbolic link loop (it leads back to itself and never reaches a file or folder); left out"
    else:
        problem = (f"leads back to {os.path.realpath(link)}, a folder it is in (a link loop); not followed, "
                   "so the cases under it are counted once")
    warnings.warn(f"{link} -> {link_target(link)} {problem}", DatasetWarning, stacklevel=1)


def _identity(value: Any) -> tuple | None:
    """(device, inode) of every path of a ``paths`` entry; None when one cannot be reached."""
    items = value if isinstance(value, (list, tuple)) else [value]
    found = []
    for item in items:
        try:
            stat = os.stat(item)
        except (OSError, ValueError):
            return None
        found.append((stat.st_dev, stat.st_ino))
    return tuple(found)


def case_identity(ref: CaseRef) -> tuple | None:
    """What makes a case the same case: the files of all its roles (None: its image is not reachable)."""
    image = _identity(ref.paths.get("image"))
    if image is None:
        return None  # a missing or broken image is listed (it fails on loading), never merged
    return tuple((role, _identity(value)) for role, value in sorted(ref.paths.items()))


def links_on_path(path: Path, root: Path) -> list[Path]:
    """The symbolic links among ``path`` and its folders below ``root`` (all of them when outside ``root``)."""
    try:
        parts = path.relative_to(root).parts
        base = root
    except ValueError:
        parts, base = path.parts, Path(path.anchor)
    found, current = [], base
    for part in parts:
        current = current / part
        if current.is_symlink():
            found.append(current)
    return found


def count_once(refs: Iterable[CaseRef], root: str | Path) -> list[CaseRef]:
    """``refs`` with each case kept once (see the module doc), in their listed order."""
    refs, root = list(refs), Path(root)
    groups: dict[tuple, list[int]] = {}
    for index, ref in enumerate(refs):
        key = case_identity(ref)
        if key is not None:
            groups.setdefault(key, []).append(index)
    dropped: list[tuple[int, int]] = []  # (index dropped, index kept)
    for indices in groups.values():
        if len(indices) > 1:
            kept = min(indices, key=lambda i: (_n_links(refs[i], root), i))
            dropped += [(i, kept) for i in indices if i != kept]
    if not dropped:
        return refs
    _warn_dropped(refs, sorted(dropped), root)
    gone = {index for index, _ in dropped}
    return [ref for index, ref in enumerate(refs) if index not in gone]


def _n_links(ref: CaseRef, root: Path) -> int:
    return len(links_on_path(Path(ref.paths["image"]), root))


def _warn_dropped(refs: list[CaseRef], dropped: list[tuple[int, int]], root: Path) -> None:
    """One warning per link through which cases were reached a second time."""
    by_link: dict[str, list[str]] = {}
    for index, kept in dropped:
        path = Path(refs[index].paths["image"])
        links = links_on_path(path, root)
        if links:
            name = f"symbolic link {links[0]} -> {link_target(links[0])}"
        else:
            name = f"{path} (a hard link to {refs[kept].paths['image']})"
        by_link.setdefault(name, []).append(refs[kept].case_id)
    for name, ids in by_link.items():
        shown = ", ".join(ids[:_SHOWN]) + (f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else "")
        warnings.warn(f"{root}: {name} reaches {len(ids)} case(s) already listed ({shown}); "
                      "each is counted once", DatasetWarning, stacklevel=1)


def files_once(paths: Sequence[Path], root: str | Path) -> list[Path]:
    """``paths`` with each file once, as :func:`count_once` keeps cases (for listings of bare files:
    the 2D study's images); warnings name the files by their names."""
    refs = [CaseRef(case_id=path.name, layout="", dataset="", root=os.fspath(root), kind="image",
                    paths={"image": os.fspath(path)}) for path in paths]
    return [Path(ref.paths["image"]) for ref in count_once(refs, root)]
