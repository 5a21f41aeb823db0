"""What an MSD / nnU-Net ``dataset.json`` beside a case's image folder says of its modality and labels.

The file is the user's statement of what the labels are and which regions are scored, so it is obeyed or
refused, never half-read: a file that is not JSON, a JSON list, a ``labels`` entry that is neither MSD's
``"<value>": "<name>"`` nor nnU-Net's ``"<name>": <value>`` / ``"<name>": [<values>]`` (a negative value,
2.5, ``"2"``, ``[2]`` inside a region, an empty region) is a :class:`~napari_medsam_eval.core.errors.DataError`
naming the file, the key and the value. A missing file is no error: it only enriches a case.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from ..core.errors import DataError, OptionError, os_problem
from ..core.targets import dataset_json_targets
from .npz_io import MODALITY_PREFIXES

#: the file's name, beside ``imagesTr``/``labelsTr``
DATASET_JSON = "dataset.json"
#: how a ``labels`` entry is written, for refusals
_LABEL_FORMS = ('"<value>": "<name>" (MSD) or "<name>": <value> / "<name>": [<values>] (nnU-Net), '
                "values whole numbers of 0 or more")


def read_dataset_json(path: str | Path) -> dict[str, Any] | None:
    """The JSON object of the ``dataset.json`` at ``path``; None when there is no such file.

    A file that cannot be read, is not JSON or is not a JSON object is a DataError naming it.
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"is not UTF-8 text ({error.reason} at byte {error.start}); the labels it declares "
                        "decide what is scored: fix or remove it", path) from None
    except OSError as error:
        raise DataError(f"cannot be read: {os_problem(error)}", path) from None
    try:
        info = json.loads(text)
    except RecursionError:
        raise DataError("is not JSON this tool reads (nested too deeply); the labels it declares decide what is "
                        "scored: fix or remove it", path) from None
    except ValueError as error:
        raise DataError(f"is not valid JSON ({error}); the labels it declares decide what is scored: fix or "
                        "remove it", path) from None
    if not isinstance(info, dict):
        raise DataError(f"holds a JSON {_json_kind(info)}, not an object of \"labels\", \"modality\", ...", path)
    return info


def msd_dataset_info(image_path: str | Path) -> dict[str, Any]:
    """``modality``, ``label_names`` and (nnU-Net v2 regions) ``targets`` from an MSD ``dataset.json`` next to
    ``imagesTr``/``imagesTs``.

    Returns ``{}`` when there is none (it only enriches a case); a file this tool cannot obey is a DataError
    naming it, the key and the value (module doc).
    """
    folder = Path(image_path).parent
    if not folder.name.lower().startswith("images"):
        return {}
    path = folder.parent / DATASET_JSON
    info = read_dataset_json(path)
    if info is None:
        return {}
    result: dict[str, Any] = {}
    modality = _modality(info, path)
    if modality is not None:
        result["modality"] = MODALITY_PREFIXES.get(modality.lower(), modality)
    labels = info.get("labels")
    if labels is None:
        return result
    if not isinstance(labels, Mapping):
        raise DataError(f"'labels' is a JSON {_json_kind(labels)} ({_short(labels)}); it must be an object of "
                        f"{_LABEL_FORMS}", path)
    check_labels(labels, path)
    names = _label_names(labels)
    if names:
        result["label_names"] = names
    try:
        targets = dataset_json_targets(labels)
    except OptionError as error:  # two regions named alike once cleaned ("whole tumor", "whole_tumor")
        raise DataError(f"'labels': {error}", path) from None
    if targets:
        result["targets"] = targets
    return result


def check_labels(labels: Mapping[str, Any], path: Path) -> None:
    """Each ``labels`` entry is one of :data:`_LABEL_FORMS`; else a DataError naming the key and the value."""
    for key, value in labels.items():
        if isinstance(value, str):
            if not str(key).isdigit():
                _refuse(key, value, f"a name maps to a label value, not to text; write it as {_LABEL_FORMS}", path)
        elif isinstance(value, list):
            if not value:
                _refuse(key, value, "a region lists at least one label value", path)
            for item in value:
                if not _is_value(item):
                    _refuse(key, value, f"a region lists label values, whole numbers of 0 or more; {_short(item)} "
                                        "is not one", path)
        elif not _is_value(value):
            _refuse(key, value, f"a label value is a whole number of 0 or more; write the entry as {_LABEL_FORMS}",
                    path)


def _is_value(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _refuse(key: str, value: Any, why: str, path: Path) -> None:
    raise DataError(f"'labels' entry {key!r}: {_short(value)}: {why}", path)


def _modality(info: dict[str, Any], path: Path) -> str | None:
    """Channel 0's modality (MSD ``modality``, nnU-Net v2 ``channel_names``); a plain text is channel 0's."""
    for key in ("modality", "channel_names"):
        value = info.get(key)
        if value is None or value == {}:
            continue
        if isinstance(value, str):
            return value
        if isinstance(value, Mapping):
            channel = value.get("0")
            if channel is None or isinstance(channel, str):
                return channel
            raise DataError(f"'{key}' channel \"0\": {_short(channel)} is not a modality name (text such as "
                            "\"MRI\")", path)
        raise DataError(f"'{key}' is a JSON {_json_kind(value)} ({_short(value)}); it must be an object such as "
                        "{\"0\": \"MRI\"}", path)
    return None


def _json_kind(value: Any) -> str:
    kinds = {list: "list", dict: "object", str: "string", bool: "true/false", type(None): "null"}
    return kinds.get(type(value), "number")


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _label_names(labels: Mapping[str, Any]) -> dict[int, str]:
    """MSD maps value -> name (``{"1": "anterior"}``); nnU-Net v2 maps name -> value."""
    names: dict[int, str] = {}
    for key, value in labels.items():
        if str(key).isdigit() and isinstance(value, str):
            names[int(key)] = value
        elif isinstance(value, int):
            names[value] = str(key)
    names.pop(0, None)
    return names
