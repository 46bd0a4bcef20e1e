"""The Redis engine's reads: full text, vectors, a hit's neighbours by time, counts and pages, each
leaving out what an erase under way covers.

The seam: ``RedisReads``, a base of ``RedisBackend``, implements the read primitives
(``core.engine``, ``core.windows``) over RediSearch. Each query reads its scope's erasure marks
(``ns e:<tag>``, ``core.erasures``) in the same round trip (a pipeline); when there are some, it
asks again with ``scripts.visible``'s clause ANDed, so nothing an erase covers is returned and
the top k is cut after it. A hit's neighbours are two ordered reads by ``timestamp`` within its
session, all of a search's in one pipeline (``_time_windows``), never the whole session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import override

from ...core.engine import Query
from ...core.erasures import Erasure
from ...core.neighbours import Sessions, by_session
from ...core.selection import Page
from ...core.windows import Ask, TimeWindows
from ...records import MemoryRecord, Scope, parse_record
from ...retrieval.text import query_terms
from .scripts import (
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

if TYPE_CHECKING:
    import numpy as np

#: A clause ANDed to a query and its PARAMS (``scripts.visible``); ("", ()) without erasure marks.
Hide = tuple[str, tuple[str, ...]]
NOTHING_HIDDEN: Hide = ("", ())


class RedisReads(TimeWindows):
    """The read primitives of ``RedisBackend`` (see the module docstring)."""

    if TYPE_CHECKING:  # ``RedisBackend``'s
        _r: Any
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

    def _asked(self, scope: Scope, commands: Callable[[Hide], list[tuple[Any, ...]]]) -> list[Any]:
        """The replies of ``commands(hide)``, with the scope's marks read in the same pipeline; asked
        again with their clause when there are marks (an erase under way)."""
        with self._r.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._marks_key(self._scope_tag(scope)))
            for command in commands(NOTHING_HIDDEN):
                pipe.execute_command(*command)
            marks, *replies = pipe.execute()
        if not marks:
            return replies
        with self._r.pipeline(transaction=False) as pipe:
            for command in commands(visible(marks)):
                pipe.execute_command(*command)
            return list(pipe.execute())

    def _fulltext(self, scope: Scope, query: Query, k: int) -> list[tuple[MemoryRecord, float]]:
        q = "|".join(f"(@scope:{{$s}} @terms:{escape(t)})" for t in query_terms(query.text))

        def ask(hide: Hide) -> list[tuple[Any, ...]]:
            text = f"({q}) {hide[0]}" if hide[0] else q
            params = ("PARAMS", 2 + len(hide[1]), "s", self._scope_tag(scope), *hide[1])
            return [("FT.SEARCH", self.index_name, text, *params, *TEXT_QUERY, k)]

        return hits(self._asked(scope, ask)[0], True)

    def _nearest(self, scope: Scope, vector: np.ndarray, k: int) -> list[tuple[MemoryRecord, float]]:
        vec = vector.astype("float32").tobytes()

        def ask(hide: Hide) -> list[tuple[Any, ...]]:
            q = f"(@scope:{{{self._scope_tag(scope)}}} {hide[0]})=>[KNN {k} @embedding $vec AS vscore]"
            params = ("PARAMS", 2 + len(hide[1]), "vec", vec, *hide[1])
            return [("FT.SEARCH", self.index_name, q, *params, *KNN_QUERY, k)]

        return hits(self._asked(scope, ask)[0])

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

    def _count(self, scope: Scope) -> int:
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
    def _page(self, scope: Scope, cursor: Any, size: int) -> Page:
        # SSCAN may return a key twice (while the set is rehashed): ``seen`` keeps each record once.
        position, seen = cursor or (0, set())
        position, keys = self._r.sscan(self._set(scope), position, count=size)
        keys = [key for key in keys if key not in seen]
        seen.update(keys)
        with self._r.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._marks_key(self._scope_tag(scope)))
            for key in keys:
                pipe.hmget(key, "doc", "saved")
            marks, *rows = pipe.execute()
        erasures = [Erasure.of(spec.decode(), float(at)) for spec, at in marks.items()]
        records = []
        for doc, saved in rows:
            if doc is None:
                continue
            record = parse_record(doc)
            at = None if saved is None else float(saved)
            if not any(e.covers(record, at) for e in erasures):
                records.append(record)
        return records, ((position, seen) if position else None)
