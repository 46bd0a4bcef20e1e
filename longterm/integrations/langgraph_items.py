"""How a LangGraph item's namespace and filter are kept in longterm (``integrations.langgraph``).

The seam: ``session(namespace)`` (the session id a namespace is kept under), ``where(prefix,
filter)`` (the longterm filter the engine applies before its cut: the prefix, and what of a
LangGraph ``filter`` longterm's filters express, so that every item LangGraph's meaning admits
passes it), ``admits`` with ``compare``/``operator`` (LangGraph's own meaning of a filter,
checked again on what came back: exact lists, nested objects, ``True == 1``), ``vector_page``
(a vector search's page, a negative offset as LangGraph reads it), ``matches`` (a
``list_namespaces`` condition), ``cosine`` (a vector search's score), ``now`` (the memory's clock).

Why apart: one job (the translation between the two models), and the store stays a size one
can read.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import MatchCondition

from ..memory.facade import LongTermMemory
from ..records import MAX_ID_CHARS

#: The metadata key an item's value, namespace and times are kept under.
META = "lg"


def now(memory: LongTermMemory) -> datetime:
    return datetime.fromtimestamp(memory.clock_now(), tz=timezone.utc)


def session(namespace: Sequence[str]) -> str:
    """The session of a namespace: its JSON (in NFC, the form longterm keeps ids in), or a digest
    of it when that is longer than an id may be."""
    text = unicodedata.normalize("NFC", json.dumps(list(namespace), ensure_ascii=False))
    if len(text) > MAX_ID_CHARS:
        return "lg-sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text


def compare(value: Any, wanted: Any) -> bool:
    """LangGraph's filter meaning (its InMemoryStore's): objects nest, lists are equal whole,
    ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/``$lte`` compare (ranges: a value that is a number)."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(operator(value, op, arg) for op, arg in wanted.items())
        if not isinstance(value, dict):
            return False
        return all(compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(compare(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float, str)):
        return None
    try:
        return float(x)
    except ValueError:
        return None


def operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    a, b = None if isinstance(value, str) else number(value), number(arg)  # ranges compare numbers (docs: Limits)
    if a is None or b is None:
        return False
    if op == "$gt":
        return a > b
    if op == "$gte":
        return a >= b
    if op == "$lt":
        return a < b
    if op == "$lte":
        return a <= b
    raise ValueError(f"Unsupported operator: {op}")


#: The most clauses ``where`` hands the engine (longterm refuses a filter of over 256 conditions).
MAX_CLAUSES = 64
#: How deep ``where`` follows a nested object of a filter.
MAX_NESTING = 8
#: Numbers pushed to the engine stay below this (exact as floats, and within every engine's integers).
_EXACT = 2**53


def _equals(w: Any) -> list[Any] | None:
    """The JSON scalars Python's ``==`` finds equal to ``w`` (``True == 1 == 1.0``); None: ``w``
    is no scalar the engine compares."""
    if isinstance(w, bool):
        return [w, int(w)]
    if isinstance(w, str) or w is None:
        return [w]
    if isinstance(w, (int, float)) and math.isfinite(w) and abs(w) < _EXACT:
        return [w, *([bool(w)] if w in (0, 1) else [])]
    return None


def _is(path: str, values: list[Any]) -> dict[str, Any]:
    return {path: values[0]} if len(values) == 1 else {path: {"$in": values}}


def _clauses(wanted: Mapping[str, Any], base: str, depth: int) -> list[dict[str, Any]]:
    """``where``'s clauses for a LangGraph filter object whose keys are under ``base``."""
    out: list[dict[str, Any]] = []
    for key, w in wanted.items():
        if isinstance(key, str) and key and "." not in key and not key.startswith("$"):
            out += _equal(f"{base}.{key}", w, depth)
    return out


def _equal(path: str, w: Any, depth: int) -> list[dict[str, Any]]:
    """Clauses that every value ``compare(value, w)`` admits passes."""
    if isinstance(w, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in w):
            return [c for op, arg in w.items() for c in _operator(path, op, arg, depth)]
        return [{path: {"$exists": True}}, *(_clauses(w, path, depth + 1) if depth < MAX_NESTING else [])]
    if isinstance(w, (list, tuple)):  # a list equal whole holds each of its scalars
        held = [e for e in (_equals(x) for x in w) if e is not None]
        return [{path: {"$exists": True}}, *(_is(path, e) for e in held)]
    if w is None:  # LangGraph reads a missing key as None
        return [{"$or": [{path: None}, {path: {"$exists": False}}]}]
    values = _equals(w)
    return [] if values is None else [_is(path, values)]


def _operator(path: str, op: Any, arg: Any, depth: int) -> list[dict[str, Any]]:
    if op == "$eq":
        return [{path: {"$exists": True}}] if isinstance(arg, dict) else _equal(path, arg, depth)
    if op == "$ne":
        if arg is None:
            return [{path: {"$exists": True}}]
        values = _equals(arg)
        if values is None:
            return []
        x = int(arg) if isinstance(arg, bool) else arg  # not that scalar (a list holding it is not it)
        return [{"$not": {path: {"$gte": x, "$lte": x}}}]
    numeric = isinstance(arg, (int, float)) and not isinstance(arg, bool) and _equals(arg) is not None
    if op in ("$gt", "$gte", "$lt", "$lte") and numeric:
        return [{path: {op: arg}}]  # ranges compare numbers (docs: Limits)
    return []


def where(prefix: Sequence[str], filter_: Mapping[str, Any] | None) -> dict[str, Any]:
    """The longterm filter the engine applies before its cut: the namespace ``prefix``, and what
    of a LangGraph ``filter_`` longterm's filters express. Every item LangGraph's meaning admits
    passes it (it may let more through: ``admits`` checks the whole filter after)."""
    clauses: list[dict[str, Any]] = [{f"{META}.ns_{i}": label} for i, label in enumerate(prefix) if label != "*"]
    if not clauses:  # the store's items only, not the user's other memories
        clauses.append({f"{META}.key": {"$exists": True}})
    clauses += _clauses(filter_ or {}, f"{META}.value", 0)
    unique = list({json.dumps(c, sort_keys=True): c for c in clauses}.values())[:MAX_CLAUSES]
    return unique[0] if len(unique) == 1 else {"$and": unique}


def admits(meta: Mapping[str, Any], prefix: Sequence[str], filter_: Mapping[str, Any] | None) -> bool:
    """Whether the metadata ``meta`` is an item under ``prefix`` that passes ``filter_`` with
    LangGraph's meaning."""
    lg = meta.get(META)
    if not isinstance(lg, dict) or not isinstance(lg.get("ns"), list) or not isinstance(lg.get("value"), dict):
        return False
    if tuple(lg["ns"])[: len(prefix)] != tuple(prefix):
        return False
    return not filter_ or all(compare(lg["value"].get(k), v) for k, v in filter_.items())


def vector_page(scored: list[Any], scoreless: list[Any], offset: int, limit: int) -> list[Any]:
    """A page of a vector search: the scored items then the scoreless ones, ``[offset:offset +
    limit]``; a negative offset or limit as LangGraph's InMemoryStore reads it (the scored ones
    from ``max(offset, 0)`` to ``offset + limit``, then scoreless ones up to ``limit``)."""
    if offset >= 0 and limit >= 0:
        return [*scored, *scoreless][offset : offset + limit]
    kept = scored[max(offset, 0) : max(offset + limit, 0)]
    if scoreless and len(kept) < limit:
        kept += scoreless[: limit - len(kept)]
    return kept


def matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or n == p for n, p in pairs)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na > 0 and nb > 0 else 0.0
