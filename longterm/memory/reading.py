"""Reading a store without a query: one memory, a page by time, every record, counts and listings.

The seam: a ``Reader`` over one memory's parts with ``get(scope, id)``, ``page(scope, limit,
cursor, newest_first)`` (one ``get_all`` page and the cursor of the next), ``scan(scope)``,
``count(scope)``, ``scopes()`` and ``indices()``; ``as_memory(record, hit)`` is the simple
API's ``Memory`` of a record (a fact or evidence).

Why a cursor is opaque (base64 of the engine's position and the direction): a caller can only
pass back what a page gave, and a cursor of one direction is refused in the other, where it
would skip or repeat memories.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any

from ..core.engine import sorted_page
from ..core.errors import guard
from ..core.where import Where, takes_where
from ..errors import ConfigurationError, InvalidInputError
from ..facts.model import is_fact
from ..records import Hit, Memory, MemoryPage, MemoryRecord, Scope
from .wiring import Wiring


def as_memory(record: MemoryRecord, hit: Hit | None = None) -> Memory:
    """The simple API's ``Memory`` of ``record`` (a fact or evidence), with its hit's scores."""
    return Memory.of(record, kind="fact" if is_fact(record) else "evidence", hit=hit)


def make_cursor(position: Any, newest_first: bool) -> str:
    """An opaque ``get_all`` cursor: the engine's position after a page, and the direction."""
    raw = json.dumps({"n": newest_first, "at": position}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _position(at: object) -> bool:
    """Whether ``at`` is a position a page ends at: [its time, its id or row] (every engine's
    ``page_by_time``), so a cursor edited by hand is refused here, not failed in an engine."""
    if not isinstance(at, list) or len(at) != 2 or any(isinstance(x, bool) for x in at):
        return False
    time, key = at
    return (
        isinstance(time, (int, float))
        and math.isfinite(time)
        and (isinstance(key, str) or (isinstance(key, int) and abs(key) < 2**63))
    )


def read_cursor(cursor: object, newest_first: bool) -> Any:
    """The engine's position of a ``get_all`` cursor (None: from the start)."""
    if cursor is None:
        return None
    try:
        if not isinstance(cursor, str):
            raise ValueError
        body = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(body, dict) or body.get("n") is not newest_first or not _position(body.get("at")):
            raise ValueError
        return body["at"]
    except (ValueError, TypeError):
        raise InvalidInputError(
            f"cursor {cursor!r} is not a cursor of get_all in this direction; pass None or a page's next_cursor."
        ) from None


class Reader:
    """What a memory reads without a query (see the module docstring)."""

    def __init__(self, parts: Wiring, ready: Callable[[], Awaitable[None]] | None = None) -> None:
        self.parts = parts
        self.ready = ready
        """Awaited before a listing (``scopes``, ``indices``): the store's one-time join (``memory.routing``)."""

    def _guard(self, what: str) -> AbstractContextManager[None]:
        return guard(what, f"backend {self.parts.name!r}")

    async def get(self, scope: Scope, memory_id: str, at: float | None = None) -> Memory | None:
        """The scope's memory with id ``memory_id`` (None: there is none, or it expired by ``at``)."""
        record = await self.record(scope, memory_id, at)
        return None if record is None else as_memory(record)

    async def record(self, scope: Scope, memory_id: str, at: float | None = None) -> MemoryRecord | None:
        """The scope's record with id ``memory_id`` (None: there is none, or it expired by ``at``)."""
        with self._guard("reading memories"):
            async for rec in self.parts.backend.scan(scope):
                if rec.id == memory_id:
                    alive = at is None or rec.expires_at is None or rec.expires_at > at
                    return rec if alive else None
        return None

    async def page(
        self, scope: Scope, limit: int, cursor: object, newest_first: bool, where: Where | None = None
    ) -> MemoryPage:
        """One page of the scope's memories by time (that pass ``where``), and the cursor of the next
        (one engine call)."""
        at = read_cursor(cursor, newest_first)
        pager = getattr(self.parts.backend, "page_by_time", None)
        with self._guard("reading memories"):
            if pager is not None and (where is None or takes_where(pager)):
                filtered = {} if where is None else {"where": where}
                page, nxt = await pager(scope, at, limit, newest_first=newest_first, **filtered)
            elif pager is not None:  # a backend that takes no filter: its page, checked here (maybe short)
                page, nxt = await pager(scope, at, limit, newest_first=newest_first)
                page = [r for r in page if where is None or where.admits(r)]
            else:  # a backend of the bare protocol: read the scope, sort it
                records = [r async for r in self.parts.backend.scan(scope) if where is None or where.admits(r)]
                page, nxt = sorted_page(records, at, limit, newest_first)
        return MemoryPage(
            memories=[as_memory(r) for r in page],
            next_cursor=None if nxt is None else make_cursor(nxt, newest_first),
        )

    async def scan(self, scope: Scope, where: Where | None = None) -> AsyncIterator[MemoryRecord]:
        """Every record of the scope (that passes ``where``)."""
        backend = self.parts.backend
        with self._guard("reading memories"):
            if where is None or not takes_where(backend.scan):
                async for rec in backend.scan(scope):
                    if where is None or where.admits(rec):  # a backend that takes no filter: checked here
                        yield rec
                return
            async for rec in backend.scan(scope, where=where):
                yield rec

    async def count(self, scope: Scope, where: Where | None = None) -> int:
        """How many records the scope holds (that pass ``where``)."""
        backend = self.parts.backend
        if where is not None and not takes_where(backend.count):  # it takes no filter: counted here
            return sum([1 async for _ in self.scan(scope, where)])
        with self._guard("counting memories"):
            return await (backend.count(scope) if where is None else backend.count(scope, where=where))

    async def scopes(self, at: float | None = None) -> list[tuple[str, str, int]]:
        """(app, user, count) of every user with memories in the memory's index; ``at``: of those alive
        then (a backend that is no ``Engine`` counts them all)."""
        if self.ready is not None:
            await self.ready()
        lister = getattr(self.parts.backend, "scopes", None)
        if lister is None:
            raise ConfigurationError(f"backend {self.parts.name!r} cannot list its users; pass an app and a user.")
        with self._guard("listing users"):
            found = await (lister() if at is None or self.parts.engine is None else lister(at))
            return [(str(a), str(u), int(n)) for a, u, n in found]

    async def indices(self) -> list[str]:
        """The index names of the store (its location and prefix) that hold memories."""
        if self.ready is not None:
            await self.ready()
        lister = getattr(self.parts.backend, "indices", None)
        if lister is None:
            raise ConfigurationError(f"backend {self.parts.name!r} cannot list its indices; pass --index.")
        with self._guard("listing indices"):
            return sorted(str(i) for i in await lister())
