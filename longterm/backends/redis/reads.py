"""The Redis engine's reads: full text, vectors, a hit's neighbours by time, counts and pages, each
leaving out what an erase under way covers.

The seam: ``RedisReads``, a base of ``RedisBackend``, implements the read primitives
(``core.engine``, ``core.windows``) over RediSearch. Each query reads its scope's erasure marks
(``ns e:<tag>``, ``core.erasures``) in the same round trip (a pipeline); when there are some, it
asks again with ``scripts.visible``'s clause ANDed, so nothing an erase covers is returned and
the top k is cut after it. A filter (``core.where``) is a clause of that same query
(``filtering.clause``): in the text query, as the k-NN pre-filter, in a count, and in a page (its
keys' ``INKEYS``); a filtered read also reads the store's clock and its tokens' mark in its
pipeline, and puts records an older process saved right first (``tokens``). A hit's neighbours
are two ordered reads by ``timestamp`` within its session, all of a search's in one pipeline
(``_time_windows``), never the whole session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import override

from ...core.engine import Query
from ...core.erasures import Erasure
from ...core.neighbours import Sessions, by_session
from ...core.selection import Page
from ...core.where import Where
from ...core.windows import Ask, TimeWindows
from ...records import MemoryRecord, Scope, parse_record
from ...retrieval.text import query_terms
from .filtering import clause, joined, unscored
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


class RedisReads(TimeWindows):
    """The read primitives of ``RedisBackend`` (see the module docstring)."""

    if TYPE_CHECKING:  # ``RedisBackend``'s
        _r: Any
        ns: str
        index_name: str

        def _tag(self, app_name: str, user_id: str) -> str: ...

        def _set(self, scope: Scope) -> str: ...

        def _marks_key(self, tag: str) -> str: ...

    def _scope_tag(self, scope: Scope) -> str:
        return self._tag(scope.app_name, scope.user_id)

    def _hide(self, scope: Scope) -> Hide:
        """The clause leaving out what ``scope``'s erasure marks cover (one read of them)."""
        marks = self._r.hgetall(self._marks_key(self._scope_tag(scope)))
        return visible(marks) if marks else NOTHING_HIDDEN

    def _asked(
        self, scope: Scope, commands: Callable[[Hide], list[tuple[Any, ...]]], filtered: bool = False
    ) -> list[Any]:
        """The replies of ``commands(hide)``, with the scope's marks read in the same pipeline; asked
        again with their clause when there are marks (an erase under way). ``filtered``: the store's
        clock and tokens' mark are read too, and when records may lack their tokens (``tokens.stale``)
        they are given them first, then asked again."""
        with self._r.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._marks_key(self._scope_tag(scope)))
            if filtered:
                pipe.hmget(self.ns + "meta", [CLOCK, FILTERS_KEY])
            for command in commands(NOTHING_HIDDEN):
                pipe.execute_command(*command)
            marks, *replies = pipe.execute()
        again = filtered and stale(replies.pop(0))
        if again:
            refresh(self._r, self.ns, self.index_name)
        if not marks and not again:
            return replies
        with self._r.pipeline(transaction=False) as pipe:
            for command in commands(visible(marks) if marks else NOTHING_HIDDEN):
                pipe.execute_command(*command)
            return list(pipe.execute())

    def _fulltext(
        self, scope: Scope, query: Query, k: int, where: Where | None = None
    ) -> list[tuple[MemoryRecord, float]]:
        f = _clause(where)
        if f is None:
            return []
        q = "|".join(f"(@scope:{{$s}} @terms:{escape(t)})" for t in query_terms(query.text))

        def ask(hide: Hide) -> list[tuple[Any, ...]]:
            if f:
                text = joined(q, hide[0], unscored(f))
            else:
                text = f"({q}) {hide[0]}" if hide[0] else q
            params = ("PARAMS", 2 + len(hide[1]), "s", self._scope_tag(scope), *hide[1])
            return [("FT.SEARCH", self.index_name, text, *params, *TEXT_QUERY, k)]

        return hits(self._asked(scope, ask, bool(f))[0], True)

    def _nearest(
        self, scope: Scope, vector: np.ndarray, k: int, where: Where | None = None
    ) -> list[tuple[MemoryRecord, float]]:
        f = _clause(where)
        if f is None:
            return []
        vec = vector.astype("float32").tobytes()

        def ask(hide: Hide) -> list[tuple[Any, ...]]:
            if not f:
                q = f"(@scope:{{{self._scope_tag(scope)}}} {hide[0]})=>[KNN {k} @embedding $vec AS vscore]"
            else:
                pre = joined(f"@scope:{{{self._scope_tag(scope)}}}", hide[0], f)
                q = f"({pre})=>[KNN {k} @embedding $vec AS vscore]"
            params = ("PARAMS", 2 + len(hide[1]), "vec", vec, *hide[1])
            return [("FT.SEARCH", self.index_name, q, *params, *KNN_QUERY, k)]

        return hits(self._asked(scope, ask, bool(f))[0])

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
        f = _clause(where)
        if f is None:
            return 0
        if f:

            def ask(hide: Hide) -> list[tuple[Any, ...]]:
                params = ("PARAMS", 2 + len(hide[1]), "s", self._scope_tag(scope), *hide[1])
                query = joined("@scope:{$s}", hide[0], f)
                return [("FT.SEARCH", self.index_name, query, *params, "DIALECT", 2, "LIMIT", 0, 0)]

            return int(self._asked(scope, ask, True)[0][0])
        with self._r.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._marks_key(self._scope_tag(scope)))
            pipe.scard(self._set(scope))
            marks, n = pipe.execute()
        if not marks:
            return int(n)
        hide = visible(marks)
        params = ("PARAMS", 2 + len(hide[1]), "s", self._scope_tag(scope), *hide[1])
        reply = self._r.execute_command(
            "FT.SEARCH", self.index_name, f"@scope:{{$s}} {hide[0]}", *params, "DIALECT", 2, "LIMIT", 0, 0
        )
        return int(reply[0])

    @override
    def _page(self, scope: Scope, cursor: Any, size: int, where: Where | None = None) -> Page:
        f = _clause(where)
        if f is None:
            return [], None
        # SSCAN may return a key twice (while the set is rehashed): ``seen`` keeps each record once.
        position, seen = cursor or (0, set())
        position, keys = self._r.sscan(self._set(scope), position, count=size)
        keys = [key for key in keys if key not in seen]
        seen.update(keys)
        after: Any = (position, seen) if position else None
        if f:
            return (self._among(scope, keys, f) if keys else []), after
        with self._r.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._marks_key(self._scope_tag(scope)))
            for key in keys:
                pipe.hmget(key, "doc", "saved")
            marks, *rows = pipe.execute()
        return _uncovered(rows, marks), after

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
    erasures = [Erasure.of(spec.decode(), float(at)) for spec, at in marks.items()]
    records = []
    for doc, saved in rows:
        if doc is None:
            continue
        record = parse_record(doc)
        at = None if saved is None else float(saved)
        if not any(e.covers(record, at) for e in erasures):
            records.append(record)
    return records


#: A filtered page's arguments after its PARAMS, then how many it returns at most.
PAGE_QUERY = ("RETURN", 2, "doc", "saved", "DIALECT", 2, "LIMIT", 0)


def _clause(where: Where | None) -> str | None:
    """``where``'s clause (``filtering.clause``): "" when all pass (or no ``where``), None when none does."""
    c = True if where is None else clause(where.native)
    return "" if c is True else None if c is False else c
