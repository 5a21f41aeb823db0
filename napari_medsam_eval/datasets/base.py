"""What every dataset layout provides: cheap case listing, loading, label names.

A *layout* is a folder convention (MSD, SUN-SEG, ...). It is stateless: every
method takes the dataset's root folder or a :class:`CaseRef`, so one instance
serves any number of datasets and pickles trivially into worker processes.

* :meth:`DatasetLayout.detect` looks at names only (no pixels, few file reads);
* :meth:`DatasetLayout.list_cases` returns :class:`CaseRef` objects (ids, file
  paths, attributes such as ``split``/``difficulty``/``view``), again without
  reading pixels, so listing a large dataset is instant;
* :meth:`DatasetLayout.load` reads one case and sets its ``label_names`` from,
  in order of precedence, a ``dataset.json`` at the root, the layout's own
  names (CAMUS, SUN-SEG), then what the reader found;
* a *task* is a dataset x target label, named ``"<dataset>/<label name>"``
  (``"hippocampus_mri/anterior"``), see :func:`task_name`.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Iterable

from ..core.case import Case
from ..core.errors import DataError
from ..core.targets import Target, check_targets, label_targets, labels_of
from ..io.formats import KNOWN_SUFFIXES, format_suffix, is_broken_link, is_link_loop, listed_file
from .case_ref import CaseRef
from .layouts import msd_dataset_info
from .links import count_once, loops_back, warn_loop


def task_name(dataset: str, name: str) -> str:
    """``"<dataset>/<label name>"``: one task = one dataset x one target."""
    return f"{dataset}/{name}"


def root_dataset_json(root: str | Path) -> dict[str, Any]:
    """``modality``/``label_names`` from a ``dataset.json`` at ``root`` ({} without one).

    Reuses :func:`napari_medsam_eval.datasets.layouts.msd_dataset_info`, which looks for the
    file beside an ``images*`` folder; the image path handed to it need not exist.
    """
    return msd_dataset_info(Path(root) / "imagesTr" / "_")


def visible_dirs(folder: Path, *, broken_links: bool = False) -> list[Path]:
    """Sub-folders of ``folder`` not hidden (``.``), sorted by name.

    ``broken_links`` adds dangling symbolic links (a case folder whose target
    is gone, or a link loop), so a layout listing cases lists them and loading
    them fails with the reason instead of the case vanishing from the count.
    A folder link leading back to ``folder`` or above it (``selfdir -> .``) is
    never followed: it would list the same cases again (a :class:`~.links.DatasetWarning`
    names it).
    """
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return []
    found = []
    for path in entries:
        if path.is_dir() and loops_back(path):
            warn_loop(path)
        elif path.is_dir() or (broken_links and is_broken_link(path)):
            found.append(path)
        elif format_suffix(path) not in KNOWN_SUFFIXES and is_link_loop(path):
            warn_loop(path)  # a looping file name (x.nii.gz) is listed by the file listings, and fails on loading
    return found


def visible_files(folder: Path) -> list[Path]:
    """Files directly in ``folder``, hidden ones (``.``, macOS ``._``) left out.

    A broken symbolic link counts as a file: the case it belongs to is listed
    and fails on loading ("broken symbolic link ..."), rather than disappearing.
    """
    try:
        return sorted(p for p in folder.iterdir() if listed_file(p) and not p.name.startswith("."))
    except OSError:
        return []


class DatasetLayout(ABC):
    """A dataset folder convention. Subclasses set ``name``, ``kind``, ``summary``."""

    name: ClassVar[str] = "layout"
    #: "volume", "video", "image", or "mixed" (npz: volumes or 2D images)
    kind: ClassVar[str] = "mixed"
    #: one line saying what the layout looks like, for error messages
    summary: ClassVar[str] = ""
    #: label names the dataset's definition fixes (CAMUS, SUN-SEG); {} otherwise
    default_label_names: ClassVar[dict[int, str]] = {}

    @abstractmethod
    def detect(self, path: str | Path) -> bool:
        """True when ``path`` is a dataset folder in this layout (names only, no pixels)."""

    @abstractmethod
    def list_cases(self, path: str | Path) -> list[CaseRef]:
        """Every case of the dataset at ``path``, in a fixed order, without reading pixels."""

    @abstractmethod
    def _read(self, ref: CaseRef) -> Case:
        """Read the case's image and label (the layout's own pairing)."""

    def load(self, ref: CaseRef) -> Case:
        """Read one case; its ``label_names`` are the dataset's where it names them."""
        case = self._read(ref)
        case.case_id = ref.case_id
        names = {**case.label_names, **self.label_names(ref.root)}
        if names:
            case.metadata["label_names"] = names
        if case.label is None:
            raise DataError(f"case {ref.case_id} has no ground truth label", ref.paths.get("image"))
        return case

    def label_names(self, path: str | Path) -> dict[int, str]:
        """Label names of the whole dataset: a root ``dataset.json``, else the layout's defaults."""
        from_json = root_dataset_json(path).get("label_names") or {}
        return {**self.default_label_names, **from_json}

    def dataset_targets(self, path: str | Path) -> list[Target] | None:
        """The targets a root ``dataset.json`` declares as nnU-Net v2 regions (lists of label values), in its
        order; None when it declares none (each label is then its own target)."""
        return root_dataset_json(path).get("targets")

    def targets(self, ref: CaseRef, case: Case, requested: list[Target] | None = None) -> list[Target]:
        """The targets to evaluate in ``case``: ``requested`` (``--targets``), else the dataset's regions
        (nnU-Net v2 ``dataset.json``), else each label present or named, ascending.

        A named label absent from a case still gets a row (an empty prompt,
        scored NaN), so every case of a task is accounted for. When the dataset
        declares its labels (a root ``dataset.json``, or the layout's fixed
        names), a value it does not declare is a :class:`DataError` naming the
        label file: no ``label_<n>`` task is invented for it; a requested target naming a label it does
        not declare is an OptionError (:func:`~napari_medsam_eval.core.targets.check_targets`).
        """
        declared = self.label_names(ref.root)
        regions = self.dataset_targets(ref.root)
        known = set(declared) | (labels_of(regions) if regions else set())
        present = set(case.label_values())
        if known:
            undeclared = sorted(int(v) for v in present - known - {0})
            if undeclared:
                source = "dataset.json" if (root_dataset_json(ref.root).get("label_names") or regions) else \
                    f"the {self.name} layout"
                listing = ", ".join(["0 background"] + [f"{v} {declared.get(v, 'in a region')}" for v in sorted(known)])
                where = ref.paths.get("label") or case.metadata.get("label_path") or ref.paths.get("image")
                raise DataError(f"label file holds values {undeclared} that {source} does not declare "
                                f"({listing})", where if isinstance(where, (str, os.PathLike)) else None)
        if requested:
            if known:
                check_targets(requested, known, f"dataset {Path(ref.root).name} (its dataset.json)"
                              if root_dataset_json(ref.root) else f"the {self.name} layout")
            return list(requested)
        if regions:
            return list(regions)
        return label_targets(present | set(declared), {**case.label_names, **declared})

    def ref(self, root: Path, case_id: str, paths: dict[str, Any], kind: str | None = None,
            **attributes: Any) -> CaseRef:
        """A :class:`CaseRef` of this layout with string paths."""
        clean = {k: [os.fspath(p) for p in v] if isinstance(v, (list, tuple)) else os.fspath(v)
                 for k, v in paths.items() if v is not None}
        return CaseRef(case_id=case_id, layout=self.name, dataset=Path(root).resolve().name, root=os.fspath(root),
                       kind=kind or self.kind, paths=clean, attributes={k: v for k, v in attributes.items()
                                                                        if v is not None})


def unique_case_ids(refs: Iterable[CaseRef], path: str | Path) -> list[CaseRef]:
    """``refs`` with each case counted once, or a DataError naming the ids that occur twice.

    Every layout's listing ends here: a case whose files were reached twice
    (through a symbolic or hard link) is kept once, with a :class:`~.links.DatasetWarning`
    naming the link (:func:`~.links.count_once`).
    """
    refs = count_once(refs, path)
    seen: dict[str, int] = {}
    for ref in refs:
        seen[ref.case_id] = seen.get(ref.case_id, 0) + 1
    duplicates = sorted(k for k, n in seen.items() if n > 1)
    if duplicates:
        raise DataError(f"case ids occur more than once: {', '.join(duplicates[:10])}", path)
    return refs
