"""The Redis engine's erases: a scope's, a session's or many ids' in marked steps, a few ids at once.

The seam: ``RedisErasures``, a base of ``RedisBackend``, implements ``_remove`` and
``core.erasures``' four primitives: ``MARK`` writes an erase's marks in its scope's ``ns e:<tag>``
hash at the store's clock (``ns meta``'s ``clock``, which every save script moves too, so "saved
before the erase" is exact on one server) and lists the scope in ``ns erasing``; ``ERASE`` calls,
``ERASE_BATCH`` records each, delete what a mark covers (of its session or its ids, saved at or
before its clock); ``UNMARK`` removes it. An erase of at most ``ERASE_BATCH`` ids (one memory, a
small erase by date) is one ``ERASE`` call, atomic, with no mark; a bigger one (by date, by filter,
an expiry sweep) is marks of ``MARK_IDS`` ids each, all written by one ``MARK`` before the first
delete.

Why marked: an erase of 20,000 records is 40 script calls. Killed between two, it left the user
half erased and searchable; now every read leaves out what the marks cover (``reads``; an id by
its ``rid`` TAG) until the next erase or open finishes it (``core.erasures``), and a save made
after the mark is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import override

from ...core.erasures import Erasure, ErasureMarks
from ...records import Scope
from .scripts import ERASE_BATCH, MARK_IDS, marked_ids, visible

if TYPE_CHECKING:
    from ...core.erasures import MarkedErases


class RedisErasures(ErasureMarks):
    """The erase primitives of ``RedisBackend`` (see the module docstring)."""

    if TYPE_CHECKING:  # ``RedisBackend``'s
        _r: Any
        ns: str
        _erase: Any
        _mark: Any
        _unmark: Any
        erasing: MarkedErases | None

        def _tag(self, app_name: str, user_id: str) -> str: ...

        def _set(self, scope: Scope) -> str: ...

        def _marks_key(self, tag: str) -> str: ...

    @property
    def _erasing_key(self) -> str:
        """The set of the tags of scopes holding erasure marks."""
        return f"{self.ns}erasing"

    @override
    def _erasure_begin(self, erasure: Erasure) -> Erasure:
        return self._marked([erasure])[0]

    def _marked(self, erasures: Sequence[Erasure]) -> list[Erasure]:
        """Write the marks of ``erasures`` (of one scope) at one tick of the clock, at once; them stamped."""
        tag = self._tag(erasures[0].app_name, erasures[0].user_id)
        keys = [f"{self.ns}meta", self._marks_key(tag), self._erasing_key]
        now = float(self._mark(keys=keys, args=[tag, *(e.spec() for e in erasures)]))
        return [e.stamped(now) for e in erasures]

    @override
    def _erasure_covered(self, erasure: Erasure) -> int:
        ids = marked_ids(erasure)
        if not ids:
            return self._sweep(erasure.scope, erasure.session_id, erasure.before)
        return self._erased(erasure.scope, ids, erasure.session_id, repr(erasure.before))

    @override
    def _erasure_end(self, erasure: Erasure) -> None:
        tag = self._tag(erasure.app_name, erasure.user_id)
        self._unmark(keys=[self._marks_key(tag), self._erasing_key], args=[erasure.spec(), tag])

    @override
    def _erasures_pending(self) -> list[Erasure]:
        found = []
        for tag in self._r.smembers(self._erasing_key):
            marks = self._r.hgetall(self._marks_key(tag.decode()))
            found += [Erasure.of(spec.decode(), float(at)) for spec, at in marks.items()]
        return found

    def _visible_count(self, ns: str, tag: str) -> int:
        """How many records of scope ``tag`` of namespace ``ns`` no erasure mark covers."""
        hide, params = visible(self._r.hgetall(f"{ns}e:{tag}"), ns + "m:")
        query = f"@scope:{{$s}} {hide}".rstrip()
        reply = self._r.execute_command(
            "FT.SEARCH", f"{ns}search", query, "PARAMS", 2 + len(params), "s", tag, *params, "DIALECT", 2, "LIMIT", 0, 0
        )
        return int(reply[0])

    def _sweep(self, scope: Scope, session_id: str | None, before: float | None) -> int:
        """``ERASE`` over the scope's set, a page a call: its records (of ``session_id``; saved at or
        before ``before``); how many went."""
        members, n, cursor = self._set(scope), 0, b"0"
        bound = "" if before is None else repr(before)
        while True:
            cursor, gone = self._erase(keys=[members], args=[cursor, ERASE_BATCH, session_id or "", bound])
            n += gone
            if cursor == b"0":
                return n

    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        """An erase of ``scope`` (of ``session_id``) marked; of ids, at once when one call erases them
        all, else marked: every mark first, then the deletes."""
        assert self.erasing is not None
        if ids is None:
            return self.erasing.erase(scope, session_id)
        wanted = sorted(set(ids))
        if len(wanted) <= ERASE_BATCH:
            return self._erased(scope, wanted, session_id, "")
        self.erasing.finish()
        parts = [wanted[i : i + MARK_IDS] for i in range(0, len(wanted), MARK_IDS)]
        marks, n = [Erasure(scope.app_name, scope.user_id, session_id, {"id": {"$in": p}}) for p in parts], 0
        for mark in self._marked(marks):
            n += self._erasure_covered(mark)
            self._erasure_end(mark)
        return n

    def _erased(self, scope: Scope, ids: Sequence[str], session_id: str | None, bound: str) -> int:
        """``ERASE`` of the records ``ids`` of the scope's set (of ``session_id``; saved at or before
        ``bound``, "": whenever), ``ERASE_BATCH`` a call; how many went."""
        members, keys, n = self._set(scope), [f"{self.ns}m:{i}" for i in ids], 0
        for i in range(0, len(keys), ERASE_BATCH):
            n += self._erase(keys=[members, *keys[i : i + ERASE_BATCH]], args=[0, 0, session_id or "", bound])[1]
        return n
