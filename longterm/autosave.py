"""Automatic saving after agent turns: thresholds, session switches, flush.

The seam: ``AutoSaver(memory, min_messages=, min_seconds=)``; a framework calls
``notify(session)`` after each agent turn (cheap, never blocks, never raises) and
``await flush()`` before it stops. Saves go through ``add_session_to_memory`` and so
through the ledger: they are incremental and exactly-once whatever triggers them.

Rules:
- a session is saved in the background once it has ``min_messages`` events not yet
  saved, or ``min_seconds`` have passed since its last save (or since it was first seen)
  and it has anything unsaved;
- when the same (app, user) shows up in a new session, the previous session's unsaved
  tail is saved at once (a user who moved on would otherwise leave it unsaved);
- a failed save is logged with its reason and retried at the next trigger, never dropped;
- ``flush()`` waits for running saves, then saves every unsaved tail, and raises if one
  still fails.

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
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from .config import env
from .errors import ConfigurationError
from .sessions import read_session

if TYPE_CHECKING:
    from .memory import LongTermMemory

log = logging.getLogger("longterm.autosave")

DEFAULT_MIN_MESSAGES = 10
DEFAULT_MIN_SECONDS = 60.0


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
        raise ConfigurationError(f"{what} from {source} must be {'at least 1' if kind is int else 'zero or more'}, got {value!r}.")
    return parsed


def _event_count(session: Any) -> int:
    events = session.get("events") if isinstance(session, dict) else getattr(session, "events", None)
    return len(events or [])


@dataclass
class _Tracked:
    session: Any
    saved_events: int = 0
    last_save: float = field(default_factory=time.monotonic)
    task: Optional[asyncio.Task] = None
    last_error: Optional[str] = None


class AutoSaver:
    def __init__(self, memory: "LongTermMemory", *, min_messages: Any = None, min_seconds: Any = None, policy: Any = None) -> None:
        self.memory = memory
        self.policy = policy
        self.min_messages: int = _threshold(
            min_messages, ("LONGTERM_MIN_MESSAGES_THRESHOLD", "MIN_MESSAGES_THRESHOLD"), DEFAULT_MIN_MESSAGES, int, "MIN_MESSAGES_THRESHOLD"
        )
        self.min_seconds: float = _threshold(
            min_seconds, ("LONGTERM_MIN_TIME_THRESHOLD", "MIN_TIME_THRESHOLD"), DEFAULT_MIN_SECONDS, float, "MIN_TIME_THRESHOLD"
        )
        self._tracked: dict[tuple[str, str, str], _Tracked] = {}
        self._current: dict[tuple[str, str], str] = {}

    def _unsaved(self, t: _Tracked) -> int:
        return _event_count(t.session) - t.saved_events

    def notify(self, session: Any) -> None:
        """An agent turn ended in ``session``: save in the background if a threshold is met."""
        try:
            view = read_session(session)
        except Exception as exc:  # never break the agent's reply over bookkeeping
            log.warning("auto-save skipped a session it cannot read: %s", exc)
            return
        key = (view.app_name, view.user_id, view.session_id)
        tracked = self._tracked.get(key)
        if tracked is None:
            tracked = self._tracked[key] = _Tracked(session=session)
        tracked.session = session
        previous = self._current.get(key[:2])
        self._current[key[:2]] = view.session_id
        if previous is not None and previous != view.session_id:
            prev = self._tracked.get((*key[:2], previous))
            if prev is not None and self._unsaved(prev) > 0:
                self._schedule(prev, "the user started a new session")
        unsaved = self._unsaved(tracked)
        if unsaved >= self.min_messages:
            self._schedule(tracked, f"{unsaved} new events")
        elif unsaved > 0 and time.monotonic() - tracked.last_save >= self.min_seconds:
            self._schedule(tracked, f"{self.min_seconds:g} s since the last save")

    def _schedule(self, tracked: _Tracked, reason: str) -> None:
        if tracked.task is not None and not tracked.task.done():
            return  # a save of this session is running; the next trigger picks up the rest
        tracked.task = asyncio.get_running_loop().create_task(self._save(tracked, reason, raise_errors=False))

    async def _save(self, tracked: _Tracked, reason: str, *, raise_errors: bool) -> None:
        session = tracked.session
        total = _event_count(session)
        try:
            result = await self.memory.add_session_to_memory(session, auto_save_memory_policy=self.policy)
        except Exception as exc:
            tracked.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("auto-save of session %s failed (%s); it is retried at the next trigger", getattr(session, "id", "?"), tracked.last_error)
            if raise_errors:
                raise
            return
        tracked.saved_events, tracked.last_save, tracked.last_error = total, time.monotonic(), None
        log.debug("auto-saved %d memories of session %s (%s)", result.saved, result.session_id, reason)

    async def flush(self) -> None:
        """Wait for running saves, then save every unsaved tail; raise if one fails."""
        running = [t.task for t in self._tracked.values() if t.task is not None and not t.task.done()]
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        errors = []
        for tracked in list(self._tracked.values()):
            if self._unsaved(tracked) > 0:
                try:
                    await self._save(tracked, "flush", raise_errors=True)
                except Exception as exc:  # keep flushing the others
                    errors.append(exc)
        if errors:
            raise errors[0]

    def pending(self) -> int:
        """Events seen but not yet saved, over all tracked sessions."""
        return sum(max(0, self._unsaved(t)) for t in self._tracked.values())
