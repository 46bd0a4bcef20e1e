"""The fact layer's worker: one thread with its own event loop, and a queue of evidence per user.

The seam: ``Worker(work, retry_seconds)``. ``put(scope, records)`` queues from any thread and
returns at once; the worker then calls ``await work(scope, records)`` on its loop, one user at a
time. ``add`` queues without waking it (for ``work`` itself, which puts back what it did not
do, and for a caller that flushes next), ``drop`` takes records out, ``pending`` counts what
waits, ``flush`` waits until everything queued was tried once more, ``run(coro)`` runs a
coroutine on the worker's loop (``alone=True``: with no batch running meanwhile) and ``close``
stops it all. ``last_error`` says why the last try failed.

Why a thread with a loop of its own: model calls and reconciliation never run on a caller's
loop (a reply never waits for a model), and one user's batches never run at the same time as
each other, a rebuild or a consolidation. Why back off: ``work`` raising is a failure (the
model down or talking nonsense, an outage): the user's records go back to the queue and are
tried again after ``retry_seconds``, doubled after each failure in a row (up to ``MAX_BACKOFF``
times), at once at the user's next ``put``, and on ``flush``: asked again, never hammered.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from ..errors import InvalidInputError
from ..records import MemoryRecord, Scope

log = logging.getLogger(__name__)
T = TypeVar("T")

#: A user's retries wait ``retry_seconds``, doubling after each failure in a row up to this factor.
MAX_BACKOFF = 64

#: What the worker does with a user's queued records (by id); raising means "try again later".
Work = Callable[[Scope, dict[str, MemoryRecord]], Awaitable[None]]


class Worker:
    def __init__(self, work: Work, retry_seconds: float) -> None:
        self.work = work
        self.retry_seconds = retry_seconds
        self.last_error: str | None = None
        """Why the last try failed (None once a try succeeded)."""
        self._lock = threading.Lock()
        self._queued: dict[Scope, dict[str, MemoryRecord]] = {}
        self._failures: dict[Scope, int] = {}
        """Per user, tries failed in a row (the backoff's exponent)."""
        self._due: dict[Scope, float] = {}
        """Per user that failed, the loop time before which the retry timer leaves it alone."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="longterm-facts", daemon=True)
        self._thread.start()
        self._busy = asyncio.Lock()
        """Held while a user's records are worked on, and by ``run(alone=True)``."""
        self._pass: asyncio.Task[None] | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False

    # -- the queue --------------------------------------------------------------------------

    def put(self, scope: Scope, records: Iterable[MemoryRecord]) -> None:
        """Queue ``records`` of the user (none: the user alone) and wake the worker, backoff or
        not; returns at once, never raises."""
        if self._closed:
            return
        with self._lock:
            self._queued.setdefault(scope, {}).update((r.id, r) for r in records)
            self._due.pop(scope, None)  # the user's next save tries at once, backoff or not
        self._loop.call_soon_threadsafe(self._wake)

    def add(self, scope: Scope, records: Iterable[MemoryRecord]) -> None:
        """Queue ``records`` of the user (none: the user alone) without waking the worker."""
        with self._lock:
            self._queued.setdefault(scope, {}).update((r.id, r) for r in records)

    def drop(self, scope: Scope, which: Callable[[MemoryRecord], bool]) -> None:
        """Take the user's queued records for which ``which`` is true out of the queue."""
        with self._lock:
            queued = self._queued.get(scope, {})
            for rid in [rid for rid, rec in queued.items() if which(rec)]:
                del queued[rid]

    def pending(self) -> int:
        """Records waiting in the queue (a user queued with none counts one); 0 when nothing waits."""
        with self._lock:
            return sum(len(q) or 1 for q in self._queued.values())

    # -- the passes -------------------------------------------------------------------------

    def _wake(self) -> None:
        if self._pass is None or self._pass.done():
            self._pass = self._loop.create_task(self._drain())

    async def _drain(self) -> None:
        """Work until every queued user that is due was tried; a user whose try failed stays
        queued, backs off (``_failed``) and is not tried again in this pass; records queued
        meanwhile are taken in this pass."""
        async with self._busy:
            failed: set[Scope] = set()
            while True:
                now = self._loop.time()
                with self._lock:
                    due = (s for s in self._queued if s not in failed and self._due.get(s, now) <= now)
                    scope = next(due, None)
                    queued = self._queued.pop(scope, {}) if scope is not None else {}
                if scope is None:
                    break
                try:
                    await self.work(scope, queued)
                    self.last_error = None
                    self._failures.pop(scope, None)
                    with self._lock:
                        self._due.pop(scope, None)
                except Exception as exc:
                    failed.add(scope)
                    self.last_error = str(exc)
                    wait = self._failed(scope)
                    log.warning(
                        "facts for a user of %r were not distilled (%s); retrying in %g s", scope.app_name, exc, wait
                    )
                    self.add(scope, queued.values())
            self._arm_retry()

    def _failed(self, scope: Scope) -> float:
        """Back the user off: ``retry_seconds``, doubled for each failure in a row (up to
        ``MAX_BACKOFF`` times); returns the wait."""
        n = self._failures[scope] = self._failures.get(scope, 0) + 1
        wait = self.retry_seconds * min(1 << (n - 1), MAX_BACKOFF)
        with self._lock:
            self._due[scope] = self._loop.time() + wait
        return wait

    def _arm_retry(self) -> None:
        """Wake the worker when the first backed-off user that still has work is due."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        with self._lock:
            due = [self._due[s] for s in self._queued if s in self._due]
        if due and not self._closed:
            self._retry = self._loop.call_at(min(due), self._wake)

    async def flush(self) -> None:
        """Wait until what is queued was tried once more."""
        await self.run(self._flush())

    async def _flush(self) -> None:
        if self._pass is not None and not self._pass.done():
            await self._pass
        with self._lock:
            self._due.clear()  # a flush tries every user now, backoff or not
            more = bool(self._queued)
        if more:
            self._pass = self._loop.create_task(self._drain())
            await self._pass

    # -- running on the worker --------------------------------------------------------------

    async def run(self, coro: Coroutine[Any, Any, T], *, alone: bool = False) -> T:
        """``coro``'s result, run on the worker's loop (``alone``: while no user's records are
        worked on); ``InvalidInputError`` once closed."""
        if self._closed:
            coro.close()
            raise InvalidInputError("the fact layer is closed; open a new LongTermMemory.")
        task = self._alone(coro) if alone else coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(task, self._loop))

    async def _alone(self, coro: Coroutine[Any, Any, T]) -> T:
        async with self._busy:
            return await coro

    async def close(self, last: Callable[[], Awaitable[None]]) -> None:
        """Stop: cancel the pass in flight (what it did not finish stays undone in the ledger, for
        the next process), await ``last()`` on the worker's loop, then end the thread."""
        if self._closed:
            return
        self._closed = True

        async def stop() -> None:
            if self._retry is not None:
                self._retry.cancel()
            if self._pass is not None and not self._pass.done():
                self._pass.cancel()
                await asyncio.wait([self._pass], timeout=5)
            await last()

        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(stop(), self._loop))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            if not self._thread.is_alive():
                self._loop.close()
