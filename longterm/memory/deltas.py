"""Events given without their session: saved once across the user's sessions.

The seam: ``EVENTS``, the ledger session of events given with no session id (ADK's
``add_events_to_memory(session_id=None)``). A save leaves out the events another session of the
user already handled, so they are neither written nor counted as new: a session-less delta,
those any session of the user handled (``in_sessions``, before the save); a session, those the
deltas handled (``others``: read by the engine in the save's own call; ``handled`` picks them).

Why: a record's id derives from its session (``records.record_id``), so an event given once with
its session and once without would be two memories, and one the user erased under one session
would come back under the other. Why explicit ids only: an id derived from author, time and
content (``sessions.is_derived``) is unique within its session, not across sessions ("thanks" said
in two sessions is two memories). Why a listing and not a lookup by event id: no engine's ledger
is keyed by event id. The listing costs one ledger read a session, and only a session-less
delta pays it (pass ``session_id`` and it is none); a session's save reads the deltas in its
own engine call (a separate read cost a local save of 20 events about a fifth of its time). A
ledger that cannot list its sessions (``core.ledger.store_ledger``) leaves a session-less delta
unchecked against them. Two saves of one event racing each other, one with its session and one
without, can both write it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..core.ledger import Ledger, store_ledger
from ..records import Scope
from ..sessions import SessionView, is_derived

#: The ledger session of events given without a session id.
EVENTS = "_events"


def others(sid: str) -> tuple[str, ...]:
    """The ledger sessions a save of session ``sid`` reads beside its own, in the same engine
    call (``core.saving.Saving.save_planned``): a session reads the deltas; the deltas, none."""
    return () if sid == EVENTS else (EVENTS,)


def handled(ids: Sequence[str], saved: set[str]) -> set[str]:
    """The explicit ids of ``ids`` in ``saved``."""
    return {e for e in ids if e in saved and not is_derived(e)}


def _theirs(sid: str) -> bool:
    """Whether ``sid`` is a session of the user's (not the deltas' nor a NUL-led one of the library's)."""
    return sid != EVENTS and not sid.startswith("\x00")


async def in_sessions(ledger: Ledger, scope: Scope, ids: Sequence[str]) -> set[str]:
    """The explicit ids of ``ids`` (a session-less delta) that a session of ``scope`` handled,
    read session by session (module docstring)."""
    explicit = {e for e in ids if not is_derived(e)}
    listing = store_ledger(ledger)
    sessions = await listing.sessions(scope) if explicit and listing is not None else None
    found: set[str] = set()
    for sid in filter(_theirs, sessions or ()):
        found |= explicit & await ledger.saved(scope, sid)
        if found == explicit:
            break
    return found


def without(view: SessionView, ids: set[str]) -> SessionView:
    """``view`` without the events of ``ids``."""
    if not ids:
        return view
    keep = [i for i, e in enumerate(view.event_ids) if e not in ids]
    return replace(view, event_ids=[view.event_ids[i] for i in keep], raw_events=[view.raw_events[i] for i in keep])


__all__ = ["EVENTS", "handled", "in_sessions", "others", "without"]
