"""Which index of the store an (app, user) lives in, and the parts that serve that index.

The seam: ``Router(settings, primary)``; ``await router.route(scope) -> Route`` (the index holding
the scope, its engine, ledger, fact layer and the facade's parts over them), ``router.primary``
(the memory's own index: listings, the simple API's default app), ``router.routes()`` (every
index opened so far: closing, flushing), ``router.home(scope)`` (where a scope is known to live),
``router.ready()`` (the store's one-time join, awaited by ``route`` and by the listings).

The rule (``RULE``, the README's and the CLI's): a memory told an index (``index=``, or
``backend_config["index"]``, or a backend or a ledger given as an instance) uses that index for
every app. A memory not told one finds (app, user) where it lives: the app's own index (the one
``LongTermMemory(app_name=APP)`` writes), else this memory's own, else any other index of the
store holding it; an (app, user) held nowhere yet goes to the app's own index. So
``LongTermMemory()`` and ``LongTermMemory(app_name="travel")`` read and write travel's users in one
index, and the CLI, the MCP server and the UI (which follow the same rule) see them there.

Why find, not only derive: stores written before this rule hold users in the index the memory
that wrote them was opened on (``default_app`` for ``LongTermMemory()``); deriving the index from
the app alone would stop finding them, and moving every user on open would move users out of
an index an application names on purpose. A user split over two indices by that old rule is
joined once on open (``memory.joining``), and ids of another Unicode form than NFC re-keyed: a
memory not told its index runs that (``Router.ready``) before its first routed call or listing.

Why a route per index: an engine, its ledger, its meta and its fact layer are keyed by the
index fixed when the engine opens; a second index is a second engine, opened on first use and
kept until the memory closes. Where a scope lives is remembered for the memory's life: a scope
is only ever created in the app's own index, so every process following the rule agrees.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass

from ..core.backend import Backend
from ..core.ledger import Ledger
from ..errors import BackendError, ConfigurationError
from ..records import Scope
from .erasing import Eraser
from .fact_access import FactAccess
from .joining import join, stamp
from .reading import Reader
from .saving import Saver
from .searching import Searcher
from .settings import MemorySettings
from .wiring import Wiring, wire

RULE = (
    "An app's memories live in one index of a store: the index you name (index=, --index), else the one "
    "that already holds that app's user, else the index named after the app."
)


@dataclass(frozen=True)
class Route:
    """One index of the store and the facade's parts over it."""

    index: str
    parts: Wiring
    saver: Saver
    searcher: Searcher
    reader: Reader
    eraser: Eraser
    facts: FactAccess

    @classmethod
    def over(
        cls,
        parts: Wiring,
        index: str,
        router: Router | None = None,
        ready: Callable[[], Awaitable[None]] | None = None,
        before_save: Callable[[], Awaitable[None]] | None = None,
    ) -> Route:
        """The parts over ``index``; with ``router`` (the memory's own route), each scoped call of
        the saver, searcher and eraser goes on to the route of the index its scope lives in; with
        ``ready``, the reader's listings wait for it first (``Router.ready``); with ``before_save``
        (a memory told its index), each save awaits it first (``Router.stamp``)."""
        if router is None:
            saver, searcher, eraser = Saver(parts, index), Searcher(parts, index), Eraser(parts, index)
            if before_save is not None:
                saver = Saver(parts, index, _after(before_save, saver))
        else:
            on = router.route

            async def to_saver(scope: Scope) -> Saver:
                return (await on(scope)).saver

            async def to_searcher(scope: Scope) -> Searcher:
                return (await on(scope)).searcher

            async def to_eraser(scope: Scope) -> Eraser:
                return (await on(scope)).eraser

            saver, searcher = Saver(parts, index, to_saver), Searcher(parts, index, to_searcher)
            eraser = Eraser(parts, index, to_eraser)
        return cls(index, parts, saver, searcher, Reader(parts, ready), eraser, FactAccess(parts))

    @property
    def backend(self) -> Backend:
        return self.parts.backend

    @property
    def ledger(self) -> Ledger:
        return self.parts.ledger


def _after(step: Callable[[], Awaitable[None]], saver: Saver) -> Callable[[Scope], Awaitable[Saver]]:
    """A saver's ``locate`` that awaits ``step``, then saves with ``saver``."""

    async def located(scope: Scope) -> Saver:
        await step()
        return saver

    return located


@dataclass(frozen=True)
class Located:
    """Where an (app, user) lives: the index, its engine and its ledger (``LongTermMemory.located``)."""

    index: str
    backend: Backend
    ledger: Ledger


def pinned(settings: MemorySettings) -> bool:
    """Whether the memory was told its index (module docstring): then every app uses it."""
    return settings.told_index or not isinstance(settings.backend, str) or settings.ledger is not None


#: Every router alive in this process, for ``_after_fork_in_child`` (weakly: never keeps one alive).
_LIVE: weakref.WeakSet[Router] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """``os.register_at_fork(after_in_child=...)``: the child has only the thread that forked. A join
    its parent was running never ends there (its future stays pending), and the routes' lock may be
    held by a parent's thread: both made anew, so the child's next call joins (a join is safe to run
    again: it is made to be finished after a crash)."""
    for router in list(_LIVE):
        router._lock = threading.Lock()
        if router._joining is not None and not router._joining.done():
            router._joining = None


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Router:
    """The routes of one memory (see the module docstring)."""

    def __init__(self, settings: MemorySettings, primary: Wiring) -> None:
        self.settings = settings
        self.pinned = pinned(settings)
        self._ready = None if self.pinned else self.ready
        # told its index by name (not an engine or a ledger given as an instance): it may look at the others
        self._stamped = not (self.pinned and settings.told_index and isinstance(settings.backend, str))
        self._stamped = self._stamped or settings.ledger is not None
        stamping = None if self._stamped else self.stamp
        self.primary = Route.over(primary, settings.index, None if self.pinned else self, self._ready, stamping)
        self._routes: dict[str, Route] = {settings.index: self.primary}
        self._homes: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()  # routes are opened from any thread or loop the memory serves
        self._joining: Future[None] | None = None
        """The store's one-time join (``ready``): running or done; None: not begun, or it failed."""
        self._joined = self.pinned
        """Whether ``ready`` has nothing left to do (read without the lock: it only turns True)."""
        _LIVE.add(self)

    def routes(self) -> list[Route]:
        """Every index opened so far, this memory's own first."""
        with self._lock:
            return list(self._routes.values())

    def opened(self, index: str) -> Route:
        """The route of ``index``, its engine opened on first use."""
        with self._lock:
            route = self._routes.get(index)
            if route is None:
                route = self._routes[index] = Route.over(wire(self.settings, index=index), index, ready=self._ready)
            return route

    async def release(self, index: str) -> None:
        """Close the route of ``index`` (never the memory's own) opened for a look; the next use opens it again."""
        if index == self.primary.index:
            return
        with self._lock:
            route = self._routes.pop(index, None)
        if route is not None:
            await close_route(route)

    async def ready(self) -> None:
        """Once per memory not told its index, before its first routed call or listing: the store
        joined (``memory.joining``). Calls from any loop or thread wait for the one running; a join
        that failed (or was cancelled) is tried again by the next call."""
        while not self._joined:
            with self._lock:
                joining, mine = self._joining, self._joining is None
                if joining is None:
                    joining = self._joining = Future()
            if mine:
                try:
                    await join(self)
                except BaseException as exc:
                    with self._lock:
                        self._joining = None
                    if isinstance(exc, Exception):
                        joining.set_exception(exc)
                    else:  # cancelled: the waiters try again
                        joining.cancel()
                    raise
                self._joined = True
                joining.set_result(None)
                return
            if joining.done() and not joining.cancelled():
                joining.result()  # a success (a failure left the slot empty), or the failure it met
                return
            try:
                await asyncio.wrap_future(joining)
                return
            except asyncio.CancelledError:
                if not joining.cancelled():
                    raise  # this caller was cancelled
                # the one running was cancelled: try again

    async def stamp(self) -> None:
        """Before the first save of a memory told its index: that index marked joined when it is new
        (``joining.stamp``), so a later memory not told its index joins nothing it split on purpose."""
        if not self._stamped:
            await stamp(self)
            self._stamped = True

    def home(self, scope: Scope) -> str | None:
        """The index ``scope`` is known to live in (None: not looked for yet)."""
        if self.pinned:
            return self.primary.index
        return self._homes.get((scope.app_name, scope.user_id))

    async def route(self, scope: Scope) -> Route:
        """The route of the index ``scope`` lives in, by ``RULE``."""
        if not self._joined:
            await self.ready()
        index = self.home(scope)
        if index is None:
            index = await self._find(scope)
            with self._lock:
                index = self._homes.setdefault((scope.app_name, scope.user_id), index)
        return self.opened(index)

    async def _find(self, scope: Scope) -> str:
        own = self.opened(scope.app_name)
        if await own.reader.count(scope):
            return own.index
        if self.primary.index != own.index and await self.primary.reader.count(scope):
            return self.primary.index
        for name in await self._others({own.index, self.primary.index}):
            if await self._holds(name, scope):
                return name
        return own.index

    async def _others(self, skip: set[str]) -> list[str]:
        """The store's other indices holding memories ([] when its engine cannot list them)."""
        try:
            names = await self.primary.reader.indices()
        except (ConfigurationError, BackendError):  # cannot list them (no primitive, mem0's platform)
            return []  # the store answered the counts just before: an outage would have failed there
        return [n for n in names if n not in skip]

    async def _holds(self, index: str, scope: Scope) -> bool:
        """Whether ``index`` holds ``scope``; a probe that finds nothing is closed at once."""
        with self._lock:
            kept = index in self._routes
        route = self.opened(index)
        if await route.reader.count(scope):
            return True
        if not kept:
            await self.release(index)
        return False


async def close_route(route: Route) -> None:
    """Release one route's fact layer, engine and own ledger, in that order."""
    parts = route.parts
    try:
        if parts.facts is not None:
            await parts.facts.close()
    finally:
        try:
            await parts.backend.close()
        finally:
            if parts.own_ledger is not None:
                await parts.own_ledger.close()
