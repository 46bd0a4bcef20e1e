"""A hit's session neighbours, read from the store: the contract method and the primitives under it.

The seam: ``SessionReads``, a base of ``core.engine.Engine``, gives every engine
``neighbours(scope, anchors, before, after)``: for each anchor (a record of ``scope``, e.g. a
search hit) up to ``before`` records of its session just before it and up to ``after`` just
after it, each list in session order, read from the store as it is now. Under it an engine
implements one primitive, ``_session_rows(scope, session_ids)``: each of those sessions'
records in session order, in one round trip where its client allows (Redis one ``FT.SEARCH``,
OpenSearch one terms query, Qdrant one filtered scroll). Its default reads the whole scope with
``_page``, so an engine without it (a third party's) answers the same, only slower. An engine
for which building every record of a long session costs much implements the two steps instead:
``_session_positions`` (each session's (record id, key) in session order, or only the windows
around the anchors: the local store's (id, rowid) found by index), then ``_records_at`` (the
few records wanted, by key); their defaults are ``_session_rows`` with each record its own key.

The machinery is here, once: an anchor of another scope is answered ([], []) and never read;
the anchors' sessions are read together; each anchor is found by its id in its session (one
the store no longer holds: ([], [])); the slices are cut; and whatever an engine returned, a
record outside the anchor's scope and session, the anchor itself and a second copy of a record
are left out. It all runs as one runner call (``_read``: one hop to the engine's thread), or,
through ``search_lending``, inside a search's own call (``core.searching.search_then``): the
neighbours of the hits a search's caller picks (those that lend score) cost no hop of their own.

Session order, the one rule every engine follows: by ``timestamp``; records of the same time in
the order the store saved them where the engine knows it (the local store: its rowid), else by
``event_id`` (``session_order``).

Why read at search time: context drawn from a turn's neighbours then cannot outlive its
source. An erased turn is gone from the store, so it is never anyone's neighbour, and no query
finds its words through another record (issue 27).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

from ..records import Hit, MemoryRecord, Scope
from ..retrieval.text import query_terms
from .searching import Query, Searching
from .selection import Cursor, Page
from .where import Where

T = TypeVar("T")

#: An anchor's neighbours: (the records just before it, those just after it), each oldest first.
Around: TypeAlias = tuple[list[MemoryRecord], list[MemoryRecord]]
#: Each session's records in session order, by session id (``_session_rows``).
Sessions: TypeAlias = dict[str, list[MemoryRecord]]
#: Each session's (record id, key) in session order, by session id (``_session_positions``); a key
#: is what ``_records_at`` reads a record by (the record itself, by default).
Positions: TypeAlias = dict[str, list[tuple[str, object]]]
#: A slice of one session's positions.
Cut: TypeAlias = list[tuple[str, object]]
#: Records per ``_page`` call of the default ``_session_rows``.
SCAN_PAGE = 1000


def session_order(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    """``records`` of one session in session order, for an engine that does not know the order it
    saved them in: by timestamp, then event id."""
    return sorted(records, key=lambda r: (r.timestamp, r.event_id))


def by_session(records: Iterable[MemoryRecord]) -> Sessions:
    """``records`` grouped by session, each group in session order (``session_order``); a record
    read twice (a page boundary, an engine listing one record more than once) counts once."""
    groups: dict[str, dict[str, MemoryRecord]] = {}
    for r in records:
        groups.setdefault(r.session_id, {}).setdefault(r.id, r)
    return {sid: session_order(group.values()) for sid, group in groups.items()}


def scan_sessions(page: Callable[[Scope, Cursor, int], Page], scope: Scope, session_ids: Sequence[str]) -> Sessions:
    """The default ``_session_rows``: the whole scope read with ``page``, the sessions asked for kept."""
    wanted, cursor = set(session_ids), None
    kept: list[MemoryRecord] = []
    while True:
        records, cursor = page(scope, cursor, SCAN_PAGE)
        kept.extend(r for r in records if r.session_id in wanted)
        if cursor is None:
            return by_session(kept)


class Lending(Protocol):
    """``search_lending``: a search and the neighbours of the hits ``pick`` chooses, in one read."""

    async def __call__(
        self,
        scope: Scope,
        query: str,
        top_k: int,
        pick: Callable[[list[Hit]], list[MemoryRecord]],
        n: int,
        *,
        where: Where | None = None,
    ) -> tuple[list[Hit], list[Around] | None]: ...


def _in(record: MemoryRecord, scope: Scope) -> bool:
    return (record.app_name, record.user_id) == (scope.app_name, scope.user_id)


class SessionReads:
    """``neighbours``, ``search_lending`` (a search and its lenders' neighbours in one read) and
    the primitives they stand on (see the module docstring)."""

    if TYPE_CHECKING:  # ``Engine``'s, which this is a base of

        async def _read(self, what: str, fn: Callable[..., T], *args: object) -> T: ...

        def _page(self, scope: Scope, cursor: Cursor, size: int) -> Page: ...

        searching: Searching

    async def neighbours(self, scope: Scope, anchors: Sequence[MemoryRecord], before: int, after: int) -> list[Around]:
        """For each anchor (a record of ``scope``, e.g. a search hit), up to ``before`` records of
        its session just before it and up to ``after`` just after it, each list in session order
        (oldest first), read from the store as it is now: an erased record is never returned, and
        no record of another scope, ever. An anchor the store no longer holds gets ([], [])."""
        before, after = max(0, before), max(0, after)
        if not (before or after) or not any(_in(a, scope) for a in anchors):
            return [([], []) for _ in anchors]
        return await self._read("reading neighbours", self._around, scope, list(anchors), before, after)

    async def search_lending(
        self,
        scope: Scope,
        query: str,
        top_k: int,
        pick: Callable[[list[Hit]], list[MemoryRecord]],
        n: int,
        *,
        where: Where | None = None,
    ) -> tuple[list[Hit], list[Around] | None]:
        """What ``search`` answers, and ``neighbours(scope, pick(hits), n, n)`` of its hits (aligned
        with ``pick(hits)``), read in the same call on the engine's thread: one hop, not two
        (``bench/search_hops.py``, 1M records: p50 2.54 -> 2.04-2.09 ms). It stands on the core's
        search and neighbours, so the facade asks an engine that overrides either of them apart
        (``memory.searching``). One deadline covers both reads (a search is one operation), and
        a failure of the second fails the search ("searching"). None for the neighbours: not
        read, since the caller stopped waiting first (``Searching.search_then``)."""
        terms = query_terms(query, stem=False)
        if not terms:
            return [], []
        lend = partial(self._lent, scope, pick, n)
        return await self.searching.search_then(scope, Query(query, terms), top_k, lend, where)

    def _lent(
        self, scope: Scope, pick: Callable[[list[Hit]], list[MemoryRecord]], n: int, hits: list[Hit]
    ) -> list[Around]:
        """On the engine's thread, right after a search: ``neighbours`` of the hits ``pick`` chooses."""
        anchors, n = pick(hits), max(0, n)
        if not n or not any(_in(a, scope) for a in anchors):
            return [([], []) for _ in anchors]
        return self._around(scope, anchors, n, n)

    # -- primitives: blocking, run on the engine's threads ------------------------------------

    def _session_rows(self, scope: Scope, session_ids: Sequence[str]) -> Sessions:
        """The scope's records of each of ``session_ids`` (one that holds none may be left out), each
        session's in session order (``session_order``; ``by_session`` groups and orders them)."""
        return scan_sessions(self._page, scope, session_ids)

    def _session_positions(self, scope: Scope, anchors: Sequence[MemoryRecord], before: int, after: int) -> Positions:
        """Step one of two (for an engine where ``_session_rows`` costs much): for the sessions of
        ``anchors`` (all of ``scope``), each session's (record id, key) in session order; a key is
        what ``_records_at`` takes. Either a session's every record, or around each anchor the
        store holds the anchor and the ``before`` and ``after`` records next to it: the union of
        those windows, in session order (cut from it, each anchor's neighbours come out the same)."""
        rows = self._session_rows(scope, list(dict.fromkeys(a.session_id for a in anchors)))
        return {sid: [(r.id, r) for r in records] for sid, records in rows.items()}

    def _records_at(self, scope: Scope, keys: Sequence[object]) -> list[MemoryRecord | None]:
        """Step two: the record of each of ``keys`` (``_session_positions``'), None where it is gone."""
        return [k if isinstance(k, MemoryRecord) else None for k in keys]

    # -- the machinery, once --------------------------------------------------------------------

    def _around(self, scope: Scope, anchors: list[MemoryRecord], before: int, after: int) -> list[Around]:
        """On the engine's thread: the anchors' sessions read at once, the slices cut, their records read."""
        positions = self._session_positions(scope, [a for a in anchors if _in(a, scope)], before, after)
        index = {sid: {rid: i for i, (rid, _) in enumerate(rows)} for sid, rows in positions.items()}
        cuts: list[tuple[Cut, Cut] | None] = []
        for a in anchors:
            at = index.get(a.session_id, {}).get(a.id) if _in(a, scope) else None
            rows = positions.get(a.session_id, [])
            cuts.append(None if at is None else (rows[max(0, at - before) : at], rows[at + 1 : at + 1 + after]))
        wanted = {rid: key for cut in cuts if cut is not None for rid, key in (*cut[0], *cut[1])}
        read = self._records_at(scope, list(wanted.values())) if wanted else []
        found = {rid: r for rid, r in zip(wanted, read, strict=True) if r is not None and r.id == rid and _in(r, scope)}

        def kept(a: MemoryRecord, part: Cut) -> list[MemoryRecord]:
            """Of ``part``, the records read that are of ``a``'s session, each once, never ``a`` itself."""
            ids = dict.fromkeys(rid for rid, _ in part if rid != a.id and rid in found)
            return [found[rid] for rid in ids if found[rid].session_id == a.session_id]

        return [
            ([], []) if cut is None else (kept(a, cut[0]), kept(a, cut[1]))
            for a, cut in zip(anchors, cuts, strict=True)
        ]
