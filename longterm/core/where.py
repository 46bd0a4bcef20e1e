"""A filter as engines apply it: tokens and a time range they index, and the rest checked before the cut.

The seam: ``where_of(spec) -> Where | None`` reads ``filters=`` (``core.filters``) and compiles
it once into ``Where``: ``native``, a small boolean tree an engine translates into its own query
(``Has``: the record carries one of these tokens; ``Span``: its ``timestamp`` in a range;
``And``, ``Or``, ``Neg``), and ``exact``, whether that tree is the whole filter. An engine that
indexes ``record_tokens(record)`` (one keyword per metadata value and per path present, and per
``session_id``, ``author``, ``role``) answers every equality, ``$in``, ``$nin``, ``$ne`` and
``$exists``, and ``timestamp`` in any way, exactly; a range over a metadata value is the one thing
the tree only narrows to "the path is there" (``exact`` is then False), and the core checks
``Where.admits`` on what the engine returned and reads deeper (``deeper``) until the ``k`` asked
for have passed or the scope is exhausted. Either way the cut at ``top_k`` comes after the filter.

Why tokens: RediSearch and OpenSearch need every field declared, and a metadata key holding a
string in one memory and a number in the next would conflict in a typed field; a token is
``sha256(["m", path..., kind, value])`` cut to 20 hex characters (kind: ``s`` string, ``n`` number
written canonically so 1 and 1.0 are one token, ``b`` boolean, ``z`` null, ``?`` the path is
there), one keyword field holds them all, and no id or value ever enters a query's syntax.
What it costs: one token per scalar (a list: per element) and one per path, 21 bytes each.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..records import MemoryRecord
from .filters import FIELDS, All, Any_, Cond, Filter, Not, matches, parse_filter

T = TypeVar("T")

#: The record fields kept as tokens (``timestamp`` is a number every engine indexes: ``Span``).
TOKEN_FIELDS = tuple(f for f in FIELDS if f != "timestamp")
#: Hex characters of a token (80 bits: no two of a store's tokens meet).
TOKEN_LEN = 20
#: How far ``deeper`` reads at most (engines cap a page: OpenSearch's window is 10,000).
DEEPEST = 10_000


@dataclass(frozen=True)
class Has:
    """The record carries at least one of ``tokens`` (none: matches nothing)."""

    tokens: tuple[str, ...]


@dataclass(frozen=True)
class Span:
    """The record's ``field`` (``timestamp``, or ``expires_at``: ``alive``) within [lo, hi] (an end
    None is open; ``*_incl`` whether it is kept). A record without the field is not in any span."""

    lo: float | None
    hi: float | None
    lo_incl: bool = True
    hi_incl: bool = True
    field: str = "timestamp"


@dataclass(frozen=True)
class And:
    parts: tuple[Node, ...]
    """All of them (none: everything)."""


@dataclass(frozen=True)
class Or:
    parts: tuple[Node, ...]
    """At least one (none: nothing)."""


@dataclass(frozen=True)
class Neg:
    part: Node


Node = Has | Span | And | Or | Neg
EVERYTHING: Node = And(())
NOTHING: Node = Or(())


@dataclass(frozen=True)
class Where:
    """A compiled filter (module docstring), and the moment a read is made at (``alive_at``)."""

    filter: Filter | None
    """The caller's filter (None: none, only ``alive_at``)."""
    native: Node
    """What an engine applies in its query (``alive(alive_at)`` included)."""
    exact: bool
    """``native`` is the whole filter: what the engine returns needs no second look."""
    alive_at: float | None = None
    """Leave out records whose ``expires_at`` is at or before this moment (None: keep them)."""
    narrowing: Node | None = None
    """``native`` without ``alive(alive_at)``, as ``living`` made it (None: not made so): what the
    tree passes of a store where no record expires (an engine that knows it holds none asks that)."""

    @property
    def unexpired(self) -> Node:
        """``narrowing`` where ``living`` made it, else ``native`` whole."""
        return self.native if self.narrowing is None else self.narrowing

    def admits(self, record: MemoryRecord) -> bool:
        """Whether ``record`` passes the filter (``core.filters.matches``, the reference) and is alive."""
        if self.alive_at is not None and record.expires_at is not None and record.expires_at <= self.alive_at:
            return False
        return matches(self.filter, record)


def where_of(spec: Any) -> Where | None:
    """``filters=`` as engines apply it; None for no filter (None or ``{}``). A malformed one raises
    ``InvalidInputError`` naming what is wrong (``core.filters.parse_filter``)."""
    if isinstance(spec, Where):
        return spec
    f = parse_filter(spec)
    return None if f is None else compiled(f)


def compiled(f: Filter) -> Where:
    """A filter tree (``core.filters``) as engines apply it."""
    return Where(f, _tree(f, wide=True), _exact(f))


def living(where: Where | None, now: float) -> Where:
    """``where`` (None: no filter) read at ``now``: what expired by then is left out too, by the
    engine (``alive(now)`` in ``native``) before its cut, as the rest of the filter."""
    if where is None:
        return Where(None, alive(now), True, now, EVERYTHING)
    return Where(where.filter, _and([where.native, alive(now)]), where.exact, now, where.native)


def alive(now: float) -> Node:
    """A record with no ``expires_at``, or one after ``now``."""
    return Or((Neg(Has((EXPIRES,))), Span(now, None, lo_incl=False, field="expires_at")))


# -- tokens ------------------------------------------------------------------------------------


def _number(v: int | float) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v) if isinstance(v, int) else repr(v)


def _value(v: Any) -> tuple[str, str] | None:
    """(kind, canonical text) of a scalar; None for what no operand can equal (an object)."""
    if isinstance(v, bool):
        return ("b", "1" if v else "0")
    if isinstance(v, (int, float)):
        return ("n", _number(v))
    if v is None:
        return ("z", "")
    if isinstance(v, str):
        return ("s", v)
    return None


def token(where: Sequence[str], kind: str, text: str) -> str:
    """The token of ``where`` (``("m", *path)`` or ``("f", field)``) holding ``kind``/``text``."""
    raw = json.dumps([*where, kind, text], ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:TOKEN_LEN]


#: The token of every record that expires (``alive``: those without it never do), made as every
#: token is: the field ``expires_at`` is there.
EXPIRES = token(("f", "expires_at"), "?", "")


def _value_token(where: Sequence[str], v: Any) -> str | None:
    kt = _value(v)
    return None if kt is None else token(where, *kt)


def _walk(node: Mapping[str, Any], path: tuple[str, ...]) -> Iterator[str]:
    for key, v in node.items():
        at = (*path, str(key))
        yield token(("m", *at), "?", "")
        if isinstance(v, Mapping):
            yield from _walk(v, at)
        elif isinstance(v, list):
            for x in v:
                t = _value_token(("m", *at), x)
                if t is not None:
                    yield t
        else:
            t = _value_token(("m", *at), v)
            if t is not None:
                yield t


def record_tokens(record: MemoryRecord) -> list[str]:
    """What an engine indexes of ``record`` for filters (each once, in a stable order): its
    fields', its metadata's, and ``EXPIRES`` when it expires."""
    out = [token(("f", f), *(_value(getattr(record, f)) or ("z", ""))) for f in TOKEN_FIELDS]
    out.extend(_walk(record.metadata or {}, ()))
    if record.expires_at is not None:
        out.append(EXPIRES)
    return list(dict.fromkeys(out))


# -- the tree ------------------------------------------------------------------------------------

_RANGES = ("$gt", "$gte", "$lt", "$lte")


def _and(parts: Sequence[Node]) -> Node:
    kept = [p for p in parts if p != EVERYTHING]
    if any(p == NOTHING for p in kept):
        return NOTHING
    return kept[0] if len(kept) == 1 else And(tuple(kept))


def _or(parts: Sequence[Node]) -> Node:
    kept = [p for p in parts if p != NOTHING]
    if any(p == EVERYTHING for p in kept):
        return EVERYTHING
    return kept[0] if len(kept) == 1 else Or(tuple(kept))


def _neg(part: Node) -> Node:
    if part == EVERYTHING:
        return NOTHING
    if part == NOTHING:
        return EVERYTHING
    return part.part if isinstance(part, Neg) else Neg(part)


def _has(where: Sequence[str], values: Sequence[Any]) -> Node:
    tokens = tuple(dict.fromkeys(t for v in values if (t := _value_token(where, v)) is not None))
    return Has(tokens) if tokens else NOTHING


def _time(cond: Cond) -> Node:
    op, v = cond.op, cond.value
    if op == "$exists":
        return EVERYTHING if v else NOTHING
    if op in ("$eq", "$ne", "$in", "$nin"):
        values = v if op in ("$in", "$nin") else (v,)
        spans = _or([Span(float(x), float(x)) for x in values])
        return _neg(spans) if op in ("$ne", "$nin") else spans
    lo, hi = (float(v), None) if op in ("$gt", "$gte") else (None, float(v))
    return Span(lo, hi, lo_incl=op == "$gte", hi_incl=op == "$lte")


def _cond(cond: Cond, wide: bool) -> Node:
    if cond.field == "timestamp":
        return _time(cond)
    where = ("f", cond.field) if cond.field is not None else ("m", *cond.path)
    op, v = cond.op, cond.value
    if op == "$exists":
        there = EVERYTHING if cond.field is not None else Has((token(where, "?", ""),))
        return there if v else _neg(there)
    if op in _RANGES:  # not in the tree: "the path is there" when widening, nothing when narrowing
        if not wide:
            return NOTHING
        return EVERYTHING if cond.field is not None else Has((token(where, "?", ""),))
    has = _has(where, v if op in ("$in", "$nin") else (v,))
    return _neg(has) if op in ("$ne", "$nin") else has


def _tree(f: Filter, wide: bool) -> Node:
    """``wide``: a tree passing at least what ``f`` passes; else at most (they differ only on ranges)."""
    if isinstance(f, Cond):
        return _cond(f, wide)
    if isinstance(f, All):
        return _and([_tree(p, wide) for p in f.parts])
    if isinstance(f, Any_):
        return _or([_tree(p, wide) for p in f.parts])
    return _neg(_tree(f.part, not wide))


def _exact(f: Filter) -> bool:
    if isinstance(f, Cond):
        return f.field == "timestamp" or f.op not in _RANGES
    if isinstance(f, Not):
        return _exact(f.part)
    return all(_exact(p) for p in f.parts)


def holds(node: Node, tokens: frozenset[str] | set[str], timestamp: float, expires_at: float | None = None) -> bool:
    """``node`` evaluated over a record's tokens, timestamp and expiry: what an engine's
    translation must answer (the unit tests hold the tree to ``matches`` through it)."""
    if isinstance(node, Has):
        return any(t in tokens for t in node.tokens)
    if isinstance(node, Span):
        v = timestamp if node.field == "timestamp" else expires_at
        if v is None:
            return False
        lo_ok = node.lo is None or (v >= node.lo if node.lo_incl else v > node.lo)
        hi_ok = node.hi is None or (v <= node.hi if node.hi_incl else v < node.hi)
        return lo_ok and hi_ok
    if isinstance(node, And):
        return all(holds(p, tokens, timestamp, expires_at) for p in node.parts)
    if isinstance(node, Or):
        return any(holds(p, tokens, timestamp, expires_at) for p in node.parts)
    return not holds(node.part, tokens, timestamp, expires_at)


def takes_where(fn: Callable[..., object]) -> bool:
    """Whether ``fn`` (a primitive, a backend's method, or a hook with ``target()``) takes ``where=``:
    one written before filters does not, and is then asked without it and checked here."""
    return takes(fn, "where")


def takes(fn: Callable[..., object], name: str) -> bool:
    """Whether ``fn`` (as ``takes_where`` reads it) takes the keyword ``name``: a primitive written
    before that argument existed does not."""
    target = getattr(fn, "target", None)
    fn = target() if callable(target) else fn
    return _takes(getattr(fn, "__func__", fn), name)


@functools.lru_cache(maxsize=256)
def _takes(fn: Callable[..., object], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def given(where: Where | None, fn: Callable[..., object] | None = None) -> dict[str, Where]:
    """``where=`` for ``fn`` only when there is a filter and ``fn`` takes one (``takes_where``): an
    engine written before filters still answers, and the caller checks what it returns."""
    return {} if where is None or (fn is not None and not takes_where(fn)) else {"where": where}


# -- reading deeper --------------------------------------------------------------------------------


def deeper(
    fetch: Callable[[int], list[T]], k: int, where: Where | None, record: Callable[[T], MemoryRecord], *, exact: bool
) -> list[T]:
    """The first ``k`` of what ``fetch(n)`` (an engine's best ``n``, filtered by ``where.native``
    where it takes it) gives that pass ``where``: read once when what it returns needs no second
    look (``exact``: it applied the whole filter), else
    read deeper (4x at a time, up to ``DEEPEST``) until ``k`` passed or the engine had no more."""
    if where is None or exact:
        return fetch(k)
    n = max(k, 1) * 4
    while True:
        rows = fetch(n)
        kept = [r for r in rows if where.admits(record(r))]
        if len(kept) >= k or len(rows) < n or n >= DEEPEST:
            return kept[:k]
        n = min(n * 4, DEEPEST)


__all__ = [
    "DEEPEST",
    "EVERYTHING",
    "NOTHING",
    "TOKEN_FIELDS",
    "And",
    "Has",
    "Neg",
    "Node",
    "Or",
    "Span",
    "Where",
    "EXPIRES",
    "alive",
    "deeper",
    "living",
    "given",
    "takes",
    "takes_where",
    "holds",
    "record_tokens",
    "token",
    "compiled",
    "where_of",
]
