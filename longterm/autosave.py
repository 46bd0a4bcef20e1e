"""Automatic saving around agent turns: thresholds, an idle timer, save before recall, flush.

The seam: ``AutoSaver(memory, min_messages=, min_seconds=, policy=, reconsider=)``. A
framework calls ``await before_turn(session, timeout=)`` when a turn starts, ``notify(session)``
after it (cheap, never blocks, never raises, from any thread, with or without a running loop)
and ``await flush()`` (or ``memory.flush_sync()``) before it stops. Saves go through
``add_session_to_memory`` and so through the ledger: they are incremental and exactly-once
whatever triggers them.

Where saves run: on the memory's own background loop (the sync wrappers' thread), never on
the caller's. A caller's loop may end with its turn (ADK's ``Runner.run`` runs each turn in an
``asyncio.run`` of its own; a sync chat loop has none): saves and idle timers left on it would
be cancelled or never fire. The bookkeeping (what is tracked) is done at once under a lock;
the decisions and saves are posted to that loop, in order.

Rules:
- after a turn, a session with ``min_messages`` events not yet saved is saved in the background;
- an idle timer saves any unsaved tail ``min_seconds`` after the session's last save (or
  after it was first seen), whether or not another turn comes: the time threshold never
  waits for the user to speak again;
- save before recall: when a turn starts for (app, user), every other session of that user
  with an unsaved tail is saved first, so the turn's ``load_memory`` or preload finds what the
  user said in the session before. The turn waits ``timeout`` seconds at most; a save still
  running then goes on in the background (a slow store never holds the reply);
- a failed save is logged with its reason and retried (by the timer, at least a second
  later, and at the next trigger), never dropped;
- ``flush()`` waits for running saves, then saves every unsaved tail, and raises if one
  still fails.

Lifetimes: a session (and the events it holds) is tracked only while a save may be owed.
A fully saved session is forgotten after ``min_seconds`` without a turn, after ``flush()``,
or at once by ``forget(...)`` (a deleted or closed session). A forgotten session that comes
back is tracked afresh and saved at its next trigger; the ledger skips what was saved.
``close()`` drops everything (the memory closes its savers when it closes); the memory
refers to its savers weakly and ``LongTermMemory.release(saver)`` lets go of one.

``reconsider=True``: the first save of each session this saver tracks considers every event
again (``add_session_to_memory(..., reconsider=True)``), so events an older policy dropped are
judged by this saver's policy; later saves are incremental again.

A process that dies before ``flush()`` loses nothing the next start cannot recover: the
sessions store still holds the events, and ``LongTermMemory.recover_sessions(...)`` saves
what the ledger has not seen.

Thresholds come from the arguments, else ``LONGTERM_MIN_MESSAGES_THRESHOLD`` /
``LONGTERM_MIN_TIME_THRESHOLD`` (or VeADK's ``MIN_MESSAGES_THRESHOLD`` /
``MIN_TIME_THRESHOLD``), else 10 events and 60 seconds, and are validated at
construction: a typo is an error now, not a silently dead auto-save.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from . import telemetry
from .config import env
from .errors import ConfigurationError

if TYPE_CHECKING:
    from .memory import LongTermMemory

log = logging.getLogger(__name__)

DEFAULT_MIN_MESSAGES = 10
DEFAULT_MIN_SECONDS = 60.0
#: Seconds a failed save waits at least before the timer retries it (no busy loop on a dead store).
RETRY_FLOOR = 1.0
#: Turns an auto-save's span links to at most (the latest ones since the session's last save).
MAX_LINKS = 32

Key = tuple[str, str, str]


def _threshold(value: Any, names: tuple[str, ...], default: float, kind: type, what: str) -> Any:
    source = "argument"
    if value is None:
        for name in names:
            raw = env(name)
            if raw is not None:
                value, source = raw, f"environment variable {name}"
                break
    if value is None:
        return kind(default)
    try:
        parsed = kind(value)
        if isinstance(value, bool) or (kind is int and isinstance(value, float) and not value.is_integer()):
            raise ValueError
    except (TypeError, ValueError):
        noun = "an integer" if kind is int else "a number"
        raise ConfigurationError(f"{what} from {source} must be {noun}, got {value!r}.") from None
    if parsed < (1 if kind is int else 0):
        bound = "at least 1" if kind is int else "zero or more"
        raise ConfigurationError(f"{what} from {source} must be {bound}, got {value!r}.")
    return parsed


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def session_key(session: Any) -> Key:
    """(app_name, user_id, id) of an ADK Session, a dict or a ``longterm.Session``."""
    key = (_get(session, "app_name"), _get(session, "user_id"), _get(session, "id"))
    if not all(isinstance(part, str) and part for part in key):
        raise ValueError(f"a session needs a non-empty app_name, user_id and id, got {key!r}")
    return key


def _event_count(session: Any) -> int:
    return len(_get(session, "events") or [])


def _here(task: asyncio.Task | None) -> TypeGuard[asyncio.Task]:
    """``task`` is still running on the running loop (one on a finished loop never completes)."""
    return task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop()


def _cancel(handles: list[asyncio.TimerHandle]) -> None:
    for h in handles:
        h.cancel()


@dataclass(eq=False)
class _Tracked:
    key: Key
    session: Any
    reconsider: bool
    saved_events: int = 0
    last_save: float = field(default_factory=time.monotonic)
    last_turn: float = field(default_factory=time.monotonic)
    task: asyncio.Task | None = None
    timer: asyncio.TimerHandle | None = None
    last_error: str | None = None
    links: list[Any] = field(default_factory=list)
    """The spans of the turns since the last save (``telemetry.link_here``): the save links to them."""


class AutoSaver:
    def __init__(
        self,
        memory: LongTermMemory,
        *,
        min_messages: Any = None,
        min_seconds: Any = None,
        policy: Any = None,
        reconsider: bool = False,
    ) -> None:
        self.memory = memory
        self.policy = policy
        self.reconsider = reconsider
        self.min_messages: int = _threshold(
            min_messages,
            ("LONGTERM_MIN_MESSAGES_THRESHOLD", "MIN_MESSAGES_THRESHOLD"),
            DEFAULT_MIN_MESSAGES,
            int,
            "MIN_MESSAGES_THRESHOLD",
        )
        self.min_seconds: float = _threshold(
            min_seconds,
            ("LONGTERM_MIN_TIME_THRESHOLD", "MIN_TIME_THRESHOLD"),
            DEFAULT_MIN_SECONDS,
            float,
            "MIN_TIME_THRESHOLD",
        )
        self._users: dict[tuple[str, str], dict[str, _Tracked]] = {}
        self._lock = threading.Lock()  # ``_users``: written by callers' threads and the background loop
        self._closed = False

    # -- where the work runs ----------------------------------------------------------------

    def _post(self, fn: Callable[..., Any], *args: Any) -> bool:
        """``fn(*args)`` soon on the memory's background loop; False once the memory closed."""
        return not self.memory._closed and self.memory._background().post(fn, *args)

    async def _there(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Await ``coro`` on the memory's background loop, where the saves and timers are."""
        if self.memory._closed:
            return await coro  # nothing is tracked any more: it finds nothing to do
        return await self.memory._background().run(coro)

    # -- what is tracked ----------------------------------------------------------------

    def _all(self) -> Iterator[_Tracked]:
        with self._lock:
            tracked = [t for sessions in self._users.values() for t in sessions.values()]
        return iter(tracked)

    def _find(self, key: Key) -> _Tracked | None:
        with self._lock:
            return self._users.get(key[:2], {}).get(key[2])

    def _drop(self, t: _Tracked) -> None:
        if t.timer is not None:
            t.timer.cancel()
            t.timer = None
        with self._lock:
            sessions = self._users.get(t.key[:2])
            if sessions is not None and sessions.get(t.key[2]) is t:
                del sessions[t.key[2]]
                if not sessions:
                    del self._users[t.key[:2]]

    def _unsaved(self, t: _Tracked) -> int:
        return _event_count(t.session) - t.saved_events

    def tracked(self) -> int:
        """Sessions this saver holds (each with its events) until they are saved and idle."""
        return sum(1 for _ in self._all())

    def pending(self) -> int:
        """Events seen but not yet saved, over all tracked sessions."""
        return sum(max(0, self._unsaved(t)) for t in self._all())

    # -- triggers -----------------------------------------------------------------------

    def notify(self, session: Any) -> None:
        """A turn ended in ``session``: save in the background if a threshold is met."""
        try:
            key = session_key(session)
        except Exception as exc:  # never break the agent's reply over bookkeeping
            log.warning("auto-save skipped a session it cannot read: %s", exc)
            return
        with self._lock:
            if self._closed:
                log.warning(
                    "auto-save skipped session %s: its saver (or memory) was closed", telemetry.pseudonym(key[2])
                )
                return
            sessions = self._users.setdefault(key[:2], {})
            t = sessions.get(key[2])
            if t is None:
                t = sessions[key[2]] = _Tracked(key=key, session=session, reconsider=self.reconsider)
            t.session, t.last_turn = session, time.monotonic()
            link = telemetry.link_here()
            if link is not None:
                t.links = [*t.links[-(MAX_LINKS - 1) :], link]
        if not self._post(self._consider, t):
            log.warning("auto-save skipped session %s: the memory was closed", telemetry.pseudonym(key[2]))

    def _consider(self, t: _Tracked) -> None:
        """On the background loop: save ``t`` now if a threshold is met, else (re)arm its timer."""
        if self._find(t.key) is not t:
            return  # forgotten (or closed) since the turn
        unsaved = self._unsaved(t)
        if unsaved >= self.min_messages:
            self._schedule(t, f"{unsaved} new events")
        elif unsaved > 0 and time.monotonic() - t.last_save >= self.min_seconds:
            self._schedule(t, f"{self.min_seconds:g} s since the last save")
        elif not _here(t.task):
            self._arm(t)

    async def before_turn(self, session: Any, *, timeout: float) -> None:
        """A turn starts in ``session``: save the user's other sessions first, waiting ``timeout`` s at most."""
        try:
            key = session_key(session)
        except Exception:
            return  # notify() logs the unreadable session at the end of the turn
        await self._there(self._before_turn(key, timeout))

    async def _before_turn(self, key: Key, timeout: float) -> None:
        app, user, sid = key
        with self._lock:
            mine = dict(self._users.get((app, user), {}))
        others = [t for s, t in mine.items() if s != sid]
        tasks = [self._schedule(t, "a turn started in another session") for t in others if self._unsaved(t) > 0]
        tasks += [t.task for t in others if self._unsaved(t) <= 0 and _here(t.task)]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=timeout)
        if late:
            log.warning(
                "saving %d earlier session(s) of user %s took over %g s; this turn recalls without them "
                "(the saves go on in the background)",
                len(late),
                telemetry.pseudonym(user),
                timeout,
            )

    def _arm(self, t: _Tracked, delay: float | None = None) -> None:
        """(Re)start the idle timer: it saves an unsaved tail, or forgets a saved, idle session."""
        if t.timer is not None:
            t.timer.cancel()
        if delay is None:
            base = t.last_save if self._unsaved(t) > 0 else t.last_turn
            delay = base + self.min_seconds - time.monotonic()
        t.timer = asyncio.get_running_loop().call_later(
            max(0.0, delay), self._on_timer, t, context=contextvars.Context()
        )

    def _on_timer(self, t: _Tracked) -> None:
        t.timer = None
        if self._find(t.key) is not t or _here(t.task):
            return  # forgotten, or a running save re-arms when it ends
        if self._unsaved(t) > 0:
            self._schedule(t, f"{self.min_seconds:g} s since the last save")
        elif time.monotonic() - t.last_turn >= self.min_seconds:
            self._drop(t)
        else:
            self._arm(t)

    def _schedule(self, t: _Tracked, reason: str) -> asyncio.Task:
        if t.task is None or not _here(t.task):
            # In a context of its own (see SyncPortal.post); create_task(context=) is Python 3.11+.
            t.task = contextvars.Context().run(asyncio.get_running_loop().create_task, self._run(t, reason))
        return t.task

    # -- saving -------------------------------------------------------------------------

    async def _run(self, t: _Tracked, reason: str) -> None:
        """Save until nothing is left (events may arrive while a save runs), then re-arm the timer."""
        while self._unsaved(t) > 0:
            if not await self._save(t, reason, raise_errors=False):
                if self._find(t.key) is t:
                    self._arm(t, max(self.min_seconds, RETRY_FLOOR))
                return
        if self._find(t.key) is t:
            self._arm(t)

    async def _save(self, t: _Tracked, reason: str, *, raise_errors: bool) -> bool:
        session, total, links = t.session, _event_count(t.session), t.links
        where = {"backend": self.memory.backend_name, "index": self.memory.index}
        try:
            with telemetry.span("longterm.autosave", links=links, reason=reason, **where):
                result = await self.memory.add_session_to_memory(  # lenient: what it cannot read waits, unmarked
                    session, auto_save_memory_policy=self.policy, reconsider=t.reconsider, lenient=True
                )
        except Exception as exc:
            t.last_error = f"{type(exc).__name__}: {exc}"
            log.warning(
                "auto-save of session %s failed (%s); it is retried later",
                telemetry.pseudonym(t.key[2]),
                t.last_error,
                extra=where,
            )
            if raise_errors:
                raise
            return False
        t.saved_events, t.last_save, t.last_error, t.reconsider = total, time.monotonic(), None, False
        if t.links is links:
            t.links = []
        else:  # turns came while it saved: their links go to the next save
            t.links = t.links[len(links) :] if t.links[: len(links)] == links else t.links
        log.debug(
            "auto-saved %d memories of session %s (%s)",
            result.saved,
            telemetry.pseudonym(result.session_id),
            reason,
            extra=where,
        )
        return True

    async def flush(self) -> None:
        """Wait for running saves, save every unsaved tail, forget what is saved; raise if one fails."""
        await self._there(self._flush())

    async def _flush(self) -> None:
        running = [t.task for t in self._all() if _here(t.task)]
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        errors = []
        for t in list(self._all()):
            if self._unsaved(t) > 0:
                try:
                    await self._save(t, "flush", raise_errors=True)
                except Exception as exc:  # keep flushing the others
                    errors.append(exc)
                    continue
            if self._unsaved(t) <= 0 and not _here(t.task):
                self._drop(t)
        if errors:
            raise errors[0]

    async def forget(self, app_name: str, user_id: str, session_id: str, *, save: bool = True) -> None:
        """Stop tracking a session that ended: save its unsaved tail first, unless ``save=False`` (deleted)."""
        await self._there(self._forget((app_name, user_id, session_id), save))

    async def _forget(self, key: Key, save: bool) -> None:
        t = self._find(key)
        if t is None:
            return
        if save:
            if _here(t.task):
                await asyncio.shield(t.task)
            if self._unsaved(t) > 0:
                await self._save(t, "the session ended", raise_errors=True)
        self._drop(t)

    def close(self) -> None:
        """Forget everything and stop every timer; unsaved tails are left to ``recover_sessions``, with a warning."""
        pending, sessions = self.pending(), self.tracked()
        if pending:
            log.warning(
                "an auto-saver closed with %d unsaved events in %d session(s); call flush() before closing, or "
                "LongTermMemory.recover_sessions(...) at the next start saves them from the session store",
                pending,
                sessions,
            )
        with self._lock:
            self._closed = True
            timers = [t.timer for ts in self._users.values() for t in ts.values() if t.timer is not None]
            self._users.clear()  # a timer that still fires finds nothing to save
        if timers:  # cancelled on their loop (a gone loop took them with it)
            self._post(_cancel, timers)
