"""How a LangGraph item's namespace and filter are kept in longterm (``integrations.langgraph``).

The seam: ``session(namespace)`` (the session id a namespace is kept under), ``pushed(filter)``
(the part of a LangGraph ``filter`` that means the same as a longterm filter, applied by the
engine before its cut), ``compare``/``operator`` (LangGraph's own meaning of a filter, checked
again on what came back: exact lists, nested objects), ``matches`` (a ``list_namespaces``
condition), ``cosine`` (a vector search's score), ``now`` (the memory's clock).

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
    ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/``$lte`` compare."""
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
    a, b = number(value), number(arg)
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


def pushed(filter_: Mapping[str, Any] | None, base: str = f"{META}.value") -> dict[str, Any]:
    """The part of a LangGraph filter longterm's filters express with the same meaning (the rest
    is checked by ``compare`` after the engine's answer)."""
    out: dict[str, Any] = {}
    for key, wanted in (filter_ or {}).items():
        if not isinstance(key, str) or not key or "." in key or key.startswith("$"):
            continue
        path = f"{base}.{key}"
        if isinstance(wanted, dict):
            if any(k.startswith("$") for k in wanted):
                ops = {
                    op: arg
                    for op, arg in wanted.items()
                    if op in ("$gt", "$gte", "$lt", "$lte")
                    and isinstance(arg, (int, float))
                    and not isinstance(arg, bool)
                    and math.isfinite(arg)
                }
                if ops:
                    out[path] = ops
            else:
                out.update(pushed(wanted, path))
        elif (
            isinstance(wanted, (str, int, float))
            and not isinstance(wanted, bool)
            and (not isinstance(wanted, float) or math.isfinite(wanted))
        ):
            out[path] = wanted
    return out


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
