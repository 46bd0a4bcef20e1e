"""The Redis engine's erases: a scope's or a session's in marked steps, and one of ids at once.

The seam: ``RedisErasures``, a base of ``RedisBackend``, implements ``_remove`` (ids: one
``ERASE`` call per ``ERASE_BATCH`` keys) and ``core.erasures``' four primitives: ``MARK`` writes
an erase's mark in its scope's ``ns e:<tag>`` hash at the store's clock (``ns meta``'s ``clock``,
which every save script moves too, so "saved before the erase" is exact on one server) and lists
the scope in ``ns erasing``; ``ERASE`` calls, ``ERASE_BATCH`` records each, delete what the mark
covers (of its session, saved at or before its clock); ``UNMARK`` removes it.

Why marked: an erase of 20,000 records is 40 script calls. Killed between two, it left the user
half erased and searchable; now every read leaves out what the mark covers (``reads``) until the
next erase or open finishes it (``core.erasures``), and a save made after the mark is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import override

from ...core.erasures import Erasure, ErasureMarks
from ...records import Scope
from .scripts import ERASE_BATCH


class RedisErasures(ErasureMarks):
    """The erase primitives of ``RedisBackend`` (see the module docstring)."""

    if TYPE_CHECKING:  # ``RedisBackend``'s
        _r: Any
        ns: str
        _erase: Any
        _mark: Any
        _unmark: Any

        def _tag(self, app_name: str, user_id: str) -> str: ...

        def _set(self, scope: Scope) -> str: ...

        def _marks_key(self, tag: str) -> str: ...

    @property
    def _erasing_key(self) -> str:
        """The set of the tags of scopes holding erasure marks."""
        return f"{self.ns}erasing"

    @override
    def _erasure_begin(self, erasure: Erasure) -> Erasure:
        tag = self._tag(erasure.app_name, erasure.user_id)
        keys = [f"{self.ns}meta", self._marks_key(tag), self._erasing_key]
        return erasure.stamped(float(self._mark(keys=keys, args=[erasure.spec(), tag])))

    @override
    def _erasure_covered(self, erasure: Erasure) -> int:
        return self._sweep(erasure.scope, erasure.session_id, erasure.before)

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
        if ids is None:
            return self._sweep(scope, session_id, None)
        members, keys, n = self._set(scope), [f"{self.ns}m:{i}" for i in ids], 0
        for i in range(0, len(keys), ERASE_BATCH):
            n += self._erase(keys=[members, *keys[i : i + ERASE_BATCH]], args=[0, 0, "", ""])[1]
        return n
