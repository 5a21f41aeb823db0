"""A lesion target's prompts and list cells as a run streams them: one lesion at a time, never the list.

A target taken lesion by lesion on an instance label may have tens of thousands of lesions. The runner
walks its prompts as they are made (:class:`LesionPrompts`, the protocol's
:meth:`~napari_medsam_eval.protocols.base.PromptProtocol.lesion_prompts`) and gives each prompt, stop
and lesion record to its row's cell (:func:`row_cells`, :mod:`.spilled_cells`) as it comes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator

from ..core.case import Case
from ..core.prompt import PROMPTS_SEPARATOR, Prompt, prompt_json
from ..core.targets import Target
from ..evaluation.lesions import lesion_json
from .schema import json_dumps
from .spilled_cells import ListCell, cell_file


class LesionPrompts:
    """The prompts of one lesion target of a case, made again each time they are walked (one lesion's
    mask and prompt at a time): what the protocol's ``prompts`` gives for the target, in its order."""

    def __init__(self, protocol: Any, case: Case, target: Target) -> None:
        self.protocol, self.case, self.target = protocol, case, target

    def __iter__(self) -> Iterator[Prompt]:
        return self.protocol.lesion_prompts(self.case, self.target)

    def __repr__(self) -> str:
        return f"LesionPrompts({self.protocol.name}, case {self.case.case_id}, target {self.target.text()})"


def row_cells(run_dir: Path | None, case_id: str, key: int) -> dict[str, ListCell]:
    """The ``prompt``, ``stops`` and ``lesions`` cells of one lesion target's row, each item written as the
    row's JSON writes it (so a cell kept in the row reads as it always has)."""
    return {
        "prompt": ListCell(run_dir, cell_file(case_id, key, "prompt"), prompt_json, PROMPTS_SEPARATOR),
        "stops": ListCell(run_dir, cell_file(case_id, key, "stops"), lambda stop: json_dumps(stop.to_dict())),
        "lesions": ListCell(run_dir, cell_file(case_id, key, "lesions"), lesion_json),
    }


def filled(cell: ListCell, items: Iterable[Any]) -> str:
    """``cell`` given every item, and its text (a lesion target's prompts given as a list: a joint run's)."""
    for item in items:
        cell.add(item)
    return cell.text()


__all__ = ["LesionPrompts", "filled", "row_cells"]
