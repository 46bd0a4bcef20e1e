"""What an auto-saver tracks: the sessions a save may still be owed, by user, from any thread.

The seam: ``Tracker.track(key, session, reconsider=)`` records a turn of a session (a new
``Tracked`` the first time, the same one after) and returns it, or None once the tracker is
closed; ``find(key)``, ``others(key)`` (the user's other sessions), ``all()`` and ``drop(t)``
read and forget; ``close()`` forgets everything and hands back the idle timers still armed.
``session_key(session)`` and ``event_count(session)`` read an ADK ``Session``, a dict or a
``longterm.Session`` alike.

Why apart from the saver: the saver decides when to save, on its memory's background loop;
the bookkeeping is written by callers' threads (``notify``) and by that loop at once, so it
lives behind one lock of its own, and nothing here waits or saves.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sized
from dataclasses import dataclass, field

from .. import telemetry

#: Turns an auto-save's span links to at most (the latest ones since the session's last save).
MAX_LINKS = 32

#: (app_name, user_id, session id)
Key = tuple[str, str, str]


def _get(obj: object, name: str) -> object:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def session_key(session: object) -> Key:
    """(app_name, user_id, id) of an ADK Session, a dict or a ``longterm.Session``."""
    app, user, sid = _get(session, "app_name"), _get(session, "user_id"), _get(session, "id")
    if not (isinstance(app, str) and app and isinstance(user, str) and user and isinstance(sid, str) and sid):
        raise ValueError(f"a session needs a non-empty app_name, user_id and id, got {(app, user, sid)!r}")
    return app, user, sid


def event_count(session: object) -> int:
    events = _get(session, "events")
    return len(events) if isinstance(events, Sized) else 0


@dataclass(eq=False)
class Tracked:
    """One session a save may be owed: its latest state and what the saver knows of it."""

    key: Key
    session: object
    reconsider: bool
    saved_events: int = 0
    last_save: float = field(default_factory=time.monotonic)
    last_turn: float = field(default_factory=time.monotonic)
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    last_error: str | None = None
    links: list[object] = field(default_factory=list)
    """The spans of the turns since the last save (``telemetry.link_here``): the save links to them."""

    def unsaved(self) -> int:
        """Events of the session not yet saved (negative when it shrank since)."""
        return event_count(self.session) - self.saved_events


class Tracker:
    """The tracked sessions, per (app, user), behind one lock."""

    def __init__(self) -> None:
        self._users: dict[tuple[str, str], dict[str, Tracked]] = {}
        self._lock = threading.Lock()
        self.closed = False

    def track(self, key: Key, session: object, *, reconsider: bool) -> Tracked | None:
        """A turn ended in ``session``: its ``Tracked`` (new the first time), or None once closed."""
        with self._lock:
            if self.closed:
                return None
            sessions = self._users.setdefault(key[:2], {})
            t = sessions.get(key[2])
            if t is None:
                t = sessions[key[2]] = Tracked(key=key, session=session, reconsider=reconsider)
            t.session, t.last_turn = session, time.monotonic()
            link = telemetry.link_here()
            if link is not None:
                t.links = [*t.links[-(MAX_LINKS - 1) :], link]
            return t

    def find(self, key: Key) -> Tracked | None:
        with self._lock:
            return self._users.get(key[:2], {}).get(key[2])

    def others(self, key: Key) -> list[Tracked]:
        """The other sessions of ``key``'s user."""
        with self._lock:
            return [t for sid, t in self._users.get(key[:2], {}).items() if sid != key[2]]

    def all(self) -> list[Tracked]:
        with self._lock:
            return [t for sessions in self._users.values() for t in sessions.values()]

    def drop(self, t: Tracked) -> None:
        """Forget ``t`` (and stop its timer; call it on the loop the timer runs on)."""
        if t.timer is not None:
            t.timer.cancel()
            t.timer = None
        with self._lock:
            sessions = self._users.get(t.key[:2])
            if sessions is not None and sessions.get(t.key[2]) is t:
                del sessions[t.key[2]]
                if not sessions:
                    del self._users[t.key[:2]]

    def close(self) -> list[asyncio.TimerHandle]:
        """Forget everything, track nothing more; the timers still armed, to cancel on their loop."""
        with self._lock:
            self.closed = True
            timers = [t.timer for ts in self._users.values() for t in ts.values() if t.timer is not None]
            self._users.clear()  # a timer that still fires finds nothing to save
        return timers
