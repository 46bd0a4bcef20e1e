"""The backend contract: what every storage engine behind ``LongTermMemory`` provides.

The seam: what the facade calls on a backend: six async methods (``upsert``, ``search``,
``delete``, ``count``, ``scan``, ``close``). Built-in engines get them from
``longterm.core.engine.Engine`` by implementing blocking primitives; a third-party
backend should do the same (``longterm.testing`` has the contract suite and a guide).
An ``Engine`` is also its store's ledger (``saved``/``mark_saved``/``save``).

What every backend promises:
- ``upsert`` is idempotent by ``record.id``: writing a record twice leaves one record.
  It returns only after the engine confirmed the write (the ledger moves after it), and
  raises a ``LongTermMemoryError`` otherwise.
- ``search``, ``count``, ``scan`` and ``delete`` touch only records of ``scope``. The scope
  goes into the engine's structured filters or escaped query syntax, never pasted raw.
- ``where`` (``core.where``: a filter compiled once) narrows ``search``, ``count`` and ``scan``
  to the records that pass it, applied before ``search``'s top-k cut, never after.
- ``search`` never raises for odd query text (quotes, operators, an empty string); an
  empty or term-less query returns no hits.

Optional hooks, looked up with ``getattr``: ``scopes()`` ((app, user, count) of every user,
for stats and migrate), ``indices()`` (the index names of the store holding records),
``neighbours(scope, anchors, before, after)`` (each hit's session neighbours, read from the
store now: ``core.neighbours``; every ``Engine`` has it, a search without it has no context),
``search_lending(scope, query, top_k, pick, n)`` (what ``search`` answers and ``neighbours`` of
the hits ``pick`` chooses, in one read: the same answer as the two calls, None for the
neighbours when they were not read; the facade asks the two apart without it),
``rewrite(records)`` (an update's write: only over the records of those ids the store still
holds, the ids written; without it an update is an ``upsert``, and one racing an erase may bring
the memory back), ``from_config(config, root)`` (build from ``backend_config``; otherwise the class is called
with ``**config``), ``store_id`` (the store's identity, for a side ledger).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import ClassVar, Protocol, runtime_checkable

from ..records import Hit, MemoryRecord, Scope
from .where import Where


@runtime_checkable
class Backend(Protocol):
    name: ClassVar[str]

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace ``records`` by id; return once the engine confirmed it."""

    async def search(self, scope: Scope, query: str, top_k: int, *, where: Where | None = None) -> list[Hit]:
        """Records of ``scope`` that match ``query`` (and pass ``where``), best first, at most ``top_k``."""

    async def delete(self, scope: Scope, ids: Sequence[str] | None = None, *, session_id: str | None = None) -> int:
        """Delete ``ids``, else the records of ``session_id``, else every record of ``scope``; how many."""

    async def count(self, scope: Scope, *, where: Where | None = None) -> int:
        """How many records ``scope`` has (that pass ``where``)."""

    def scan(self, scope: Scope, batch_size: int = 500, *, where: Where | None = None) -> AsyncIterator[MemoryRecord]:
        """Every record of ``scope`` (that passes ``where``), each exactly once, in a stable order
        of the engine's choosing."""

    async def close(self) -> None:
        """Release connections; the backend is unusable afterwards."""
