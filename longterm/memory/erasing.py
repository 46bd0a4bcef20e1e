"""Erasing: one memory, one session's memories, or every memory of a user, and the facts they alone support.

The seam: ``Eraser(parts).erase(scope, memory_id=, session_id=)`` deletes and returns how
many records went (the facts that followed their evidence counted too).

Why in this order: the fact layer marks the erase first, so a distillation running anywhere
follows it instead of writing facts of erased words; then the records go; then the facts
whose evidence went. The ledger is left as it is: what a user erased stays erased, and a
live session's next save writes only its new events.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager

from .. import telemetry
from ..core.errors import guard
from ..records import Scope
from .wiring import Wiring


class Eraser:
    """A memory's erasures (see the module docstring)."""

    def __init__(self, parts: Wiring, index: str, locate: Callable[[Scope], Awaitable[Eraser]] | None = None) -> None:
        self.parts = parts
        self.backend_name, self.index = parts.name, index  # what telemetry labels an erase with
        self.locate = locate
        """The eraser of the index a scope lives in (``memory.routing``); None: this one."""

    def _guard(self, what: str) -> AbstractContextManager[None]:
        return guard(what, f"backend {self.backend_name!r}")

    @telemetry.erasing
    async def erase(
        self,
        scope: Scope,
        *,
        memory_id: str | None = None,
        session_id: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> int:
        """Delete ``memory_id`` (or the records ``memory_ids``), else the memories of
        ``session_id``, else all of ``scope``; how many went."""
        target = self if self.locate is None else await self.locate(scope)
        backend, facts = target.parts.backend, target.parts.facts
        if memory_ids is not None and not memory_ids:
            return 0
        if facts is not None:  # marked first: distilling anywhere follows the erase
            with self._guard("erasing facts"):
                await facts.begin_erase(scope, session_id=session_id, memory_id=memory_id, memory_ids=memory_ids or ())
        with self._guard("deleting memories"):
            if memory_ids is not None:
                deleted = await backend.delete(scope, list(memory_ids))
            elif memory_id is not None:
                deleted = await backend.delete(scope, [memory_id])
            elif session_id is not None:
                deleted = await backend.delete(scope, session_id=session_id)
            else:
                return await backend.delete(scope)
        if facts is not None:  # then the facts follow their evidence
            with self._guard("erasing facts"):
                deleted += await facts.erase(scope)
        return deleted
