"""One mapping between a record (a dataclass) and its JSON object, read from its type hints.

`encode(record)` is the object the record writes; `decode(cls, data, strict)` reads one back:
strictly (the store: a missing, unknown or wrongly typed field is a `LeaderboardError` naming
it) or leniently (the site: what cannot be read falls back, see `Slot.fallback`). A field's
options (`on_disk`): its key on disk, dotted for a path, and whether a None is left out.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import MISSING, dataclass
from enum import Enum
from functools import cache
from typing import Any, TypeVar

from evaluator.errors import LeaderboardError

R = TypeVar("R")
OPTIONS = "json"  # the key of a field's options in its dataclass metadata
LOOSE = {str: str, int: lambda _: 0, float: lambda _: 0.0, bool: lambda _: False,
         dict: lambda _: {}}  # a lenient reader's value for a required field it cannot read


@dataclass(frozen=True)
class Options:
    key: str | None = None  # the JSON key, dotted for a path ("gates.passed"); default: the name
    omit_none: bool = False  # leave the key out when the value is None


def on_disk(key: str | None = None, omit_none: bool = False) -> dict[str, Options]:
    """A field's JSON options, as its metadata: `field(default=None, metadata=on_disk(...))`."""
    return {OPTIONS: Options(key, omit_none)}


@dataclass(frozen=True)
class Slot:
    """One field as the codec sees it."""

    name: str
    dotted: str  # its key on disk, dotted when it is a path
    path: tuple[str, ...]
    kind: Any  # the type, None stripped
    optional: bool
    default: Any  # MISSING when the field has none
    omit_none: bool

    def fallback(self, value: Any) -> Any:
        if self.optional:
            return None
        if self.default is not MISSING:
            return self.default()
        base = _origin(self.kind)
        loose = LOOSE.get(str if _is_enum(base) else base)
        return None if loose is None else loose(value)


def _origin(kind: Any) -> Any:
    return typing.get_origin(kind) or kind


def _is_enum(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, Enum)


def _strip_none(kind: Any) -> tuple[Any, bool]:
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(args) == 1:
            return args[0], len(args) < len(typing.get_args(kind))
    return kind, False


@cache
def slots(cls: type) -> tuple[Slot, ...]:
    hints = typing.get_type_hints(cls)
    found = []
    for f in dataclasses.fields(cls):
        options = f.metadata.get(OPTIONS, Options())
        kind, optional = _strip_none(hints[f.name])
        default = (MISSING if f.default is MISSING and f.default_factory is MISSING
                   else f.default_factory if f.default is MISSING else (lambda v=f.default: v))
        key = options.key or f.name
        found.append(Slot(f.name, key, tuple(key.split(".")), kind, optional, default,
                          options.omit_none))
    return tuple(found)


# ---------------------------------------------------------------- encode

def encode(record: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON object of a record (fields named in `skip` left out)."""
    out: dict[str, Any] = {}
    for slot in slots(type(record)):
        value = getattr(record, slot.name)
        if slot.name in skip or (value is None and slot.omit_none):
            continue
        *parents, last = slot.path
        target = out
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = _write(value)
    return out


def _write(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_write(v) for v in value]
    if isinstance(value, dict):
        return {k: _write(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------- decode

class _Wrong(Exception):
    """A value that is not of its field's type (turned into a LeaderboardError or a fallback)."""


def decode(cls: type[R], data: Any, strict: bool = True, where: str = "") -> R:
    """The record of class `cls` that `data` holds (see the module docstring)."""
    if not isinstance(data, dict):
        raise LeaderboardError(f"{where or cls.__name__} should be a JSON object, not "
                               f"{type(data).__name__}")
    if strict:
        _refuse_unknown(cls, data, where)
    values = {}
    for slot in slots(cls):
        if len(slot.path) == 1:
            present, value = slot.path[0] in data, data.get(slot.path[0])
        else:
            present, value = _lookup(data, slot.path)
        if not present and slot.default is not MISSING:
            values[slot.name] = slot.default()
        elif strict and not present:
            raise LeaderboardError(f"{_at(where, slot.dotted)} is missing")
        elif value is None and slot.optional:
            values[slot.name] = None
        else:
            try:
                values[slot.name] = _read(slot.kind, value, strict, where, slot.dotted)
            except _Wrong as exc:
                if strict:
                    raise LeaderboardError(f"{_at(where, slot.dotted)} {exc}") from None
                values[slot.name] = slot.fallback(value)
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise LeaderboardError(f"{where or cls.__name__}: {exc}") from exc


@cache
def _keys(cls: type) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """The top-level keys a record reads (or skips), and the keys inside each dotted one."""
    inner: dict[str, set[str]] = {}
    for slot in slots(cls):
        if len(slot.path) > 1:
            inner.setdefault(slot.path[0], set()).add(slot.path[1])
    top = {slot.path[0] for slot in slots(cls)} | set(getattr(cls, "JSON_IGNORED", ()))
    return frozenset(top), {root: frozenset(keys) for root, keys in inner.items()}


def _refuse_unknown(cls: type, data: dict, where: str) -> None:
    """A key the record does not have, at the top or inside an object its dotted keys reach."""
    known, inner = _keys(cls)
    unknown = sorted(str(k) for k in data if k not in known)
    for root, keys in inner.items():
        if root in data and not isinstance(data[root], dict):
            raise LeaderboardError(f"{_at(where, root)} should be a JSON object")
        unknown += sorted(f"{root}.{k}" for k in data.get(root, {}) if k not in keys)
    if unknown:
        raise LeaderboardError(f"{_at(where, unknown[0])} is not a field of {cls.__name__}")


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _lookup(data: dict, path: tuple[str, ...]) -> tuple[bool, Any]:
    """(whether the key path is there, its value); a step that is not an object is absent."""
    for part in path[:-1]:
        data = data.get(part)
        if not isinstance(data, dict):
            return False, None
    return path[-1] in data, data.get(path[-1])


def _read(kind: Any, value: Any, strict: bool, where: str, key: str) -> Any:
    """`value` as `kind`; `where` and `key` name it (joined only when an error needs it)."""
    if kind is Any or (type(value) is kind and kind is not float):  # the common case first
        return value
    base, args = _origin(kind), typing.get_args(kind)
    if base in (bool, int, str):  # not a bool for an int; any str (an outcome too) for a str
        if not (isinstance(value, str) if base is str else type(value) is base):
            raise _Wrong(f"should be {base.__name__}, not {_shown(value)}")
        return value
    if base is float:
        if type(value) not in (int, float) or not math.isfinite(value):
            raise _Wrong(f"should be a finite number, not {_shown(value)}")
        return float(value)
    if _is_enum(base):
        try:
            return base(value)
        except ValueError:
            raise _Wrong(f"should be one of {', '.join(m.value for m in base)}, not "
                         f"{_shown(value)}") from None
    if base is tuple and len(args) == 2 and args[1] is Ellipsis:
        if not isinstance(value, (list, tuple)):
            raise _Wrong(f"should be a list, not {_shown(value)}")
        return tuple(_read(args[0], v, strict, where, key) for v in value)
    if base is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise _Wrong(f"should be a list of {len(args)}, not {_shown(value)}")
        return tuple(_read(a, v, strict, where, key) for a, v in zip(args, value, strict=True))
    if base is dict:
        if not isinstance(value, dict):
            raise _Wrong(f"should be an object, not {_shown(value)}")
        return _read_dict(args[1] if args else Any, value, strict, _at(where, key))
    if dataclasses.is_dataclass(base):
        return _read_record(base, value, strict, _at(where, key))
    raise TypeError(f"the codec cannot read {kind!r}")


def _read_dict(kind: Any, value: dict, strict: bool, where: str) -> dict:
    out = {}
    for key, item in value.items():
        try:
            out[str(key)] = _read(kind, item, strict, where, str(key))
        except _Wrong as exc:
            if strict:
                raise LeaderboardError(f"{where}.{key} {exc}") from None
            # lenient: an entry that cannot be read is left out
    return out


def _read_record(cls: type, value: Any, strict: bool, where: str) -> Any:
    """A nested record: strictly, every error names its field; leniently, whole or not at all."""
    if strict:
        return decode(cls, value, True, where)
    if not isinstance(value, dict):
        raise _Wrong("is not an object")
    known = {k: v for k, v in value.items() if k in _keys(cls)[0]}
    try:
        return decode(cls, known, True, where)
    except LeaderboardError as exc:
        raise _Wrong(str(exc)) from None


def _shown(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r:.40}"


class Record:
    """A dataclass this codec reads and writes: `to_dict`, and `from_dict`, strict unless a
    caller with a reason asks otherwise (the site reads leniently)."""

    def to_dict(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def from_dict(cls: type[R], data: Any, strict: bool = True, where: str = "") -> R:
        return decode(cls, data, strict, where)
