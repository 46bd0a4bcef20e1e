"""A memory's automatic saving and closing: the auto-savers it flushes, and its release.

The seam: ``Closing``, a base of ``MemoryService`` (its methods only, no fields): ``auto_saver``,
``release``, ``unsaved_events``, ``flush`` (``drain``), ``close``/``close_sync`` and the context
managers, over the memory's ``Lifecycle`` (``memory.lifecycle``).

Why apart: one job (a memory's end), and the service stays a size one can read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from typing_extensions import Self

from .._sync import sync_twin
from ..autosave import AutoSaver

if TYPE_CHECKING:
    from .._sync import SyncPortal
    from ..ports import MemoryPort
    from .lifecycle import Lifecycle
    from .sweeping import Sweeps


class Closing:
    """What ends a memory, and what saves for it on the way (see the module docstring)."""

    if TYPE_CHECKING:  # ``MemoryService``'s
        _life: Lifecycle
        _sweeps: Sweeps

        @property
        def portal(self) -> SyncPortal: ...

    def auto_saver(self, **options: Any) -> AutoSaver:
        """A new ``AutoSaver`` for this memory (options: see ``longterm.autosave``); ``flush`` drains them all.

        The memory refers to it weakly: it lives as long as its owner (e.g. an agent) holds it.
        """
        return self._life.add(AutoSaver(cast("MemoryPort", self), **options))

    def release(self, saver: AutoSaver) -> None:
        """Stop flushing ``saver`` with this memory (an agent that closed); unknown savers are ignored."""
        self._life.release(saver)

    def unsaved_events(self) -> int:
        """Events automatic saving has seen and not saved yet, over every auto-saver of this memory."""
        return self._life.unsaved_events()

    async def flush(self) -> None:
        """Save every unsaved tail that automatic saving knows of, raise if one fails; then wait
        for the fact layer (whose failures are retried, never raised here: see ``flush_facts``)."""
        failure = await self._life.flush_savers()
        if failure is not None:
            raise failure
        await self._life.flush_facts()

    drain = flush
    flush_sync = sync_twin(flush)

    async def close(self, *, flush: bool = True) -> None:
        """Save what automatic saving still holds (unless ``flush=False``), then release the store,
        every thread and connection (and a ledger of its own); a second close does nothing.

        With the store down the release still happens, first; then one ``BackendUnavailableError``
        says how many events went unsaved and how to recover them (``recover_sessions``)."""
        self._sweeps.cancel()
        await self._life.close(flush=flush)

    def close_sync(self, *, flush: bool = True) -> None:
        try:
            self.portal.call(self.close(flush=flush))
        finally:
            self.portal.stop()  # kept: a later *_sync call runs on its own and hears "closed"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_sync()
