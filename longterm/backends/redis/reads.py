"""The Redis engine's reads: full text, vectors, a hit's neighbours by time, counts and pages, each
leaving out what an erase under way covers.

The seam: ``RedisReads``, a base of ``RedisBackend``, implements the read primitives
(``core.engine``, ``core.windows``) over RediSearch. Each query reads its scope's erasure marks
(``ns e:<tag>``, ``core.erasures``) in the same round trip (a pipeline); when there are some, it
asks again with ``scripts.visible``'s clause ANDed, so nothing an erase covers is returned and
the top k is cut after it. A filter (``core.where``) is a clause of that same query
(``filtering.clause``): in the text query, as the k-NN pre-filter, in a count, and in a page (its
keys' ``INKEYS``); a filtered read also reads the store's clock and its tokens' mark in its
pipeline, and puts records an older process saved right first (``tokens``). A read at a moment
(``core.where.living``) is asked without that part (``filtering.plan``): a ranked read drops what
expired from the best k it got, and asks again with the part only when one of them had expired and
there may be more (``_top``); a count subtracts the count of those that expired, an intersection as
small as the fewest of them; a page drops them from the records it read. So a read where nothing in
reach has expired costs what an unfiltered one does (the part is a negation, which RediSearch walks
over the whole scope). A hit's neighbours are two ordered reads by ``timestamp`` within its
session, all of a search's in one pipeline (``_time_windows``), never the whole session.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import override

from ...core.engine import Query
from ...core.erasures import Erasure, hider
from ...core.neighbours import Sessions, by_session
from ...core.searching import Scored
from ...core.selection import Page
from ...core.where import Where
from ...core.windows import Ask, TimeWindows
from ...records import MemoryRecord, Scope, parse_record
from ...retrieval.text import query_terms
from .filtering import Plan, expired, joined, plan, unscored
from .scripts import (
    CLOCK,
    FILTERS_KEY,
    KNN_QUERY,
    TEXT_QUERY,
    WINDOW_SPANS,
    docs,
    escape,
    hits,
    session_records,
    visible,
    window_query,
)
from .tokens import refresh, stale

if TYPE_CHECKING:
    import numpy as np

#: A clause ANDed to a query and its PARAMS (``scripts.visible``); ("", ()) without erasure marks.
Hide = tuple[str, tuple[str, ...]]
NOTHING_HIDDEN: Hide = ("", ())
#: Seconds a scope where a ranked read met an expired record is read with the alive part at once
#: (``RedisReads._top``), and how many such scopes a process remembers.
MET_FOR, MET_MOST = 300.0, 10_000


class RedisReads(TimeWindows):
    """The read primitives of ``RedisBackend`` (see the module docstring)."""

    if TYPE_CHECKING:  # ``RedisBackend``'s
        _r: Any
        ns: str
        index_name: str
        _met: dict[str, float]
        """Scope tags -> when a ranked read last met an expired record of theirs (``time.monotonic``)."""

        def _tag(self, app_name: str, user_id: str) -> str: ...

        def _set(self, scope: Scope) -> str: ...

        def _marks_key(self, tag: str) -> str: ...

    def _scope_tag(self, scope: Scope) -> str:
        return self._tag(scope.app_name, scope.user_id)

    def _hide(self, scope: Scope) -> Hide:
        """The clause leaving out what ``scope``'s erasure marks cover (one read of them)."""
        marks = self._r.hgetall(self._marks_key(self._scope_tag(scope)))
        return visible(marks, self.ns + "m:") if marks else NOTHING_HIDDEN

    def _asked(self, scope: Scope, commands: Callable[[Hide, str], list[tuple[Any, ...]]], f: str) -> list[Any]:
        """The replies of ``commands(hide, f)``, with the scope's marks read in the same pipeline; asked
        again with their clause when there are marks (an erase under way). With a clause ``f``, the
        store's clock and tokens' mark are read too, and when records may lack their tokens
        (``tokens.stale``) they are given them first, then asked again."""
        with self._r.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._marks_key(self._scope_tag(scope)))
            if f:
                pipe.hmget(self.ns + "meta", [CLOCK, FILTERS_KEY])
            for command in commands(NOTHING_HIDDEN, f):
                pipe.execute_command(*command)
            marks, *replies = pipe.execute()
        again = bool(f) and stale(replies.pop(0))
        if again:
            refresh(self._r, self.ns, self.index_name)
        if not marks and not again:
            return replies
        with self._r.pipeline(transaction=False) as pipe:
            for command in commands(visible(marks, self.ns + "m:") if marks else NOTHING_HIDDEN, f):
                pipe.execute_command(*command)
            return list(pipe.execute())

    def _fulltext(self, scope: Scope, query: Query, k: int, where: Where | None = None) -> Scored:
        p = plan(where)
        if p is None:
            return []
        q = "|".join(f"(@scope:{{$s}} @terms:{escape(t)})" for t in query_terms(query.text))

        def ask(hide: Hide, f: str) -> list[tuple[Any, ...]]:
            if f:
                text = joined(q, hide[0], unscored(f))
            else:
                text = f"({q}) {hide[0]}" if hide[0] else q
            params = ("PARAMS", 2 + len(hide[1]), "s", self._scope_tag(scope), *hide[1])
            return [("FT.SEARCH", self.index_name, text, *params, *TEXT_QUERY, k)]

        return self._top(scope, lambda f: hits(self._asked(scope, ask, f)[0], True), p, k)

    def _nearest(self, scope: Scope, vector: np.ndarray, k: int, where: Where | None = None) -> Scored:
        p = plan(where)
        if p is None:
            return []
        vec = vector.astype("float32").tobytes()

        def ask(hide: Hide, f: str) -> list[tuple[Any, ...]]:
            if not f:
                q = f"(@scope:{{{self._scope_tag(scope)}}} {hide[0]})=>[KNN {k} @embedding $vec AS vscore]"
            else:
                pre = joined(f"@scope:{{{self._scope_tag(scope)}}}", hide[0], f)
                q = f"({pre})=>[KNN {k} @embedding $vec AS vscore]"
            params = ("PARAMS", 2 + len(hide[1]), "vec", vec, *hide[1])
            return [("FT.SEARCH", self.index_name, q, *params, *KNN_QUERY, k)]

        return self._top(scope, lambda f: hits(self._asked(scope, ask, f)[0]), p, k)

    def _top(self, scope: Scope, read: Callable[[str], Scored], p: Plan, k: int) -> Scored:
        """The best ``k`` that ``p`` passes, from ``read(clause)`` (the best ``k`` that pass it): read by
        ``p.rest`` and what expired by ``p.at`` left out, which is exact when none had expired or fewer
        than ``k`` came (all there are); read again by ``p.full`` when one that expired was among ``k``,
        and by it at once for ``MET_FOR`` seconds after (a scope holding expired records: one read)."""
        if p.at is None:
            return read(p.rest)
        tag, now = self._scope_tag(scope), time.monotonic()
        if now - self._met.get(tag, -MET_FOR) < MET_FOR:
            return read(p.full)
        rows = read(p.rest)
        kept = [row for row in rows if _alive(row[0], p.at)]
        if len(kept) == len(rows):
            return rows
        if len(self._met) >= MET_MOST:
            self._met.clear()
        self._met[tag] = now
        return kept if len(rows) < k else read(p.full)

    @override
    def _session_rows(self, scope: Scope, session_ids: Sequence[str]) -> Sessions:
        tag = self._scope_tag(scope)
        return by_session(session_records(self._r, self.index_name, tag, session_ids, self._hide(scope)))

    @override
    def _time_windows(self, scope: Scope, asks: Sequence[Ask]) -> list[list[MemoryRecord]]:
        """Every ask in one pipeline, within the narrowest of ``WINDOW_SPANS``; those that found fewer
        than they asked for again within the next (a sparse session: a round trip more each)."""
        tag, hide = self._scope_tag(scope), self._hide(scope)
        out: list[list[MemoryRecord]] = [[] for _ in asks]
        todo = list(range(len(asks)))
        for span in WINDOW_SPANS:
            with self._r.pipeline(transaction=False) as pipe:
                for i in todo:
                    pipe.execute_command("FT.SEARCH", self.index_name, *window_query(tag, asks[i], span, hide))
                replies = pipe.execute()
            for i, reply in zip(todo, replies, strict=True):
                out[i] = [r for r in docs(reply) if r.session_id == asks[i].session_id]
            todo = [i for i in todo if len(out[i]) < asks[i].limit]
            if not todo:
                break
        return out

    def _count(self, scope: Scope, where: Where | None = None) -> int:
        """The filter's count (no filter: the scope set's size), less, at a moment, the count of those
        of them that expired by it: two reads of one pipeline, each as cheap as its fewest records."""
        p = plan(where)
        if p is None:
            return 0
        tag, at = self._scope_tag(scope), p.at

        def ask(hide: Hide, f: str) -> list[tuple[Any, ...]]:
            params = ("PARAMS", 2 + len(hide[1]), "s", tag, *hide[1])

            def count(c: str) -> tuple[Any, ...]:
                query = joined("@scope:{$s}", hide[0], c)
                return ("FT.SEARCH", self.index_name, query, *params, "DIALECT", 2, "LIMIT", 0, 0)

            out = [count(f) if f or hide[0] else ("SCARD", self._set(scope))]
            return out if at is None else [*out, count(joined(f, expired(at)))]

        found, *gone = (n if isinstance(n, int) else int(n[0]) for n in self._asked(scope, ask, p.rest))
        return found - sum(gone)

    @override
    def _page(self, scope: Scope, cursor: Any, size: int, where: Where | None = None) -> Page:
        p = plan(where)
        if p is None:
            return [], None
        # SSCAN may return a key twice (while the set is rehashed): ``seen`` keeps each record once.
        position, seen = cursor or (0, set())
        position, keys = self._r.sscan(self._set(scope), position, count=size)
        keys = [key for key in keys if key not in seen]
        seen.update(keys)
        after: Any = (position, seen) if position else None
        if p.rest:
            records = self._among(scope, keys, p.rest) if keys else []
        else:
            with self._r.pipeline(transaction=False) as pipe:
                pipe.hgetall(self._marks_key(self._scope_tag(scope)))
                for key in keys:
                    pipe.hmget(key, "doc", "saved")
                marks, *rows = pipe.execute()
            records = _uncovered(rows, marks)
        return [r for r in records if _alive(r, p.at)], after

    def _among(self, scope: Scope, keys: list[bytes], f: str) -> list[MemoryRecord]:
        """The records of ``keys`` (of the scope's set) that pass clause ``f``: one ``FT.SEARCH`` over
        them, with the marks and the tokens' note in its pipeline; what marks cover left out as an
        unfiltered page leaves it out."""
        query = joined("@scope:{$s}", f)
        params = ("PARAMS", 2, "s", self._scope_tag(scope))
        command = ("FT.SEARCH", self.index_name, query, "INKEYS", len(keys), *keys, *params, *PAGE_QUERY, len(keys))
        with self._r.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._marks_key(self._scope_tag(scope)))
            pipe.hmget(self.ns + "meta", [CLOCK, FILTERS_KEY])
            pipe.execute_command(*command)
            marks, note, reply = pipe.execute()
        if stale(note):
            refresh(self._r, self.ns, self.index_name)
            reply = self._r.execute_command(*command)
        rows = []
        for fields in reply[2::2]:
            d = dict(zip(*[iter(fields)] * 2, strict=True))
            rows.append((d[b"doc"], d.get(b"saved")))
        return _uncovered(rows, marks)


def _uncovered(rows: Sequence[tuple[bytes | None, bytes | None]], marks: dict[bytes, bytes]) -> list[MemoryRecord]:
    """The records of (doc, saved) ``rows`` (a doc None: gone) that no erasure mark covers (``marks``:
    a scope's, ``Erasure.spec`` -> its clock)."""
    covers = hider([Erasure.of(spec.decode(), float(at)) for spec, at in marks.items()])
    records = []
    for doc, saved in rows:
        if doc is None:
            continue
        record = parse_record(doc)
        if not covers(record, None if saved is None else float(saved)):
            records.append(record)
    return records


def _alive(record: MemoryRecord, at: float | None) -> bool:
    """Whether ``record`` is alive at ``at`` (None: no moment; what ``alive(at)`` answers of its tokens)."""
    return at is None or record.expires_at is None or record.expires_at > at


#: A filtered page's arguments after its PARAMS, then how many it returns at most.
PAGE_QUERY = ("RETURN", 2, "doc", "saved", "DIALECT", 2, "LIMIT", 0)
