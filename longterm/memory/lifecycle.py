"""A memory's life: its background loop, the auto-savers it flushes, and closing in the one safe order.

The seam: ``Lifecycle(router)`` holds the memory's ``portal`` (its own loop, started on first
use), the auto-savers it knows of (weakly: ``add``, ``release``), ``flush_savers()``,
``flush_facts()``, ``unsaved_events()`` and ``close(flush=)`` (of every index the memory
opened, ``memory.routing``); ``is_open`` is False once a close began.
``unsaved_error`` is the one error of a close that could not save.

Why this order on close: what automatic saving holds is saved first (the store is still
open); then no saver may post again; then the fact layer, the store and a ledger of its own
are released; the loop stops last, after the release, even when the store failed. A close
that could not save says how many events went unsaved and how to recover them, once.

Why a loop of the memory's own: automatic saving runs there, so its saves and timers outlive
a caller's loop (ADK's ``Runner.run`` runs each turn in an ``asyncio.run`` of its own), and
the blocking twins (``*_sync``) work where a loop is already running.
"""

from __future__ import annotations

import asyncio
import threading
import weakref

from .._sync import SyncPortal
from ..autosave import AutoSaver
from ..core.errors import guard
from ..errors import BackendUnavailableError
from .routing import Router, close_route


def unsaved_error(
    unsaved: int, cause: BaseException, released: str = "Everything was released."
) -> BackendUnavailableError:
    """The one error of a close that could not save: how many events, why, how to recover them."""
    return BackendUnavailableError(
        f"closed with {unsaved} events unsaved: the store could not take them ({type(cause).__name__}: {cause}). "
        f"{released} The events are still in your session service: at the next start, "
        "await memory.recover_sessions(session_service, app_name=...) saves what the store has not seen "
        "(close(flush=False) closes without trying to save)."
    )


class Lifecycle:
    """The background loop, the auto-savers and the close of one memory (see the module docstring)."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.closed = False
        self.savers: weakref.WeakSet[AutoSaver] = weakref.WeakSet()
        self._portal: SyncPortal | None = None
        self._portal_lock = threading.Lock()

    @property
    def portal(self) -> SyncPortal:
        """The memory's own loop, in a thread of its own, started on first use; stopped by close."""
        with self._portal_lock:
            if self._portal is None:
                self._portal = SyncPortal()
            return self._portal

    def add(self, saver: AutoSaver) -> AutoSaver:
        self.savers.add(saver)
        return saver

    def release(self, saver: AutoSaver) -> None:
        self.savers.discard(saver)

    def unsaved_events(self) -> int:
        """Events automatic saving has seen and not saved yet, over every auto-saver."""
        return sum(saver.pending() for saver in list(self.savers))

    async def flush_savers(self) -> Exception | None:
        """Flush every auto-saver; the first failure (the others are flushed all the same)."""
        first = None
        for saver in list(self.savers):
            try:
                await saver.flush()
            except Exception as exc:
                first = first or exc
        return first

    async def flush_facts(self) -> int:
        """Wait for every index's fact layer; how many records still wait over them all."""
        return sum([await route.facts.flush() for route in self.router.routes()])

    async def close(self, *, flush: bool) -> None:
        """Close in the order of the module docstring; a second close does nothing."""
        if self.closed:
            return
        failure = await self.flush_savers() if flush else None
        unsaved = self.unsaved_events()
        self.closed = True
        for saver in list(self.savers):
            saver.close()  # no timer may save into a closed store
        try:
            first: BaseException | None = None
            for route in self.router.routes():  # each released, even after another failed
                try:
                    with guard("closing", f"backend {route.parts.name!r}"):
                        await close_route(route)
                except Exception as exc:
                    first = first or exc
            if first is not None:
                raise first
        finally:
            portal = self._portal
            if portal is not None and not portal.mine():  # on its own loop (close_sync): stopped after
                await asyncio.to_thread(portal.stop)
        if failure is not None and unsaved:
            raise unsaved_error(unsaved, failure) from failure
