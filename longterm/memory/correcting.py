"""Changing a kept memory: its words and metadata (``update``), its lifetime (``extend``), and
sweeping what expired.

The seam: ``Corrector(route)`` over the index a user lives in: ``update(scope, id, text=,
metadata=, merge=, at=)`` writes the memory again under its own id with the new words (full text
and vectors made anew by the engine's write) and ``updated_at``; ``extend(scope, id, expires)``
moves its expiry; ``sweep(scope, at)`` erases what expired by ``at``. Each returns what it did.

Why the ledger learns the id (``lifetimes.SETTLED``) before the write: a save with
``reconsider=True`` writes a session's events again on purpose, and must not bring back the old
words of a corrected memory or one that expired. Why facts are told: facts distilled from the old
words go with them (``FactLayer.erase(superseded=)``), as on an erase; the corrected words are
evidence from now on. Why the write overwrites in place and not an erase then a write: a failure
between the two would lose the memory; an overwrite leaves the old words where an erase would
(each engine's page says where, and ``purge`` compacts). Why ``rewrite`` and not ``upsert``: the
memory was read a moment before; an erase in between (another worker, ``delete_all``, the expiry
sweep) must win, so the engine writes only over a record it still holds, in one step, and an update
that lost returns None as for a memory never there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.errors import guard
from ..core.filters import parse_filter
from ..errors import InvalidInputError
from ..facts import is_fact
from ..records import MemoryRecord, Scope, plain_tree, repair_unicode
from ..sessions import parse_timestamp
from .lifetimes import SETTLED
from .routing import Route


def _content(record: MemoryRecord, text: str) -> dict[str, Any]:
    """``record``'s content with ``text`` as its words: its text parts replaced by one, other parts kept."""
    parts = [p for p in record.content.get("parts", []) if not (isinstance(p, dict) and "text" in p)]
    return {
        **record.content,
        "role": record.content.get("role", record.role or "user"),
        "parts": [{"text": text}, *parts],
    }


def narrowed(filters: Mapping[str, Any] | None, session_id: str | None, before: Any) -> dict[str, Any] | None:
    """The filter of an erase by ``filters``, ``session_id`` and ``before`` (all of them; None: none);
    ``filters`` alone is itself, and checked first otherwise, so an error in it names it as a search's
    does; ``before`` read here, so its error names it (not the filter it becomes)."""
    if filters:
        parse_filter(filters)
        if session_id is None and before is None:
            return dict(filters)
    if before is not None:
        try:
            before = parse_timestamp(before)
        except InvalidInputError as exc:
            raise InvalidInputError(f"before: {exc}") from None
    parts = [
        *([dict(filters)] if filters else []),
        *([{"session_id": session_id}] if session_id is not None else []),
        *([{"timestamp": {"$lt": before}}] if before is not None else []),
    ]
    return {"$and": parts} if parts else None


class Corrector:
    """``update``, ``extend`` and ``sweep`` over one route (see the module docstring)."""

    def __init__(self, route: Route) -> None:
        self.route = route

    async def _found(self, scope: Scope, memory_id: str, at: float) -> MemoryRecord | None:
        record = await self.route.reader.record(scope, memory_id, at)
        return None if record is None or is_fact(record) else record

    async def update(
        self,
        scope: Scope,
        memory_id: str,
        *,
        text: str | None,
        metadata: Mapping[str, object] | None,
        merge: bool,
        at: float,
    ) -> MemoryRecord | None:
        """The memory ``memory_id`` with ``text`` and ``metadata`` (merged into its own with
        ``merge``), written again under its id; None when the user has no such memory (alive)."""
        if text is None and metadata is None:
            raise InvalidInputError("update needs text=, metadata= or both.")
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise InvalidInputError("text must be a non-empty string; to erase a memory, delete it.")
        old = await self._found(scope, memory_id, at)
        if old is None:
            return None
        change: dict[str, Any] = {"updated_at": at}
        if text is not None:  # stored as a save stores it: lone surrogates repaired, metadata as plain JSON
            text = repair_unicode(text)
            change |= {"text": text, "content": _content(old, text)}
        if metadata is not None:
            change["metadata"] = plain_tree({**old.metadata, **metadata} if merge else dict(metadata))
        new = MemoryRecord.model_validate({**old.model_dump(), **change})
        parts = self.route.parts
        with guard("correcting a memory", f"backend {parts.name!r}"):
            await parts.ledger.mark_saved(scope, SETTLED, [memory_id])
            if parts.facts is not None and text is not None:
                await parts.facts.begin_erase(scope, memory_id=memory_id)
            written = await self._rewrite(new)
            if parts.facts is not None and text is not None:
                await parts.facts.erase(scope, superseded={memory_id})
        return new if written else None

    async def extend(self, scope: Scope, memory_id: str, expires: float | None, at: float) -> MemoryRecord | None:
        """The memory ``memory_id`` expiring at ``expires`` (None: never) from now; None when the
        user has no such memory (alive: one that expired cannot be brought back)."""
        old = await self._found(scope, memory_id, at)
        if old is None:
            return None
        new = old.model_copy(update={"expires_at": expires})
        with guard("extending a memory", f"backend {self.route.parts.name!r}"):
            written = await self._rewrite(new)
        return new if written else None

    async def _rewrite(self, new: MemoryRecord) -> bool:
        """``new`` written over its memory where the store still holds it; False when an erase took it
        since it was read (a backend without ``rewrite``: an upsert, always True)."""
        backend = self.route.parts.backend
        rewrite = getattr(backend, "rewrite", None)
        if rewrite is None:
            await backend.upsert([new])
            return True
        return new.id in await rewrite([new])

    async def sweep(self, scope: Scope, at: float, *, dry_run: bool = False) -> int:
        """Erase the user's memories that expired by ``at`` (with an erase's guarantees); how many."""
        parts = self.route.parts
        with guard("reading memories", f"backend {parts.name!r}"):
            gone = [r.id async for r in parts.backend.scan(scope) if r.expires_at is not None and r.expires_at <= at]
        if dry_run or not gone:
            return len(gone)
        with guard("sweeping expired memories", f"backend {parts.name!r}"):
            await parts.ledger.mark_saved(scope, SETTLED, gone)
        return await self.route.eraser.erase(scope, memory_ids=gone)
