"""One case of a dataset before any pixel is read: its id, files and facts (:class:`CaseRef`)."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class CaseRef:
    """One case of a dataset, before any pixel is read.

    ``paths`` maps a role (``"image"``, ``"label"``, ``"masks"`` ...) to a path
    (a string, or a list of strings for per-object masks); ``attributes`` holds
    plain JSON facts a result row keeps (``split``, ``difficulty``, ``view``,
    ``patient`` ...). ``dataset`` is the dataset's name (its folder name) and
    ``root`` its folder.
    """

    case_id: str
    layout: str
    dataset: str
    root: str
    kind: str
    paths: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)
    #: read files the dataset lists outside its folder (``run --allow-outside``); refused otherwise
    allow_outside: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CaseRef":
        return cls(**data)

    def outside(self) -> list[str]:
        """The paths this case lists outside its dataset folder (``../..``, an absolute path elsewhere),
        judged on the paths as written, so links inside the folder stay inside."""
        root = os.path.normpath(os.path.abspath(self.root))
        found = []
        for value in self.paths.values():
            for item in value if isinstance(value, (list, tuple)) else [value]:
                path = os.path.normpath(os.path.abspath(str(item)))
                if path != root and not path.startswith(root + os.sep):
                    found.append(str(item))
        return found

    def files(self) -> list[Path]:
        """Every file this case reads (a folder counts as the files directly in it)."""
        found: list[Path] = []
        for value in self.paths.values():
            for item in value if isinstance(value, (list, tuple)) else [value]:
                path = Path(item)
                if path.is_dir():
                    found.extend(sorted(p for p in path.iterdir() if p.is_file()))
                elif path.exists():
                    found.append(path)
        return found
