"""The filter model: one syntax for narrowing a search or a listing, read once, meant the same everywhere.

The seam: ``parse_filter(spec) -> Filter | None`` reads what a caller passes as ``filters=`` (a
dict, MongoDB-style) into a small tree (``Cond``, ``All``, ``Any_``, ``Not``), refusing a
malformed one with an ``InvalidInputError`` naming it; ``matches(filter, record)`` is the
reference evaluation every engine's translation is held to (the contract's hypothesis test
compares them); ``FIELDS`` are the record's own fields a filter may name.

The syntax:

- ``{"topic": "travel"}``: equality; several keys are all required.
- Operators: ``{"n": {"$gt": 3}}`` with ``$eq $ne $in $nin $gt $gte $lt $lte $exists``.
- ``{"$and": [...]}``, ``{"$or": [...]}``, ``{"$not": {...}}``.
- Paths: a key is a metadata key, a dotted path into nested metadata (``"project.phase"``), or
  under ``metadata.`` to be explicit; ``session_id``, ``author``, ``role`` and ``timestamp`` name
  the record's own fields (a bare key that is also a field means the field).
- ``timestamp`` takes seconds since the epoch (milliseconds above 1e11, as an event's time and
  ``before=`` read them), an aware ``datetime`` or an ISO 8601 string.

The semantics:

- A missing key (or a path through a non-object) matches ``$ne``, ``$nin``, ``$not`` and
  ``$exists: false``, and nothing else (as MongoDB and LangGraph's stores do).
- Numbers compare as numbers (1 == 1.0); booleans are not numbers (True != 1); strings compare
  exactly (no case folding, no Unicode normalisation); ``None`` equals only ``None``. Values of
  different kinds are never equal, and never ordered: ``{"n": {"$gt": 1}}`` leaves out ``"n": "2"``.
- A list value matches ``$eq`` and ``$in`` when it holds the value (an element equal to it);
  ``$ne`` and ``$nin`` are their negations. Ranges compare scalars only (a list never passes).
- Operands are JSON scalars (strings, numbers, booleans, None) or, for ``$in``/``$nin``, a list
  of them; a number operand is finite. Metadata itself is JSON with no NaN (``sessions.metadata``).

Why a tree read once: the four engines translate the same tree (SQL, RediSearch, an OpenSearch
bool query, a Qdrant filter), so a filter cannot mean one thing on one engine and another
elsewhere; a filter an engine cannot express is refused there by name, never applied after its
top-k cut.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InvalidInputError
from ..records import MemoryRecord

#: The record's own fields a filter may name (a bare key that is one of them means the field).
FIELDS = ("session_id", "author", "role", "timestamp")
#: Comparison operators.
OPS = ("$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists")
Op = Literal["$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists"]
#: A JSON scalar a filter compares with.
Scalar = str | int | float | bool | None
#: How deep ``$and``/``$or``/``$not`` may nest (a guard against a filter that is a stack overflow).
MAX_DEPTH = 32
#: A ``timestamp`` above this is milliseconds, as ``sessions.parse_timestamp`` reads an event's time.
MILLISECONDS = 1e11
#: Conditions one filter may hold.
MAX_CONDITIONS = 256


@dataclass(frozen=True)
class Cond:
    """One comparison: ``path`` (a record field, or metadata keys) ``op`` ``value``."""

    field: str | None
    """A record field of ``FIELDS``, or None: ``path`` is into metadata."""
    path: tuple[str, ...]
    op: Op
    value: Any


@dataclass(frozen=True)
class All:
    parts: tuple[Filter, ...]


@dataclass(frozen=True)
class Any_:
    parts: tuple[Filter, ...]


@dataclass(frozen=True)
class Not:
    part: Filter


Filter = Cond | All | Any_ | Not


def _bad(where: str, why: str) -> InvalidInputError:
    return InvalidInputError(f"filters{where}: {why} (the syntax: longterm.core.filters).")


def _scalar(value: Any, where: str, field: str | None) -> Scalar:
    if field == "timestamp":
        if isinstance(value, bool) or value is None:
            raise _bad(where, f"a timestamp is seconds, an aware datetime or ISO 8601, not {value!r}")
        if isinstance(value, (int, float)):
            try:
                seconds = float(value)
            except OverflowError:  # an int past any float is past any time too
                raise _bad(where, "a timestamp this large is no time") from None
            if not math.isfinite(seconds):
                raise _bad(where, f"{value!r} is not a finite number")
            return value / 1000 if value > MILLISECONDS else value  # as an event's time and ``before=`` read it
        from ..sessions import parse_timestamp

        try:
            return parse_timestamp(value)
        except InvalidInputError as exc:
            raise _bad(where, f"a timestamp is seconds, an aware datetime or ISO 8601 ({exc})") from None
    if field == "session_id" and isinstance(value, str):
        return unicodedata.normalize("NFC", value)  # session ids are kept in NFC (records.name_id)
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise _bad(where, f"{value!r} is not a finite number")
        return value
    raise _bad(where, f"compares with a string, a number, a boolean or None, not {type(value).__name__}")


def _cond(key: str, spec: Any, where: str, count: list[int]) -> Filter:
    if not key or key.startswith("$"):
        raise _bad(where, f"unknown operator {key!r}; operators: $and, $or, $not, and under a key {', '.join(OPS)}")
    if key.startswith("metadata."):
        field, path = None, tuple(key[len("metadata.") :].split("."))
    elif key in FIELDS:
        field, path = key, (key,)
    else:
        field, path = None, tuple(key.split("."))
    if any(not p for p in path):
        raise _bad(where, f"the path {key!r} has an empty step")
    ops = (
        spec
        if isinstance(spec, Mapping) and spec and all(isinstance(k, str) and k.startswith("$") for k in spec)
        else None
    )
    if ops is None:
        if isinstance(spec, Mapping):
            raise _bad(where, f"{key!r} is compared with an object; use dotted paths or operators ($eq, $in, ...)")
        if isinstance(spec, (list, tuple)):
            raise _bad(where, f"{key!r} is compared with a list; use {{'$in': [...]}}")
        count[0] += 1
        return Cond(field, path, "$eq", _scalar(spec, where, field))
    conds: list[Filter] = []
    for op, operand in ops.items():
        at = f"{where}[{op!r}]"
        count[0] += 1
        if op not in OPS:
            raise _bad(at, f"unknown operator {op!r}; under a key: {', '.join(OPS)}")
        if op == "$exists":
            if not isinstance(operand, bool):
                raise _bad(at, f"$exists takes true or false, not {operand!r}")
            conds.append(Cond(field, path, "$exists", operand))
        elif op in ("$in", "$nin"):
            if not isinstance(operand, (list, tuple)):
                raise _bad(at, f"{op} takes a list, not {type(operand).__name__}")
            values = tuple(_scalar(v, f"{at}[{i}]", field) for i, v in enumerate(operand))
            conds.append(Cond(field, path, op, values))
        else:
            value = _scalar(operand, at, field)
            if op in ("$gt", "$gte", "$lt", "$lte") and (value is None or isinstance(value, bool)):
                raise _bad(at, f"{op} compares numbers or strings, not {value!r}")
            conds.append(Cond(field, path, op, value))
    return conds[0] if len(conds) == 1 else All(tuple(conds))


def _read(spec: Any, where: str, depth: int, count: list[int]) -> Filter:
    if depth > MAX_DEPTH:
        raise _bad(where, f"nests deeper than {MAX_DEPTH} levels")
    if not isinstance(spec, Mapping) or not spec:
        raise _bad(where, f"must be a non-empty object, got {type(spec).__name__ if spec != {} else 'an empty one'}")
    parts: list[Filter] = []
    for key, value in spec.items():
        if not isinstance(key, str):
            raise _bad(where, f"keys are strings, got {key!r}")
        at = f"{where}[{key!r}]"
        if key in ("$and", "$or"):
            if not isinstance(value, (list, tuple)) or not value:
                raise _bad(at, f"{key} takes a non-empty list of filters")
            inner = tuple(_read(v, f"{at}[{i}]", depth + 1, count) for i, v in enumerate(value))
            parts.append(All(inner) if key == "$and" else Any_(inner))
        elif key == "$not":
            parts.append(Not(_read(value, at, depth + 1, count)))
        else:
            parts.append(_cond(key, value, at, count))
        if count[0] > MAX_CONDITIONS:
            raise _bad(where, f"holds more than {MAX_CONDITIONS} conditions")
    return parts[0] if len(parts) == 1 else All(tuple(parts))


def parse_filter(spec: Any) -> Filter | None:
    """The filter ``spec`` names (module docstring); None for None or ``{}`` (no filter)."""
    if spec is None or (isinstance(spec, Mapping) and not spec):
        return None
    return _read(spec, "", 0, [0])


# -- the reference evaluation ----------------------------------------------------------------

_MISSING = object()


def value_at(record: MemoryRecord, cond: Cond) -> Any:
    """What ``cond`` compares in ``record`` (``_MISSING`` where the path leads nowhere)."""
    if cond.field is not None:
        return getattr(record, cond.field)
    node: Any = record.metadata
    for step in cond.path:
        if not isinstance(node, Mapping) or step not in node:
            return _MISSING
        node = node[step]
    return node


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if v is None:
        return "null"
    if isinstance(v, str):
        return "string"
    return "other"


def same(a: Any, b: Scalar) -> bool:
    """JSON equality of a stored scalar and an operand: kinds first (True is not 1), then value."""
    return _kind(a) == _kind(b) and _kind(a) != "other" and a == b


def _holds(v: Any, operand: Scalar) -> bool:
    if isinstance(v, list):
        return any(same(x, operand) for x in v)
    return same(v, operand)


def _order(v: Any, op: str, operand: Scalar) -> bool:
    kind = _kind(v)
    if kind not in ("number", "string") or kind != _kind(operand):
        return False
    if op == "$gt":
        return bool(v > operand)
    if op == "$gte":
        return bool(v >= operand)
    if op == "$lt":
        return bool(v < operand)
    return bool(v <= operand)


def _cond_matches(cond: Cond, record: MemoryRecord) -> bool:
    v = value_at(record, cond)
    op = cond.op
    if op == "$exists":
        return (v is not _MISSING) is cond.value
    if v is _MISSING:
        return op in ("$ne", "$nin")
    if op == "$eq":
        return _holds(v, cond.value)
    if op == "$ne":
        return not _holds(v, cond.value)
    if op == "$in":
        return any(_holds(v, x) for x in cond.value)
    if op == "$nin":
        return not any(_holds(v, x) for x in cond.value)
    return _order(v, op, cond.value)


def matches(f: Filter | None, record: MemoryRecord) -> bool:
    """Whether ``record`` passes ``f`` (None passes everything): the reference every engine keeps."""
    if f is None:
        return True
    if isinstance(f, Cond):
        return _cond_matches(f, record)
    if isinstance(f, All):
        return all(matches(p, record) for p in f.parts)
    if isinstance(f, Any_):
        return any(matches(p, record) for p in f.parts)
    return not matches(f.part, record)


def conditions(f: Filter) -> Sequence[Cond]:
    """Every comparison in ``f``, in order (an engine checks what it can express)."""
    if isinstance(f, Cond):
        return [f]
    if isinstance(f, Not):
        return conditions(f.part)
    return [c for p in f.parts for c in conditions(p)]


__all__ = [
    "FIELDS",
    "MAX_CONDITIONS",
    "MAX_DEPTH",
    "OPS",
    "All",
    "Any_",
    "Cond",
    "Filter",
    "Not",
    "conditions",
    "matches",
    "parse_filter",
    "same",
    "value_at",
]
