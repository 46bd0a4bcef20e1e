"""Filters on the local store: the values a record is found by, and a filter as SQL over them.

The seam: ``values_of(metadata)`` gives the ``record_values`` rows (path, kind, value) of a
record's stored metadata (``schema``, "Why filters read ``record_values``"), written with the
record. ``compile_filter(filter, scope)`` (a ``core.filters.Filter``) gives ``Compiled``:
``rows``, a SELECT of the rowids (``id``) of the scope's records that pass, made of seeks (of
``record_values`` by (scope, path, kind, value), of the records' indexes by session, role and
time) joined by INTERSECT, UNION and EXCEPT, for a count and for the rows a search may return;
and ``where``, the same filter as a condition on one record ``r`` (its values probed, its
columns read), for what walks records in an order of its own: a page, full text's matches, the
vector arm's candidates. Both mean what ``core.filters.matches`` means, exactly: the whole
filter is applied here (``LocalBackend.filters_exact``), ranges over metadata too.

How the semantics hold: a value's kind is kept beside it (null, boolean, number, string; a list's
elements under kinds of their own), so ``True`` never meets ``1``, while 1 and 1.0 are one number
to SQLite; equality and ``$in`` look at scalars and list elements, ranges at scalars only; a path
is there when it has a row of any kind (``PRESENT`` for one that holds no scalar), so a missing
path (or one through a non-object) passes only ``$ne``, ``$nin``, ``$not`` and ``$exists:
false``, each the negation of a lookup; text compares by code point (SQLite's binary collation
over UTF-8); the record's fields are its columns, each of one kind. Paths are JSON arrays of
their keys (ASCII, so any key can be named) and every value is a bound parameter: nothing a
caller sends enters the SQL's text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ...core.filters import All, Cond, Filter, Not

#: ``record_values.kind``: the path is there, and holds no scalar a filter could compare (an
#: object, an empty list, NaN); every path that is there has a row of some kind.
PRESENT = 0
NULL, BOOL, NUMBER, STRING = 1, 2, 3, 4
#: Added to a scalar's kind for an element of a list (equality sees both, ranges scalars only).
ELEMENT = 4
#: Record fields compared in their own columns, and the kind each holds.
COLUMN_KINDS = {"session_id": STRING, "author": STRING, "role": STRING, "timestamp": NUMBER}
#: Values of one ``IN (...)``: a long ``$in`` is asked in parts.
CHUNK = 500
#: Compound SELECTs a count nests at most: SQLite's parser overflowed its stack at 16 (``$and`` and
#: ``$or`` alternating), which a filter may nest to 32 (``core.filters.MAX_DEPTH``).
DEEPEST = 8
_INT64 = (-(2**63), 2**63 - 1)
_RANGES = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


@lru_cache(maxsize=4096)
def path_key(path: tuple[str, ...]) -> str:
    """``record_values.path`` of a metadata path: its keys as a JSON array (ASCII: any key, even
    one no UTF-8 can hold, has one text)."""
    return json.dumps(list(path), separators=(",", ":"))


def _text(v: str) -> bool:
    """Whether SQLite can hold ``v`` (no lone surrogate)."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _number(v: int | float) -> int | float | None:
    """``v`` as SQLite holds it exactly (an int past 64 bits as the float equal to it); None if none is."""
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if _INT64[0] <= v <= _INT64[1]:
        return v
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if f == v else None


def typed(v: Any) -> tuple[int, Any] | None:
    """(kind, value) of a scalar as ``record_values`` keeps it; None for what no operand equals
    (an object, a list inside a list, NaN)."""
    if isinstance(v, bool):
        return BOOL, int(v)
    if isinstance(v, (int, float)):
        n = _number(v)
        return None if n is None else (NUMBER, n)
    if v is None:
        return NULL, 0
    if isinstance(v, str):
        return (STRING, v) if _text(v) else None
    return None


def values_of(metadata: str) -> list[tuple[str, int, Any]]:
    """The (path, kind, value) rows a record is found by (``metadata``, its stored JSON): one per
    scalar at a path and per scalar in a list at a path, and a ``PRESENT`` row for a path that
    has none of those (an object, an empty list, NaN)."""
    if metadata == "{}":
        return []
    try:
        tree = json.loads(metadata)
    except ValueError:
        return []
    out: list[tuple[str, int, Any]] = []
    todo: list[tuple[tuple[str, ...], Any]] = [((), tree)] if isinstance(tree, dict) else []
    while todo:  # a loop, not recursion: metadata nests as deep as it was sent
        prefix, node = todo.pop()
        for key, v in node.items():
            at = (*prefix, key)
            p = path_key(at)
            if isinstance(v, dict):
                out.append((p, PRESENT, 0))
                todo.append((at, v))
            elif isinstance(v, list):
                held = [(p, t[0] + ELEMENT, t[1]) for x in v if (t := typed(x)) is not None]
                out.extend(held or [(p, PRESENT, 0)])
            else:
                t = typed(v)
                out.append((p, PRESENT, 0) if t is None else (p, *t))
    return out


# -- a filter as SQL ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Leaf:
    """One condition in both forms: ``rows`` a SELECT of ``id`` (``simple``: no compound;
    ``unique``: no id twice), ``where`` a condition on ``r``."""

    rows: str
    rows_args: tuple[Any, ...]
    where: str
    where_args: tuple[Any, ...]
    simple: bool = True
    unique: bool = True
    columns: bool = False
    """``where`` reads the record's columns (not only its values)."""


@dataclass(frozen=True)
class _Const:
    value: bool


@dataclass(frozen=True)
class _And:
    parts: tuple[_Node, ...]


@dataclass(frozen=True)
class _Or:
    parts: tuple[_Node, ...]


@dataclass(frozen=True)
class _Not:
    part: _Node


_Node = _Leaf | _Const | _And | _Or | _Not
TRUE, FALSE = _Const(True), _Const(False)


@dataclass(frozen=True)
class Compiled:
    """A filter for one scope (module docstring)."""

    rows: str
    """The rowids (``id``) of the records that pass; one may come twice."""
    rows_args: tuple[Any, ...]
    where: str
    where_args: tuple[Any, ...]
    columns: bool
    """``where`` reads the record's columns: it needs the record's row, not only its rowid."""
    count: str
    """How many records pass (a negation: all of the scope's less those of what it negates)."""
    count_args: tuple[Any, ...]
    streams: bool
    """``rows`` is one seek, read as it goes (a compound one is made whole first)."""


def _marks(n: int) -> str:
    return ", ".join("?" * n)


#: A probe of one record's values at a path: by record (a range, any kind), or, where the
#: condition names whole keys, by (scope, path, kind, value, record), the rows of one value lying
#: together in the file (twice as fast on a cold cache as by record, measured at 100k records).
_BY_RECORD = "EXISTS (SELECT 1 FROM record_values AS v WHERE v.record = r.rowid AND v.path = ? AND {cond})"
_BY_KEY = (
    "EXISTS (SELECT 1 FROM record_values AS v INDEXED BY sqlite_autoindex_record_values_1 "
    "WHERE v.scope = ? AND v.path = ? AND {cond} AND v.record = r.rowid)"
)


def _seek(
    scope: int, path: str, conds: list[tuple[str, tuple[Any, ...]]], *, unique: bool, keyed: bool = False
) -> _Leaf:
    """Records with a value at ``path`` meeting one of ``conds`` (SQL on ``{q}kind``, ``{q}value``;
    ``keyed``: each names its kinds and values, so a record is probed by key)."""
    select = "SELECT record AS id FROM record_values WHERE scope = ? AND path = ? AND "
    rows = " UNION ".join(select + c.format(q="") for c, _ in conds)
    rows_args = tuple(a for _, args in conds for a in (scope, path, *args))
    if keyed:
        where = " OR ".join(_BY_KEY.format(cond=c.format(q="v.")) for c, _ in conds)
        where_args = tuple(a for _, args in conds for a in (scope, path, *args))
    else:
        where = _BY_RECORD.format(cond="(" + " OR ".join(f"({c.format(q='v.')})" for c, _ in conds) + ")")
        where_args = (path, *(a for _, args in conds for a in args))
    return _Leaf(rows, rows_args, where, where_args, simple=len(conds) == 1, unique=unique)


def _values(scope: int, path: str, groups: list[tuple[tuple[int, ...], list[Any]]]) -> _Node:
    """Records with a value at ``path`` of one of a group's kinds and equal to one of its values
    (a group without values: any value of its kinds)."""
    conds: list[tuple[str, tuple[Any, ...]]] = []
    for kinds, values in groups:
        kind = f"{{q}}kind IN ({', '.join(map(str, kinds))})"
        if not values:
            conds.append((kind, ()))
        for i in range(0, len(values), CHUNK):
            part = tuple(values[i : i + CHUNK])
            conds.append((f"{kind} AND {{q}}value IN ({_marks(len(part))})", part))
    if not conds:
        return FALSE
    keyed = all(args for _, args in conds)
    return _seek(scope, path, conds, unique=len(conds) > 1 or len(conds[0][1]) <= 1, keyed=keyed)  # UNION: each once


def _column(scope: int, column: str, cond: str, args: tuple[Any, ...]) -> _Leaf:
    rows = f"SELECT rowid AS id FROM records WHERE scope = ? AND {column} {cond}"
    return _Leaf(rows, (scope, *args), f"r.{column} {cond}", args, columns=True)


def _bound(op: str, x: Any) -> tuple[int, str, Any] | None:
    """(kind, SQL operator, bound) of a range ``op x`` as a seek, exact; None: nothing passes."""
    sign = _RANGES[op]
    if isinstance(x, str):
        if _text(x):
            return STRING, sign, x
        # A lone surrogate at i: a text SQLite holds is above x iff it is at or above x[:i] +
        # U+E000 (the first character past the surrogates), and is never equal to it.
        i = next(j for j, c in enumerate(x) if not _text(c))
        return STRING, (">=" if sign[0] == ">" else "<"), x[:i] + "\ue000"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    n = _number(x)
    if n is not None:
        return NUMBER, sign, n
    # An int no double equals: compare with the doubles either side of it (±inf past them all).
    try:
        f = float(x)
    except OverflowError:
        f = math.inf if x > 0 else -math.inf
    below, above = (f, math.nextafter(f, math.inf)) if f < x else (math.nextafter(f, -math.inf), f)
    return (NUMBER, ">", below) if sign[0] == ">" else (NUMBER, "<", above)


def _equal(values: Sequence[Any], *, elements: bool) -> list[tuple[tuple[int, ...], list[Any]]]:
    """``values`` grouped by kind, as ``_values`` takes them (``elements``: list elements match too)."""
    groups: dict[int, list[Any]] = {}
    for v in values:
        t = typed(v)
        if t is not None:
            groups.setdefault(t[0], []).append(t[1])
    return [((k, k + ELEMENT) if elements else (k,), vs) for k, vs in sorted(groups.items())]


def _cond(c: Cond, scope: int) -> _Node:
    op, v = c.op, c.value
    if op == "$exists":  # a record field is always there; a path, when it has a row of any kind
        there = TRUE if c.field is not None else _seek(scope, path_key(c.path), [("1", ())], unique=False)
        return there if v else _not(there)
    operands = v if op in ("$in", "$nin") else (v,)
    if c.field is not None:  # a column, of one kind: other kinds never pass
        column, kind = c.field, COLUMN_KINDS[c.field]
        if op in _RANGES:
            b = _bound(op, v)
            return _column(scope, column, f"{b[1]} ?", (b[2],)) if b is not None and b[0] == kind else FALSE
        found = [x for kinds, xs in _equal(operands, elements=False) if kinds[0] == kind for x in xs]
        equal = _column(scope, column, f"IN ({_marks(len(found))})", tuple(found)) if found else FALSE
        return _not(equal) if op in ("$ne", "$nin") else equal
    path = path_key(c.path)
    if op in _RANGES:
        b = _bound(op, v)
        if b is None:
            return FALSE
        return _seek(scope, path, [(f"{{q}}kind = {b[0]} AND {{q}}value {b[1]} ?", (b[2],))], unique=True)
    node = _values(scope, path, _equal(operands, elements=True))
    return _not(node) if op in ("$ne", "$nin") else node


def _not(node: _Node) -> _Node:
    if isinstance(node, _Const):
        return _Const(not node.value)
    return node.part if isinstance(node, _Not) else _Not(node)


def _tree(f: Filter, scope: int) -> _Node:
    if isinstance(f, Cond):
        return _cond(f, scope)
    if isinstance(f, Not):
        return _not(_tree(f.part, scope))
    parts = [_tree(p, scope) for p in f.parts]
    neutral, absorbing = (TRUE, FALSE) if isinstance(f, All) else (FALSE, TRUE)
    if absorbing in parts:
        return absorbing
    kept = tuple(p for p in parts if p != neutral)
    if not kept:
        return neutral
    if len(kept) == 1:
        return kept[0]
    return _And(kept) if isinstance(f, All) else _Or(kept)


def _all(scope: int) -> _Leaf:
    return _Leaf("SELECT rowid AS id FROM records WHERE scope = ?", (scope,), "1", ())


_NONE = _Leaf("SELECT rowid AS id FROM records WHERE 0", (), "0", ())


def _rows(node: _Node, scope: int) -> _Leaf:
    """``node``'s ``rows`` form (as a leaf: simple or not, unique or not)."""
    if isinstance(node, _Leaf):
        return node
    if isinstance(node, _Const):
        return _all(scope) if node.value else _NONE
    if isinstance(node, _Not):
        node = _And((TRUE, node))
    if isinstance(node, _And):
        # What the negated parts leave of the others: A INTERSECT B EXCEPT C (left to right).
        first = [_rows(p, scope) for p in node.parts if not isinstance(p, _Not)] or [_all(scope)]
        rest = [_rows(p.part, scope) for p in node.parts if isinstance(p, _Not)]
        sql = " INTERSECT ".join(map(_member, first)) + "".join(f" EXCEPT {_member(m)}" for m in rest)
        args = tuple(a for m in (*first, *rest) for a in m.rows_args)
        return _Leaf(sql, args, "", (), simple=False)
    members = [_rows(p, scope) for p in node.parts]
    return _Leaf(" UNION ".join(map(_member, members)), tuple(a for m in members for a in m.rows_args), "", (),
                 simple=False)  # fmt: skip


def _member(leaf: _Leaf) -> str:
    """``leaf``'s rows as a member of a compound SELECT (a compound one wrapped)."""
    return leaf.rows if leaf.simple else f"SELECT id FROM ({leaf.rows})"


def _where(node: _Node) -> tuple[str, tuple[Any, ...], bool]:
    """``node``'s ``where`` form, its arguments, and whether it reads the record's columns."""
    if isinstance(node, _Leaf):
        return node.where, node.where_args, node.columns
    if isinstance(node, _Const):
        return ("1" if node.value else "0"), (), False
    if isinstance(node, _Not):
        sql, args, columns = _where(node.part)
        return f"NOT ({sql})", args, columns
    parts = [_where(p) for p in node.parts]
    joint = " AND " if isinstance(node, _And) else " OR "
    sql = "(" + joint.join(f"({s})" for s, _, _ in parts) + ")"
    return sql, tuple(a for _, args, _ in parts for a in args), any(c for _, _, c in parts)


def _depth(node: _Node) -> int:
    """How many compound SELECTs ``node``'s ``rows`` form nests."""
    if isinstance(node, _Not):
        return _depth(node.part) + 1
    if isinstance(node, (_And, _Or)):
        return 1 + max(map(_depth, node.parts))
    return 0


def compile_filter(f: Filter, scope: int) -> Compiled:
    """``f`` for the records of ``scope`` (module docstring). A filter whose ``rows`` would nest deeper
    than ``DEEPEST`` is counted by its ``where`` form, a walk of the scope's records."""
    node = _tree(f, scope)
    rows = _rows(node, scope)
    where, where_args, columns = _where(node)
    counted = _rows(node.part, scope) if isinstance(node, _Not) else rows
    count = f"SELECT count({'' if counted.unique else 'DISTINCT '}id) FROM ({counted.rows})"
    count_args = counted.rows_args
    if _depth(node) > DEEPEST:
        count, count_args = f"SELECT count(*) FROM records AS r WHERE r.scope = ? AND ({where})", (scope, *where_args)
    elif counted is not rows:
        count, count_args = f"SELECT (SELECT count(*) FROM records WHERE scope = ?) - ({count})", (scope, *count_args)
    return Compiled(rows.rows, rows.rows_args, where, where_args, columns, count, count_args, rows.simple)


__all__ = ["ELEMENT", "PRESENT", "Compiled", "compile_filter", "path_key", "typed", "values_of"]
