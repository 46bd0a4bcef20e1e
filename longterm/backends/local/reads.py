"""The local store's reads: searches, counts and pages, each with or without a filter.

The seam: ``LocalReads``, a base of ``LocalBackend``, implements the read primitives of
``core.engine`` (``_fulltext``, ``_search``, ``_count``, ``_page``, ``_page_by_time``) on the
reader's connection, every statement bound to the scope's id. With ``where``, the whole filter
(``where.filter``) is applied in the same statement, before its limit (``filtering``): a count
counts the filter's rows, full text checks each match, a page checks each record it walks (or,
when few pass, looks it up among the filter's rows: ``FEW_PAGES``), and the vector arm ranks
the cached scope and keeps only rows that pass (``vectors.nearest``); so the engine declares
``filters_exact`` and the core looks at nothing twice. A read made at a moment (``where.alive_at``,
with or without a filter: ``where.filter`` may be None) leaves out what expired by then in the
same statements, before the same cuts (``schema``, "Why expiry ..."): a count subtracts the
scope's expired records, full text leaves their rowids out of its ranking, the vector arm their
positions, a page checks each row it reads; none expired, each costs one empty seek more.

Why a filtered search is still fused on row ids: both arms give their best passing rows, and
only the fused survivors are read and parsed, as without a filter (``store``, "Why so").
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from typing_extensions import override

from ...core.engine import Engine, Query
from ...core.selection import Page
from ...core.where import Where
from ...records import Hit, MemoryRecord, Scope
from . import schema as sql
from .filtering import Compiled, compile_filter
from .rows import fts_query, survivors, to_record

if TYPE_CHECKING:
    import numpy as np

    from .vectors import VectorStore


#: A page walks the records in its order and probes each (``Compiled.where``), unless the filter
#: is one seek passing fewer than this many pages' worth: then its rows are read first and each
#: record walked is looked up among them (at 100k records, a page of 100 passing 1%: 2.7 ms
#: against 15; passing 50%: 9 against 0.4, hence the count first, ~0.2 ms).
FEW_PAGES = 20


def _alive(cond: str, args: tuple[Any, ...], alive_at: float | None) -> tuple[str, tuple[Any, ...]]:
    """``cond`` (on the record ``r``) of the records alive at ``alive_at`` too (None: all)."""
    return (cond, args) if alive_at is None else (f"({cond}) AND {sql.ALIVE}", (*args, alive_at))


def _narrowed(
    conn: sqlite3.Connection, passing: Compiled | None, size: int, alive_at: float | None
) -> tuple[str, tuple[Any, ...]]:
    """The condition a page of ``size`` applies, and its arguments (``FEW_PAGES``)."""
    if passing is None:
        return _alive("1", (), alive_at)
    if passing.streams:
        few = FEW_PAGES * size
        if conn.execute(sql.BOUNDED_COUNT.format(rows=passing.rows), (*passing.rows_args, few)).fetchone()[0] < few:
            return _alive(sql.AMONG.format(rows=passing.rows), passing.rows_args, alive_at)
    return _alive(passing.where, passing.where_args, alive_at)


#: What a read applies: the filter compiled for the scope (None: none), and the moment (None: any).
Scoped = tuple[sqlite3.Connection, int | None, Compiled | None, float | None]


class LocalReads(Engine):
    """The read primitives of the local store (see the module docstring)."""

    if TYPE_CHECKING:  # ``LocalBackend``'s, which this is a base of
        _vectors: VectorStore | None

        def _reader(self) -> sqlite3.Connection: ...

        def _scope(
            self, app: str, user: str, *, create: bool = False, conn: sqlite3.Connection | None = None
        ) -> int | None: ...

    def _scoped(self, scope: Scope, where: Where | None) -> Scoped:
        """This thread's reader, the scope's id (None: no such scope), ``where``'s filter compiled for
        it (None: none) and the moment it is read at (None: no expiry applied)."""
        conn = self._reader()
        scope_id = self._scope(scope.app_name, scope.user_id, conn=conn)
        if where is None or scope_id is None:
            return conn, scope_id, None, None
        passing = None if where.filter is None else compile_filter(where.filter, scope_id)
        return conn, scope_id, passing, where.alive_at

    @override
    def _fulltext(
        self, scope: Scope, query: Query, k: int, where: Where | None = None
    ) -> list[tuple[MemoryRecord, float]]:
        conn, scope_id, passing, alive_at = self._scoped(scope, where)
        if scope_id is None:
            return []
        match, (lo, hi) = fts_query(query.terms), sql.row_range(scope_id)
        b = sql.bucket(scope_id)
        if passing is None:
            alive = alive_at is not None
            statement, extra = (sql.ALIVE_SEARCH[b], (alive_at,)) if alive else (sql.SEARCH[b], ())
            rows = conn.execute(statement, (match, lo, hi, scope_id, k, *extra))
        else:
            cond, args = _alive(passing.where, passing.where_args, alive_at)
            rows = conn.execute(sql.FILTERED_SEARCH[b].format(where=cond), (match, lo, hi, scope_id, *args, k))
        return [(to_record(row[1:-1], scope), -row[-1]) for row in rows]

    @override
    def _search(
        self,
        scope: Scope,
        query: Query,
        vector: np.ndarray | None,
        k: int,
        degraded: str | None,
        where: Where | None = None,
    ) -> list[Hit]:
        # Fuse on row ids and scores first; read and parse only the records that survive.
        # A large scope's int8 scan runs on another thread while SQLite does full text.
        assert self._vectors is not None
        conn, scope_id, passing, alive_at = self._scoped(scope, where)
        if scope_id is None:
            return []
        vectors, depth = self._vectors, self.hybrid.depth(k)
        scoped = vectors.matrix(conn, scope_id)
        dead = vectors.expired(conn, scoped, scope_id, alive_at) if vector is not None else None
        match, (lo, hi), b = fts_query(query.terms), sql.row_range(scope_id), sql.bucket(scope_id)
        if passing is None:
            pending = vectors.top_soon(scoped, vector, depth, dead) if vector is not None else None
            if alive_at is None:
                rows = conn.execute(sql.SEARCH_IDS[b], (match, lo, hi, scope_id, depth))
            else:
                rows = conn.execute(sql.ALIVE_SEARCH_IDS[b], (match, lo, hi, scope_id, depth, alive_at))
            text_rows = [(r[0], -r[1]) for r in rows]
            near = pending.result() if pending is not None else []
        else:
            from .vectors import nearest

            ranked = vectors.ranked_soon(scoped, vector, depth) if vector is not None else None
            cond, args = _alive(passing.where, passing.where_args, alive_at)
            statement = sql.FILTERED_SEARCH_IDS[b].format(where=cond)
            text_rows = [(r[0], -r[1]) for r in conn.execute(statement, (match, lo, hi, scope_id, *args, depth))]
            near = []
            if vector is not None and ranked is not None:
                near = nearest(conn, scoped, vector, ranked.result(), depth, scope_id, passing, dead)
        fused = self.hybrid.fuse({"fulltext": text_rows, "vector": near})
        return survivors(conn, fused, scope, scope_id, k, degraded, alive_at)

    @override
    def _count(self, scope: Scope, where: Where | None = None) -> int:
        conn, scope_id, passing, alive_at = self._scoped(scope, where)
        if scope_id is None:
            return 0
        if passing is None:
            if alive_at is None:
                return int(conn.execute(sql.COUNT, (scope_id,)).fetchone()[0])
            return int(conn.execute(sql.ALIVE_COUNT, (scope_id, alive_at)).fetchone()[0])
        if alive_at is None:
            return int(conn.execute(passing.count, passing.count_args).fetchone()[0])
        statement = sql.ALIVE_FILTERED_COUNT.format(count=passing.count, where=passing.where)
        args = (*passing.count_args, scope_id, alive_at, *passing.where_args)
        return int(conn.execute(statement, args).fetchone()[0])

    @override
    def _page(self, scope: Scope, cursor: Any, size: int, where: Where | None = None) -> Page:
        conn, scope_id, passing, alive_at = self._scoped(scope, where)
        if scope_id is None:
            return [], None
        after = cursor or ("", "")
        if passing is None and alive_at is None:
            rows = conn.execute(sql.SCAN, (scope_id, *after, size)).fetchall()
        else:
            cond, args = _narrowed(conn, passing, size, alive_at)
            rows = conn.execute(sql.FILTERED_SCAN.format(where=cond), (scope_id, *after, *args, size)).fetchall()
        return [to_record(r[1:], scope) for r in rows], (tuple(rows[-1][2:4]) if len(rows) == size else None)

    @override
    def _page_by_time(
        self, scope: Scope, cursor: Any, size: int, newest_first: bool, where: Where | None = None
    ) -> Page:
        conn, scope_id, passing, alive_at = self._scoped(scope, where)
        if scope_id is None:
            return [], None
        start = (float("inf"), 0) if newest_first else (float("-inf"), 0)
        at = tuple(cursor) if cursor else start
        if passing is None and alive_at is None:
            rows = conn.execute(sql.NEWEST if newest_first else sql.OLDEST, (scope_id, *at, size)).fetchall()
        else:
            cond, args = _narrowed(conn, passing, size, alive_at)
            statement = (sql.FILTERED_NEWEST if newest_first else sql.FILTERED_OLDEST).format(where=cond)
            rows = conn.execute(statement, (scope_id, *at, *args, size)).fetchall()
        nxt = [rows[-1][9], rows[-1][0]] if len(rows) == size else None  # (timestamp, rowid) of the last
        return [to_record(r[1:], scope) for r in rows], nxt
