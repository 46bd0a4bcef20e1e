"""The fact layer: evidence in, facts out, in the background, exactly once.

The seam: ``FactLayer(backend, ledger, config)``. The facade calls ``schedule(scope,
records)`` after every save (it only queues: a reply never waits for a model), ``flush()``
to wait for what is queued, and the read and maintenance calls (``profile``, ``facts``,
``history``, ``consolidate``, ``rebuild``, ``begin_erase`` and ``erase``); ``last_error``
says why the last batch failed. Everything goes through the backend contract (``upsert``,
``search``, ``delete``, ``scan``) and the store's own ledger (``saved``/``mark_saved``): no
engine knows facts exist.

Why a composition of rooms of one job: the ``Worker`` (``worker``) is the thread, its loop
and the queue with its retries; the ``Distiller`` (``distill``) turns evidence into facts;
``Erasures`` (``erasure``) keeps the erasure marks and makes facts follow their evidence;
``reading`` reads facts from the store; ``Maintenance`` (``maintenance``) consolidates and
rebuilds. This class only wires them and says which runs where: distilling, erasing and
maintenance on the worker's loop (maintenance while no batch runs), reads on the caller's.

Why those rooms are imported when a layer is built, not with this module: the facade names
``FactLayer`` whether or not facts are on, and facts are opt-in; a memory without a model
configured never builds one, so it never loads the distiller, the erasure marks,
maintenance or the worker.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..core.backend import Backend
from ..core.ledger import Ledger
from ..records import MemoryRecord, Scope
from . import reading
from .llm import ChatModel, FactsConfig
from .model import Fact, is_fact


class FactLayer:
    def __init__(self, backend: Backend, ledger: Ledger, config: FactsConfig, model: ChatModel | None = None) -> None:
        from .distill import Distiller  # the layer's machinery: loaded once facts are on (module docstring)
        from .erasure import Erasures
        from .maintenance import Maintenance
        from .worker import Worker

        self.backend = backend
        self.ledger = ledger
        self.config = config
        self.model = model or ChatModel(config)
        self._worker = Worker(self._work, config.retry_seconds)
        self._erasures = Erasures(backend, ledger)
        self._distiller = Distiller(backend, ledger, self._erasures, self._worker.add, config, self.model)
        self._maintenance = Maintenance(backend, config, self.model, self._erasures, self._distiller)

    @property
    def last_error(self) -> str | None:
        """Why the last batch failed (None once a pass succeeded)."""
        return self._worker.last_error

    async def _work(self, scope: Scope, queued: dict[str, MemoryRecord]) -> None:
        await self._distiller.catch_up(scope, queued)

    # -- the queue --------------------------------------------------------------------------

    def schedule(self, scope: Scope, records: list[MemoryRecord]) -> None:
        """Queue saved evidence for distilling; returns at once, never raises."""
        self._worker.put(scope, [r for r in records if not is_fact(r)])

    def pending(self) -> int:
        """Evidence records waiting in this process's queue (a user whose records are still to
        be read counts one); 0 when nothing waits."""
        return self._worker.pending()

    async def catch_up(self, scope: Scope) -> int:
        """Distil whatever evidence of the user the ledger has not seen distilled (after a
        restart, with no new save to trigger it); return how many records still wait."""
        self._distiller.rescan(scope)
        self._worker.add(scope, [])
        return await self.flush()

    async def flush(self) -> int:
        """Wait until what is queued was tried once more; return how many records still wait."""
        await self._worker.flush()
        return self.pending()

    # -- reading ----------------------------------------------------------------------------

    async def facts(self, scope: Scope, *, current: bool = True, as_of: float | None = None) -> list[Fact]:
        """The user's facts, oldest first: the current ones, those valid at ``as_of``, or
        (``current=False``) all of them, superseded included."""
        return await reading.facts(self.backend, scope, current=current, as_of=as_of)

    async def profile(self, scope: Scope) -> str:
        """The current facts as a compact list: the user's own first, then others'."""
        return await reading.profile(self.backend, scope, self.config.profile_chars)

    async def history(self, scope: Scope, fact_id: str) -> list[dict[str, Any]]:
        """The trail of ``fact_id``: the facts it replaced, itself, and what replaced it, oldest first."""
        return await reading.history(self.backend, scope, fact_id)

    # -- erasing ----------------------------------------------------------------------------

    async def begin_erase(
        self,
        scope: Scope,
        *,
        session_id: str | None = None,
        memory_id: str | None = None,
        memory_ids: Collection[str] = (),
    ) -> None:
        """Before evidence of ``session_id`` (or the record ``memory_id``, or the records
        ``memory_ids``; none: the whole user) is deleted: add erasure marks to the ledger, so work
        in flight anywhere follows the erase, and drop that evidence from this process's queue.
        Never waits for a model."""
        await self._worker.run(self._begin_erase(scope, session_id, memory_id, memory_ids))

    async def _begin_erase(
        self, scope: Scope, session_id: str | None, memory_id: str | None, memory_ids: Collection[str]
    ) -> None:
        erased = await self._erasures.begin(scope, session_id=session_id, memory_id=memory_id, memory_ids=memory_ids)
        self._worker.drop(scope, erased)

    async def erase(self, scope: Scope, superseded: Collection[str] = ()) -> int:
        """After evidence was deleted (``begin_erase`` first): the facts follow it; return how
        many facts went. ``superseded``: records whose words were corrected (``update``), whose
        facts go as if they were erased."""
        return await self._worker.run(self._erasures.erase(scope, superseded))

    # -- maintenance ------------------------------------------------------------------------

    async def rebuild(self, scope: Scope, **overrides: Any) -> dict[str, int]:
        """Replace the user's facts with facts distilled afresh from all evidence, oldest first;
        ``overrides`` change the config for this run (another ``model``, ``base_url``, prompt).
        The new facts are made in memory: until all of it worked, the old ones stay."""
        return await self._worker.run(self._maintenance.rebuild(scope, overrides), alone=True)

    async def consolidate(self, scope: Scope) -> dict[str, int]:
        """Merge duplicates and resolve contradictions among the user's current facts: the model
        names pairs (keep, drop); the dropped fact is superseded by the kept one, which takes its
        evidence. Same-text duplicates merge without asking. Returns current facts before and after."""
        return await self._worker.run(self._maintenance.consolidate(scope), alone=True)

    async def close(self) -> None:
        """Stop the worker (what it did not finish is done by the next process) and the model."""
        await self._worker.close(self.model.aclose)
