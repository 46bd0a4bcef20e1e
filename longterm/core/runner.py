"""The runner: where an engine's blocking primitives run, prepared, translated and within a deadline.

The seam: an ``Engine`` holds one ``Runner``. ``run(what, fn, *args)`` runs ``fn`` on the
engine's own worker threads and awaits it from any loop; ``call(what, fn, args)`` is what
runs there: the store prepared first (the engine's ``prepare`` hook, once, and again when an
error rule says the engine lost its schema), errors translated through the engine's rules,
the call counted so that closing waits for it. ``run_on`` does the same on a pool of the
engine's own (the local store's readers), ``run_unbounded`` without a deadline (a purge).

What it owns, once for every engine:

- **one concurrency model**: primitives run on the engine's threads (one for an embedded
  store, a pool for a server), so any event loop, the sync wrappers and several threads with
  their own loops can share one memory; no client is ever bound to a loop, and the event
  loop never blocks on I/O or CPU work;
- **deadlines**: with ``timeout`` set, a caller waits at most that long for any one operation
  (preparing the engine included), then gets a ``BackendUnavailableError``;
- **translation**: only ``LongTermMemoryError``s leave a call (``core.errors``); a rule with
  ``reopen`` prepares the store again and retries once;
- **closing**: closed first, released second: from ``shut_out`` on every operation (queued,
  or asked for from any thread or loop) fails with the "closed" error instead of reaching
  the connection that the engine's ``release`` hook closes once the running ones ended;
- **fork**: ``os.fork`` waits until no primitive runs (at most ``FORK_WAIT``; new ones wait
  for the fork), so no store is forked mid-transaction; in the child every live runner gets new
  worker threads, locks and a fresh ``prepared`` (run by ``os.register_at_fork``, never on a
  save or a search), then calls the engine's ``forget`` hook: the child opens connections of its
  own and never touches the parent's (``core.fork.keep``);
- **lifetimes**: the runner holds its engine's hooks weakly, so nothing here keeps a dropped
  engine alive: its pool is collected with it and the pool's threads end.

Why an object of its own (kombu's virtual transport is the model): this is the machinery
five engines once wrote five times; the engine keeps the primitives and the contract.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, NamedTuple, ParamSpec, TypeVar

from ..errors import BackendError, BackendUnavailableError, LongTermMemoryError
from .errors import Rule, translate
from .fork import keep

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

_TIMEOUT_CM = sys.version_info >= (3, 11)
#: Every runner alive in this process, for ``_after_fork_in_child`` (weakly: never keeps one alive).
_LIVE: weakref.WeakSet[Runner] = weakref.WeakSet()


#: Seconds a fork waits for the primitives running in this process to end (then forks anyway, warned).
FORK_WAIT = 30.0


def _before_fork() -> None:
    """``os.register_at_fork(before=...)``: no primitive starts, and the running ones end, before the
    fork. A child inherits a SQLite connection's locks as memory without the locks themselves: one
    forked mid-write held the write lock for ever, and its own writes met the parent's in the file."""
    for runner in list(_LIVE):
        runner.hold_for_fork()


def _after_fork_in_parent() -> None:
    for runner in list(_LIVE):
        runner.go_on_after_fork()


def _after_fork_in_child() -> None:
    """``os.register_at_fork(after_in_child=...)``: the child has only the thread that forked;
    whatever waited on the parent's other threads would wait forever. New pools and locks."""
    for runner in list(_LIVE):
        try:
            runner.after_fork()
        except ReferenceError:  # its engine is being collected: nothing of it is used again
            continue


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


@dataclass(frozen=True)
class Label:
    """What messages say of an engine: its name, where it is, what to do when it cannot be
    reached, and the ``backend_config`` key of its deadline."""

    name: str
    where: str
    unreachable: str = ""
    timeout_key: str = "timeout"

    def closed_error(self) -> BackendError:
        return BackendError(f"the {self.name} store at {self.where} is closed; open a new LongTermMemory.")


class Hook(Generic[P, R]):
    """A method of the engine, held weakly and looked up by name at each call: what the core starts
    never keeps a dropped engine alive, and a method replaced on the engine (a subclass, a test's
    monkeypatch) is the one called."""

    def __init__(self, method: Callable[P, R]) -> None:
        if not inspect.ismethod(method):
            raise TypeError(f"a hook is a bound method of the engine, not {method!r}")
        self._owner = weakref.ref(method.__self__)
        self._name = method.__name__

    def target(self) -> Callable[P, R]:
        """The method a call would run now."""
        owner = self._owner()
        if owner is None:
            raise ReferenceError("the engine was dropped")
        method: Callable[P, R] = getattr(owner, self._name)
        return method

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        owner = self._owner()
        if owner is None:
            raise ReferenceError("the engine was dropped")
        method: Callable[P, R] = getattr(owner, self._name)
        return method(*args, **kwargs)


class Hooks(NamedTuple):
    """The engine's side of its runner (bound methods of the engine, held weakly)."""

    rules: Callable[[], Sequence[Rule]]
    """The engine's error table."""
    prepare: Callable[[], None]
    """Open the store and check it (blocking, on a worker; again after a ``reopen`` rule)."""
    release: Callable[[], None]
    """Close the store (on a worker, once closed: ``wait_idle`` first)."""
    forget: Callable[[], None]
    """In a forked child, after the runner's own threads and locks were made anew."""


class Runner:
    """An engine's workers, deadline and lifecycle (see the module docstring)."""

    def __init__(self, label: Label, *, workers: int, timeout: float | None, hooks: Hooks) -> None:
        self.label = label
        self.timeout = timeout
        self.closed = False
        """Set once by ``shut_out``; nothing starts after it."""
        self._workers = max(1, workers)
        self._rules, self._prepare_hook = Hook(hooks.rules), Hook(hooks.prepare)
        self._release, self._forget = Hook(hooks.release), Hook(hooks.forget)
        self._fresh()
        _LIVE.add(self)

    def _fresh(self) -> None:
        """What lives in this process only: the worker pool and the locks; ``prepared`` False
        (the store is prepared before the next call). Made anew after a fork."""
        self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=f"longterm-{self.label.name}")
        self._prepare_lock = threading.Lock()
        self.prepared = False
        self._busy = threading.Condition()
        self._active = 0
        """Primitives running now (``call``); ``wait_idle`` waits for them to end."""
        self._forking = False
        """A fork of this process is under way (``hold_for_fork``): no primitive starts."""

    def hold_for_fork(self) -> None:
        """Before a fork: no primitive starts from now, and those running end (at most ``FORK_WAIT``)."""
        with self._busy:
            self._forking = True
            if not self._busy.wait_for(lambda: self._active == 0, timeout=FORK_WAIT):
                lb = self.label
                log.warning("%s %s: forking while %d operations still run", lb.name, lb.where, self._active)

    def go_on_after_fork(self) -> None:
        """In the parent after a fork: primitives start again."""
        with self._busy:
            self._forking = False
            self._busy.notify_all()

    def after_fork(self) -> None:
        """In a forked child: new threads and locks, then the engine forgets what it inherited."""
        keep(self._pool)  # its threads are not in this process: never join them
        self._fresh()
        self._forget()

    def translate(self, exc: BaseException, what: str) -> tuple[LongTermMemoryError, bool]:
        """Our error for ``exc`` raised while ``what``, and whether to prepare the store again."""
        lb = self.label
        return translate(exc, self._rules(), engine=lb.name, where=lb.where, what=what, unreachable=lb.unreachable)

    def closed_error(self) -> BackendError:
        return self.label.closed_error()

    def prepare(self) -> None:
        """Prepare the store unless it is (blocking; on a worker)."""
        with self._prepare_lock:
            if not self.prepared:
                self._prepare_hook()
                self.prepared = True

    def call(self, what: str, fn: Callable[..., T], args: tuple[object, ...]) -> T:
        """``fn(*args)`` on this thread: prepared first, errors translated, counted in ``_active``.

        Checked against ``closed`` under ``_busy``, so nothing starts once closing began and
        ``wait_idle`` can wait for what started before: no primitive runs on a closed connection."""
        with self._busy:
            self._busy.wait_for(lambda: not self._forking)
            if self.closed:
                raise self.closed_error()
            self._active += 1
        try:
            for attempt in (0, 1):
                try:
                    self.prepare()
                    return fn(*args)
                except (KeyboardInterrupt, SystemExit, GeneratorExit):
                    raise
                except BaseException as exc:  # native engines panic with BaseExceptions (pyo3's PanicException)
                    err, reopen = self.translate(exc, what)
                    if reopen and attempt == 0 and not self.closed:
                        lb = self.label
                        log.warning(
                            "%s %s: %s; preparing the store again and retrying once", lb.name, lb.where, str(err)
                        )
                        with self._prepare_lock:
                            self.prepared = False
                        continue
                    if err is exc:
                        raise
                    raise err from exc
            raise AssertionError("unreachable")
        finally:
            with self._busy:
                self._active -= 1
                self._busy.notify_all()

    def _submit(
        self, pool: Callable[[], Executor], what: str, fn: Callable[..., T], args: tuple[object, ...]
    ) -> Future[T]:
        """``call`` submitted to ``pool()``; a closed engine answers with its "closed" error (never the
        pool's RuntimeError)."""
        if self.closed:
            raise self.closed_error()
        try:
            return pool().submit(self.call, what, fn, args)
        except RuntimeError:  # the pool shut down between the check and the submit
            raise self.closed_error() from None

    def _workers_pool(self) -> Executor:
        return self._pool

    async def run(self, what: str, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on the engine's workers, awaited from any loop, within the deadline."""
        future = asyncio.wrap_future(self._submit(self._workers_pool, what, fn, args))
        if self.timeout is None:
            return await future
        hint = f"Check that it is up and not overloaded, or raise backend_config[{self.label.timeout_key!r}]."
        return await self._within(future, self.timeout, what, hint)

    async def run_on(
        self, pool: Callable[[], Executor], what: str, fn: Callable[..., T], *args: object, limit: float, hint: str
    ) -> T:
        """``fn(*args)`` on ``pool()`` (a pool of the engine's own), within ``limit`` seconds;
        past it, the error says ``hint``."""
        return await self._within(asyncio.wrap_future(self._submit(pool, what, fn, args)), limit, what, hint)

    async def run_unbounded(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` on the engine's workers with no deadline (an operator's command: a force merge
        takes what it takes)."""
        return await asyncio.wrap_future(self._submit(self._workers_pool, what, fn, ()))

    def run_blocking(self, what: str, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on the engine's workers, waited for on this thread within the deadline (for
        a thread of the engine's own, such as the background embedder)."""
        return self._submit(self._workers_pool, what, fn, args).result(self.timeout)

    async def ready(self) -> None:
        """Prepare the store now (within the deadline), when what comes next depends on it."""
        if not self.prepared:
            await self.run("opening the store", lambda: None)

    async def _within(self, future: asyncio.Future[T], limit: float, what: str, hint: str) -> T:
        try:
            if _TIMEOUT_CM:  # 3.11+: no task per call (about 40 us less than wait_for)
                async with asyncio.timeout(limit):  # type: ignore[attr-defined,unused-ignore]
                    return await future
            return await asyncio.wait_for(future, limit)
        except (asyncio.TimeoutError, TimeoutError):
            lb = self.label
            raise BackendUnavailableError(
                f"{lb.name} at {lb.where} did not answer within {limit:g} s while {what}. {hint}"
            ) from None

    def wait_idle(self) -> None:
        """Until the running primitives ended (at most the deadline): before a release."""
        with self._busy:
            if not self._busy.wait_for(lambda: self._active == 0, timeout=self.timeout):
                log.warning(
                    "%s %s: closing while %d operations still run", self.label.name, self.label.where, self._active
                )

    def shut_out(self) -> bool:
        """Closed from now on: every operation not yet started fails with the "closed" error.
        False when it was closed already."""
        with self._busy:
            if self.closed:
                return False
            self.closed = True
            return True

    async def release(self) -> None:
        """Run the engine's ``release`` hook on a worker, once the running operations ended, even
        when this wait is cancelled (a shutdown hook's deadline): the cancellation is the caller's
        to hear, the release still happens."""
        shut = self._pool.submit(self._release)
        try:
            await asyncio.shield(asyncio.wrap_future(shut))
        except Exception:  # closing: nothing left to release, but say what happened
            log.debug("closing %s %s", self.label.name, self.label.where, exc_info=True)
        finally:
            self._pool.shutdown(wait=False)
