"""Options a user gives (the CLI's flags and ``--*-options`` JSON, the widgets' fields), checked once, before work.

Each thing a user configures declares what it takes in one place, and the checks here
read it from there, so the CLI and the widgets refuse the same values with the same words:

* a model's options are its builder's keyword parameters and their type hints
  (:func:`check_call_options`);
* a prompt protocol's options and a propagation rule set's are dataclass fields with type
  hints (:func:`check_dataclass_options`); their ranges and meanings are checked by the
  class itself when it is built (``__post_init__``), with the option named.

Every refusal is an :class:`~napari_medsam_eval.core.errors.OptionError` naming the option,
what it must be and what it got: unknown keys are listed with the valid ones, booleans
are not numbers, numbers must be finite, a whole number is not 2.5.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import math
import numbers
import re
import types
import typing
from pathlib import PurePath
from typing import Any, Callable, Literal, Union

from .errors import OptionError

#: the values the ``--device`` option / ``device=`` builder argument accepts (here, not beside the device
#: code, so that a form lists them without importing torch)
DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
#: LiteMedSAM's image-encoder engines (the ``engine`` model option; ``--engine``)
ENGINE_CHOICES = ("auto", "torch", "openvino", "onnxruntime")
#: the largest seed: what a results table's integer column (int64) and numpy's generators both hold
MAX_SEED = 2**63 - 1
from .errors import InputError


def _refuse_constant(name: str) -> Any:
    raise InputError(f"{name} is not a number this option takes")


#: the deepest nesting of lists and objects an option's JSON may have (an option is a few flat values)
MAX_JSON_DEPTH = 32
#: how many characters of a refused value a message shows
SHOWN_CHARS = 60
#: what a preset name looks like (``volume``, ``legacy``): a word, not JSON or a path
_PRESET_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")


def shown(text: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(text)`` cut to about ``limit`` characters (``'[[[[...' (30000 characters)``), so that a refused
    value keeps its message on one readable line."""
    text = str(text)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON ``text`` (brackets inside strings not counted): measured without
    parsing, so that text nested deeper than Python's recursion limit is refused by name, not by RecursionError."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def json_object(text: str | None, what: str) -> dict[str, Any]:
    """The JSON object in ``text`` (empty text: ``{}``); :class:`OptionError` naming ``what`` otherwise (nested
    deeper than :data:`MAX_JSON_DEPTH` included)."""
    if text is None or not str(text).strip():
        return {}
    text = str(text)
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise OptionError(f"{what} must be a JSON object of options, e.g. '{{\"margin\": 5}}'; {shown(text)} nests "
                          f"{depth} levels of lists and objects (at most {MAX_JSON_DEPTH} are read)")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as error:
        raise OptionError(f"{what} must be a JSON object, e.g. '{{\"margin\": 5}}' ({error})") from None
    if not isinstance(value, dict):
        raise OptionError(f"{what} must be a JSON object, got {shown(text)}")
    return value


def propagation_value(text: str | None, what: str = "propagation") -> str | dict[str, Any] | None:
    """A preset name as it is (None or empty: the data's default), JSON options as a dict; text that is neither
    (a JSON list, a long or odd text) is an OptionError naming ``what`` with the start of the text."""
    if text is None or not str(text).strip():
        return None
    text = str(text).strip()
    if text.startswith("{"):
        return json_object(text, what)
    if not _PRESET_NAME.fullmatch(text):
        raise OptionError(f"{what} must be a preset name or a JSON object of rule options, got {shown(text)}")
    return text


def plain(value: Any) -> str:
    """A number as people write it (``2``, ``0.5``, ``1e-06``), never ``np.float64(2.0)``;
    sequences as ``a, b, c``; anything else as ``str``."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        return str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:.6g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(v) for v in value)
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # numpy / torch scalars
        return plain(value.item())
    return str(value)


# -- what a type hint accepts -------------------------------------------------------------------------------


def _is_whole(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


def _parts(hint: Any) -> tuple[Any, ...]:
    """The members of a union hint (the hint itself otherwise)."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def accepts(hint: Any, value: Any) -> bool:
    """Whether ``value`` is of the type ``hint`` names (unknown kinds of hint accept anything: the
    option's own code checks those)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    members = _parts(hint)
    if len(members) > 1:
        return any(accepts(member, value) for member in members)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return value is None
    if origin is Literal:
        return value in args
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return _is_whole(value)
    if hint is float:
        return _is_number(value)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type) and issubclass(hint, PurePath):
        return isinstance(value, (str, PurePath))
    if origin in (tuple, list) or hint in (tuple, list):
        return isinstance(value, (list, tuple)) and _items_accepted(origin or hint, args, value)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    return True


def _items_accepted(kind: type, args: tuple[Any, ...], value: Any) -> bool:
    """The items of a list or tuple ``value`` against ``list[X]``, ``tuple[X, ...]`` or ``tuple[A, B]``."""
    if not args:
        return True
    if kind is list or (len(args) == 2 and args[1] is Ellipsis):
        return all(accepts(args[0], item) for item in value)
    return len(value) == len(args) and all(accepts(a, item) for a, item in zip(args, value))


def describe(hint: Any) -> str:
    """What a value of ``hint`` is, in words (``an integer``, ``true or false``, ``one of [...]``)."""
    members = [m for m in _parts(hint) if m is not type(None)]
    words = {bool: "true or false", int: "an integer", float: "a finite number", str: "text"}
    said = []
    for member in members:
        if typing.get_origin(member) is Literal:
            said.append(f"one of {list(typing.get_args(member))}")
        elif member in words:
            said.append(words[member])
        elif isinstance(member, type) and issubclass(member, PurePath):
            said.append("a path")
        elif typing.get_origin(member) in (tuple, list) or member in (tuple, list):
            said.append("a list")
        elif typing.get_origin(member) is dict or member is dict:
            said.append("a JSON object")
        else:
            said.append(getattr(member, "__name__", str(member)))
    text = " or ".join(dict.fromkeys(said))
    return text + (" (or null)" if type(None) in _parts(hint) else "")


def _check(what: str, hints: dict[str, Any], given: dict[str, Any], valid: list[str]) -> None:
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise OptionError(f"{what}: unknown option(s) {unknown}; the options are {sorted(valid)}")
    for name, value in given.items():
        hint = hints.get(name, Any)
        if not accepts(hint, value):
            shown = repr(value) if isinstance(value, str) else plain(value)
            raise OptionError(f"{what}: {name} must be {describe(hint)}, got {shown}")


def check_call_options(func: Callable[..., Any], given: dict[str, Any], what: str,
                       ignore: tuple[str, ...] = ()) -> None:
    """``given`` are keyword arguments ``func`` takes, each of its parameter's type (``ignore``: names
    the caller fills in itself)."""
    signature = inspect.signature(func)
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return  # takes anything: its own code checks
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # noqa: BLE001 - a hint that cannot be resolved here: check names only
        hints = {}
    valid = [name for name, p in signature.parameters.items()
             if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and name not in ignore]
    _check(what, hints, {k: v for k, v in given.items() if k not in ignore}, valid)


def check_dataclass_options(cls: type, given: dict[str, Any], what: str) -> None:
    """``given`` are public fields of dataclass ``cls``, each of its field's type."""
    fields = [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_") and f.init]
    _check(what, typing.get_type_hints(cls), given, fields)


__all__ = ["MAX_JSON_DEPTH", "plain", "accepts", "json_depth", "shown", "check_call_options", "check_dataclass_options", "describe", "json_object",
           "propagation_value"]
