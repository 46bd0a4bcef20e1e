"""Automatic saving around agent turns: thresholds, an idle timer, save before recall, flush.

The seam: ``AutoSaver(memory, min_messages=, min_seconds=, policy=, reconsider=)``, over
the memory's port (``longterm.ports.MemoryPort``: its saves, its background loop, whether it
is open). A framework calls ``await before_turn(session, timeout=)`` when a turn starts,
``notify(session)`` after it (cheap, never blocks, never raises, from any thread, with or
without a running loop) and ``await flush()`` (or ``memory.flush_sync()``) before it stops. Saves go through
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
refers to its savers weakly and ``LongTermMemory.release(saver)`` lets go of one. The
bookkeeping of what is tracked is ``tracking``'s (a ``Tracker``); this module decides when
to save.

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
import time
from collections.abc import Callable, Coroutine, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

from .. import telemetry
from ..config import env
from ..errors import ConfigurationError
from ..policies import MemoryAutoSavePolicy
from .tracking import Key, Tracked, Tracker, event_count, session_key

if TYPE_CHECKING:
    from ..ports import MemoryPort

log = logging.getLogger(__name__)

DEFAULT_MIN_MESSAGES = 10
DEFAULT_MIN_SECONDS = 60.0
#: Seconds a failed save waits at least before the timer retries it (no busy loop on a dead store).
RETRY_FLOOR = 1.0

N = TypeVar("N", int, float)
T = TypeVar("T")
#: What names a policy: a preset name, a dict of its fields, a policy, or None (the memory's own).
PolicyLike = MemoryAutoSavePolicy | str | Mapping[str, object] | None


def _threshold(value: float | str | None, names: tuple[str, ...], default: N, kind: type[N], what: str) -> N:
    source = "argument"
    if value is None:
        for name in names:
            raw = env(name)
            if raw is not None:
                value, source = raw, f"environment variable {name}"
                break
    if value is None:
        return default
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


def _here(task: asyncio.Task[None] | None) -> TypeGuard[asyncio.Task[None]]:
    """``task`` is still running on the running loop (one on a finished loop never completes)."""
    return task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop()


def _cancel(handles: list[asyncio.TimerHandle]) -> None:
    for h in handles:
        h.cancel()


class AutoSaver:
    def __init__(
        self,
        memory: MemoryPort,
        *,
        min_messages: int | str | None = None,
        min_seconds: float | str | None = None,
        policy: PolicyLike = None,
        reconsider: bool = False,
        ttl: float | timedelta | None = None,
    ) -> None:
        self.memory = memory
        self.ttl = ttl
        """How long what it saves lives (None: the memory's ``ttl``)."""
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
        self._tracker = Tracker()

    # -- where the work runs ----------------------------------------------------------------

    def _post(self, fn: Callable[..., object], *args: object) -> bool:
        """``fn(*args)`` soon on the memory's background loop; False once the memory closed."""
        return self.memory.is_open and self.memory.portal.post(fn, *args)

    async def _there(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the memory's background loop, where the saves and timers are."""
        if not self.memory.is_open:
            return await coro  # nothing is tracked any more: it finds nothing to do
        return await self.memory.portal.run(coro)

    # -- what is tracked ----------------------------------------------------------------

    def tracked(self) -> int:
        """Sessions this saver holds (each with its events) until they are saved and idle."""
        return len(self._tracker.all())

    def pending(self) -> int:
        """Events seen but not yet saved, over all tracked sessions."""
        return sum(max(0, t.unsaved()) for t in self._tracker.all())

    # -- triggers -----------------------------------------------------------------------

    def notify(self, session: object) -> None:
        """A turn ended in ``session``: save in the background if a threshold is met."""
        try:
            key = session_key(session)
        except Exception as exc:  # never break the agent's reply over bookkeeping
            log.warning("auto-save skipped a session it cannot read: %s", exc)
            return
        t = self._tracker.track(key, session, reconsider=self.reconsider)
        if t is None:
            log.warning("auto-save skipped session %s: its saver (or memory) was closed", telemetry.pseudonym(key[2]))
            return
        if not self._post(self._consider, t):
            log.warning("auto-save skipped session %s: the memory was closed", telemetry.pseudonym(key[2]))

    def _consider(self, t: Tracked) -> None:
        """On the background loop: save ``t`` now if a threshold is met, else (re)arm its timer."""
        if self._tracker.find(t.key) is not t:
            return  # forgotten (or closed) since the turn
        unsaved = t.unsaved()
        if unsaved >= self.min_messages:
            self._schedule(t, f"{unsaved} new events")
        elif unsaved > 0 and time.monotonic() - t.last_save >= self.min_seconds:
            self._schedule(t, f"{self.min_seconds:g} s since the last save")
        elif not _here(t.task):
            self._arm(t)

    async def before_turn(self, session: object, *, timeout: float) -> None:
        """A turn starts in ``session``: save the user's other sessions first, waiting ``timeout`` s at most."""
        try:
            key = session_key(session)
        except Exception:
            return  # notify() logs the unreadable session at the end of the turn
        await self._there(self._before_turn(key, timeout))

    async def _before_turn(self, key: Key, timeout: float) -> None:
        others = self._tracker.others(key)
        tasks = [self._schedule(t, "a turn started in another session") for t in others if t.unsaved() > 0]
        tasks += [t.task for t in others if t.unsaved() <= 0 and _here(t.task)]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=timeout)
        if late:
            log.warning(
                "saving %d earlier session(s) of user %s took over %g s; this turn recalls without them "
                "(the saves go on in the background)",
                len(late),
                telemetry.pseudonym(key[1]),
                timeout,
            )

    def _arm(self, t: Tracked, delay: float | None = None) -> None:
        """(Re)start the idle timer: it saves an unsaved tail, or forgets a saved, idle session."""
        if t.timer is not None:
            t.timer.cancel()
        if delay is None:
            base = t.last_save if t.unsaved() > 0 else t.last_turn
            delay = base + self.min_seconds - time.monotonic()
        t.timer = asyncio.get_running_loop().call_later(
            max(0.0, delay), self._on_timer, t, context=contextvars.Context()
        )

    def _on_timer(self, t: Tracked) -> None:
        t.timer = None
        if self._tracker.find(t.key) is not t or _here(t.task):
            return  # forgotten, or a running save re-arms when it ends
        if t.unsaved() > 0:
            self._schedule(t, f"{self.min_seconds:g} s since the last save")
        elif time.monotonic() - t.last_turn >= self.min_seconds:
            self._tracker.drop(t)
        else:
            self._arm(t)

    def _schedule(self, t: Tracked, reason: str) -> asyncio.Task[None]:
        if t.task is None or not _here(t.task):
            # In a context of its own (see SyncPortal.post); create_task(context=) is Python 3.11+.
            t.task = contextvars.Context().run(asyncio.get_running_loop().create_task, self._run(t, reason))
        return t.task

    # -- saving -------------------------------------------------------------------------

    async def _run(self, t: Tracked, reason: str) -> None:
        """Save until nothing is left (events may arrive while a save runs), then re-arm the timer."""
        while t.unsaved() > 0:
            if not await self._save(t, reason, raise_errors=False):
                if self._tracker.find(t.key) is t:
                    self._arm(t, max(self.min_seconds, RETRY_FLOOR))
                return
        if self._tracker.find(t.key) is t:
            self._arm(t)

    async def _save(self, t: Tracked, reason: str, *, raise_errors: bool) -> bool:
        session, total, links = t.session, event_count(t.session), t.links
        where = {"backend": self.memory.backend_name, "index": self.memory.index}
        try:
            with telemetry.span("longterm.autosave", links=links, reason=reason, **where):
                result = await self.memory.add_session_to_memory(  # lenient: what it cannot read waits, unmarked
                    session, auto_save_memory_policy=self.policy, reconsider=t.reconsider, lenient=True, ttl=self.ttl
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
        running = [t.task for t in self._tracker.all() if _here(t.task)]
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        errors: list[Exception] = []
        for t in self._tracker.all():
            if t.unsaved() > 0:
                try:
                    await self._save(t, "flush", raise_errors=True)
                except Exception as exc:  # keep flushing the others
                    errors.append(exc)
                    continue
            if t.unsaved() <= 0 and not _here(t.task):
                self._tracker.drop(t)
        if errors:
            raise errors[0]

    async def forget(self, app_name: str, user_id: str, session_id: str, *, save: bool = True) -> None:
        """Stop tracking a session that ended: save its unsaved tail first, unless ``save=False`` (deleted)."""
        await self._there(self._forget((app_name, user_id, session_id), save))

    async def _forget(self, key: Key, save: bool) -> None:
        t = self._tracker.find(key)
        if t is None:
            return
        if save:
            if _here(t.task):
                await asyncio.shield(t.task)
            if t.unsaved() > 0:
                await self._save(t, "the session ended", raise_errors=True)
        self._tracker.drop(t)

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
        timers = self._tracker.close()
        if timers:  # cancelled on their loop (a gone loop took them with it)
            self._post(_cancel, timers)
