"""mem0's writes: a save's memories added or written over, and an update's written only over one still there.

The seam: ``Mem0Writes``, a base of ``Mem0Backend``, implements the engine's ``_write`` and
``_rewrite`` over mem0's ``add`` and ``update``, each under the path's lock (``_serial``).
``scope_user(scope)`` is mem0's ``user_id`` of a scope. Each memory's record rides in its
metadata with its ``record_id``, looked up first (``_items``): a replay adds nothing, and an
inferred fact (``infer=True``) is never written over. A write stamps each memory with the
store's clock (``mem0_erasing.SAVED``); a rewrite keeps the stamp the memory had.

Why a rewrite looks its memory up under the lock and through the erasure marks: an update read
the memory a moment before; an erase since then (done, or marked and under way) must win, so
a memory gone or covered by a mark is not written, and one written over keeps its old stamp,
so an erase that began before still covers and deletes it. mem0 has no conditional write: two
processes on one vector store server can still interleave between the look-up and the write.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from typing_extensions import override

from ..core.aliases import Records, Vectors
from ..core.engine import Engine
from ..core.scope import scope_key
from ..records import MemoryRecord, Scope
from .mem0_erasing import SAVED, Pairs, stamp
from .mem0_filters import EXPIRY, filter_keys

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..config.backends import Mem0Config
    from .mem0_erasing import Mem0Ledger


def scope_user(scope: Scope) -> str:
    return "lt-" + scope_key(scope.app_name, scope.user_id)


class Mem0Writes(Engine):
    """The writes of ``Mem0Backend`` (see the module docstring)."""

    if TYPE_CHECKING:  # ``Mem0Backend``'s
        _mem: Any
        _adapter: Any
        cfg: Mem0Config
        marks_book: Mem0Ledger
        _no_filters: str | None

        def _serial(self) -> AbstractContextManager[Any]: ...

        def _items(self, scope: Scope, where: Any = None, hide: bool = True, **filters: Any) -> Pairs: ...

        def _note_expiring(self, records: Sequence[MemoryRecord]) -> None: ...

    @override
    def _write(self, records: Records, vectors: Vectors) -> None:
        with self._serial():
            self._write_now(records)

    @override
    def _rewrite(self, records: Records, vectors: Vectors) -> list[str]:
        with self._serial():
            return self._write_now(records, over=True)

    def _write_now(self, records: Sequence[MemoryRecord], over: bool = False) -> list[str]:
        """Write ``records`` (``over``: only over memories still there and not covered by an erasure
        mark, keeping their stamps); the ids of the records that were there."""
        by_scope: dict[Scope, dict[str, MemoryRecord]] = {}
        for r in records:  # keyed by the ids the record holds (a record of an older store: not NFC)
            by_scope.setdefault(Scope.stored(r.app_name, r.user_id), {})[r.id] = r
        todo: list[tuple[Scope, MemoryRecord, dict[str, Any], dict[str, Any] | None]] = []
        there: list[str] = []
        for scope, recs in by_scope.items():
            found = {r.id: i for i, r in self._items(scope, record_id={"in": list(recs)})}
            there += [rid for rid in recs if rid in found]
            for r in recs.values():
                meta: dict[str, Any] = {"record_id": r.id, "app_name": r.app_name, "longterm": r.model_dump_json()}
                meta.update(filter_keys(r) if self._no_filters is None else {})
                old = found.get(r.id)  # a replay changes nothing; an inferred fact is not rewritten
                if old is not None and EXPIRY in (old.get("metadata") or {}):
                    meta.setdefault(EXPIRY, None)  # mem0 merges a rewrite's metadata into the old
                changed = old is not None and (old.get("metadata") or {}).get("longterm") != meta["longterm"]
                if (old is None and not over) or (changed and not self.cfg.infer):
                    todo.append((scope, r, meta, old))
        self._note_expiring([t[1] for t in todo])
        now = self.marks_book.tick() if todo and not over else 0  # the store's clock (``mem0_erasing``)
        for _, _, meta, old in todo:
            meta[SAVED] = (stamp((old or {}).get("metadata") or {}) or 0) if over else now
        adapter = None if self.cfg.infer else self._adapter  # verbatim: the texts are what mem0 embeds
        with adapter.ahead([t[1].text for t in todo]) if adapter else nullcontext():
            for scope, r, meta, old in todo:
                if old is not None:
                    self._mem.update(old["id"], text=r.text, metadata=meta)
                    continue
                message = [{"role": "assistant" if r.role == "model" else "user", "content": r.text}]
                self._mem.add(message, user_id=scope_user(scope), metadata=meta, infer=self.cfg.infer)
        return there
