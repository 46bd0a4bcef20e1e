"""Blocking wrappers for scripts: run coroutines on one private event loop thread.

The seam: ``SyncPortal().call(coro)`` blocks until ``coro`` finished on the portal's loop;
``await run(coro)`` runs it there from another loop, ``post(fn)`` without waiting (automatic
saving lives there: its saves and timers outlive a caller's short-lived loops); ``stop()``
ends the loop once every call in flight has ended; a call after that runs on a loop of its
own (a closed memory answers it at once: "closed", or nothing to do for a second close).
``sync_twin(method)`` writes a blocking twin of an async method once, typed as the method is:
``search_sync = sync_twin(search)`` in a class whose instances have a ``portal``.

Why a loop in a thread of its own instead of ``asyncio.run`` per call: it lets the wrappers
work even where a loop is already running (Jupyter, an async web handler calling a sync
helper). Engines bind nothing to a loop (``core.engine``), so the wrappers and async code
may use one memory at once.

Lifetimes and fork: a dropped portal's loop ends (a ``weakref.finalize`` stops it; the loop's
thread holds the loop, never the portal). In a child of ``os.fork`` the loop's thread does not
exist: every live portal forgets its loop there (``_after_fork``, run by ``os.register_at_fork``)
and starts a new one on first use, so a sync call in the child runs instead of waiting forever.

Why ``stop`` drains: other threads may be blocked in ``call`` when one thread closes the
memory. A loop stopped under them would never resolve their futures (they would wait
forever), so ``stop`` lets their calls finish (closed engines fail them at once), cancels
what is left after a grace period, and fails any future the loop could not resolve.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from typing_extensions import TypeVarTuple, Unpack

from .errors import BackendError

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")
Ts = TypeVarTuple("Ts")

#: Seconds ``stop`` lets calls of other threads finish before cancelling them.
STOP_GRACE = 10.0
#: Seconds ``stop`` waits for cancelled calls to unwind, and for the loop thread to end.
_UNWIND = 2.0

_CLOSED_WHILE = "the memory was closed while this call ran; open a new LongTermMemory and retry it there."


#: Every portal alive in this process, for ``_after_fork_in_child`` (weakly).
_LIVE: weakref.WeakSet[SyncPortal] = weakref.WeakSet()
#: What a forked child inherited from the parent's portals: kept, never closed or stopped.
_ORPHANS: list[tuple[asyncio.AbstractEventLoop | None, threading.Thread | None]] = []


class SyncPortal:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._calls: set[concurrent.futures.Future[Any]] = set()
        self._ender: weakref.finalize[Any, Any] | None = None
        _LIVE.add(self)

    def _start(self) -> asyncio.AbstractEventLoop:
        """The portal's loop, started on first use (call with ``_lock`` held)."""
        if self._loop is None:
            # Made in a context of its own: its handles keep the context they are made in alive.
            loop = contextvars.Context().run(asyncio.new_event_loop)
            thread = threading.Thread(target=_serve, args=(loop,), name="longterm-sync", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
            self._ender = weakref.finalize(self, _end, loop)
            self._ender.atexit = False  # at exit the daemon thread just stops, as before
        return self._loop

    def _after_fork(self) -> None:
        """In a forked child: the loop's thread is the parent's; forget the loop (unclosed: its
        descriptors are shared with the parent's) and start a new one on first use."""
        if self._ender is not None:
            self._ender.detach()
        _ORPHANS.append((self._loop, self._thread))
        self._loop = self._thread = self._ender = None
        self._lock = threading.Lock()
        self._calls = set()

    def mine(self) -> bool:
        """The caller runs on the portal's own thread."""
        return threading.current_thread() is self._thread

    def post(self, fn: Callable[[Unpack[Ts]], object], *args: Unpack[Ts]) -> bool:
        """Run ``fn(*args)`` soon on the portal's loop, from any thread, without waiting; False once stopped.

        In a context of its own: the caller's context variables (a framework's request state) are
        not the background's, and must not be kept alive by its timers."""
        with self._lock:
            if not self._stopped:
                self._start().call_soon_threadsafe(fn, *args, context=contextvars.Context())
            return not self._stopped

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` run on the portal's loop, from any other loop (on the portal's own, or
        once stopped: right here). ``stop`` lets it finish as it does a ``call``."""
        with self._lock:
            loop = None if self._stopped else self._start()
            future = None
            if loop is not None and threading.current_thread() is not self._thread:
                future = asyncio.run_coroutine_threadsafe(coro, loop)
                self._calls.add(future)
        if future is None:
            return await coro
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if self._stopped and future.cancelled():
                raise BackendError(_CLOSED_WHILE) from None
            raise
        finally:
            with self._lock:
                self._calls.discard(future)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:  # submitting under the lock: ``stop`` sees every call it must drain
            stopped = self._stopped
            if not stopped:
                loop = self._start()
                if threading.current_thread() is self._thread:
                    coro.close()
                    raise RuntimeError(
                        "a longterm *_sync method was called from its own loop; await the async method instead"
                    )
                future = asyncio.run_coroutine_threadsafe(coro, loop)
                self._calls.add(future)
        if stopped:
            return _run_alone(coro)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self._stopped:
                raise BackendError(_CLOSED_WHILE) from None
            raise
        finally:
            with self._lock:
                self._calls.discard(future)

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Let the calls in flight end (at most ``grace`` s, then cancelled), then end the loop;
        later calls run alone (``_run_alone``). A second stop does nothing."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            loop, thread = self._loop, self._thread
            calls = list(self._calls)
        if loop is None or thread is None:
            return
        if threading.current_thread() is thread:  # cannot block its own loop: cancel and stop
            for f in calls:
                f.cancel()
            loop.stop()
            return
        try:
            asyncio.run_coroutine_threadsafe(_drain(calls, grace), loop).result(grace + 2 * _UNWIND)
        except Exception:  # the loop is blocked or broken: the fallback below frees the callers
            log.debug("draining the sync portal's loop", exc_info=True)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=_UNWIND)
            if not thread.is_alive():
                loop.close()
            for f in calls:  # whatever the loop could not resolve must not leave a caller waiting
                if not f.done():
                    try:
                        f.set_exception(BackendError(_CLOSED_WHILE))
                    except concurrent.futures.InvalidStateError:
                        pass


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The portal's thread: the loop until it is stopped, then closed (``stop`` may close it first)."""
    try:
        loop.run_forever()
    finally:
        if not loop.is_closed():
            loop.close()


def _end(loop: asyncio.AbstractEventLoop) -> None:
    """A dropped portal's finalizer: its loop stops (its thread then ends)."""
    if not loop.is_closed():
        try:
            loop.call_soon_threadsafe(loop.stop)
        except RuntimeError:  # closed meanwhile
            pass


def _after_fork_in_child() -> None:
    for portal in list(_LIVE):
        portal._after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _run_alone(coro: Coroutine[Any, Any, T]) -> T:
    """After ``stop``: ``coro`` on a loop and thread of its own, so a late call (or a second close)
    gets what the closed memory answers (its "closed" error, or nothing to do) and never a hang."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, name="longterm-sync-closed", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


async def _drain(calls: list[concurrent.futures.Future[Any]], grace: float) -> None:
    """On the portal's loop: wait for ``calls`` (at most ``grace`` s), cancel the rest and every other task."""
    if calls:
        waits = [asyncio.wrap_future(f) for f in calls]
        for w in waits:  # the callers read the outcomes; these copies must not log them as lost
            w.add_done_callback(lambda w: w.cancelled() or w.exception())
        await asyncio.wait(waits, timeout=grace)
    for f in calls:
        f.cancel()  # a pending call's future: cancelling it cancels its task; its caller is told why
    me = asyncio.current_task()
    others = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    for t in others:
        t.cancel()
    if others:
        await asyncio.wait(others, timeout=_UNWIND)


class HasPortal(Protocol):
    """What ``sync_twin``'s methods need of their object: the portal their coroutines run on."""

    @property
    def portal(self) -> SyncPortal: ...


S = TypeVar("S", bound=HasPortal)


def sync_twin(method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]]) -> Callable[Concatenate[S, P], T]:
    """The blocking twin of the async ``method``: the same parameters, its result once it ran on
    the object's ``portal`` (``SyncPortal.call``). Named ``<method>_sync``."""

    @functools.wraps(method, updated=())
    def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.portal.call(method(self, *args, **kwargs))

    twin.__name__ = f"{method.__name__}_sync"
    twin.__qualname__ = f"{method.__qualname__}_sync"
    twin.__doc__ = f"``{method.__name__}``, blocking: run on the memory's own loop (see ``longterm._sync``)."
    return twin
