"""Turning the new events of a session into records: steps 2-4 of a save.

The seam: ``plan_save(view, saved, policy)`` is pure: given a ``SessionView``, the event
ids the ledger already holds and a policy, it returns the ``MemoryRecord``s to write and
the event ids they cover. The facade does the I/O around it (ledger read, backend upsert,
ledger write), which keeps this part testable without any engine.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInputError, LongTermMemoryError
from .policies import MemoryAutoSavePolicy
from .policies.classify import classify_text
from .policies.policy import OWN_SELECT
from .records import MemoryRecord, plain_tree, record_id, repair_tree, repair_unicode
from .sessions import Event, SessionView
from .sessions.text_events import TextEvent, text_event


@dataclass
class SavePlan:
    records: list[MemoryRecord] = field(default_factory=list)
    covered: list[str] = field(default_factory=list)
    """Every new event id, kept or dropped by the policy: the ledger marks all of them."""

    @property
    def new_events(self) -> int:
        return len(self.covered)


def make_record(
    app_name: str,
    user_id: str,
    session_id: str,
    event: Event | TextEvent,
    policy: MemoryAutoSavePolicy,
    metadata: Mapping[str, Any] | None = None,
) -> MemoryRecord | None:
    """The record ``policy`` keeps of ``event`` (None: nothing kept).

    Anything that goes wrong turning the event into a record (a policy, a value no engine
    can hold) is an ``InvalidInputError`` naming the event: the caller's input, not a fault
    of the store, and never a foreign exception out of the library.
    """
    try:
        return _make_record(app_name, user_id, session_id, event, policy, metadata)
    except LongTermMemoryError:
        raise
    except Exception as exc:
        raise InvalidInputError(
            f"event {event.id!r} of session {session_id!r} cannot be saved ({type(exc).__name__}: {exc}); "
            "fix or leave out that event."
        ) from exc


def _make_record(
    app_name: str,
    user_id: str,
    session_id: str,
    event: Event | TextEvent,
    policy: MemoryAutoSavePolicy,
    metadata: Mapping[str, Any] | None,
) -> MemoryRecord | None:
    if isinstance(event, TextEvent):  # classified as its Event would be (``sessions.text_events``)
        selected = policy.select_classified(classify_text(event), event.author)
    else:
        selected = policy.select(event)
    if selected is None:
        return None
    # Bounded before repaired: repair_tree recurses, and metadata nests as deep as it was sent.
    meta: dict[str, Any] = plain_tree(dict(metadata)) if metadata else {}
    if event.custom_metadata:
        meta.setdefault("event_metadata", plain_tree(event.custom_metadata))
    if selected.media:
        meta["media"] = repair_tree(selected.media)
    # Plain validated construction: measured twice as fast as model_construct (whose
    # defaults loop runs in Python), and it checks what we built.
    return MemoryRecord(
        id=record_id(app_name, user_id, session_id, event.id),
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        event_id=event.id,
        author=event.author,
        role=(role := repair_unicode(selected.role)),
        event_types=selected.event_types,
        # Repaired here too: text parts and tool calls are on the way in, but transcriptions,
        # error messages, code and media names arrive in other fields.
        text=repair_unicode(selected.text),
        # The parts as classified: repaired there (see ``classify``), not walked again.
        content={"role": role, "parts": selected.parts},
        timestamp=event.timestamp,
        metadata=meta,
    )


#: Seconds between events of a session given no time (the clock's microsecond), in the session's order.
TIE = 1e-6


def _dated(event: Event | TextEvent, timestamp: float) -> Event | TextEvent:
    """``event`` at ``timestamp``: a copy of an ``Event`` (``to_event`` hands back the caller's own
    object, which a save must not change: a later save reads its time again), our ``TextEvent`` itself."""
    if isinstance(event, TextEvent):
        event.timestamp = timestamp
        return event
    return event.model_copy(update={"timestamp": timestamp})


def plan_save(
    view: SessionView,
    saved: set[str],
    policy: MemoryAutoSavePolicy,
    metadata: Mapping[str, Any] | None = None,
    now: float | None = None,
) -> SavePlan:
    """The records to write for the events of ``view`` not in ``saved``, and the ids they cover.

    An event without a time is dated ``now`` (default: the clock), the time of its first save:
    its id does not depend on it (``sessions.event_ids``), so a replay writes nothing and the
    memory keeps that time.

    An id that comes twice in ``view`` (an identical event repeated, see ``event_ids``) is one
    event: covered and written once, so the ``SaveResult`` counts what was written.
    """
    plan = SavePlan()
    planned: set[str] = set()
    now = time.time() if now is None else now
    # An event of text parts alone is read without the models (``sessions.text_events``), unless the
    # policy has a ``select`` of its own, which is given ``Event``s.
    texts = type(policy).select is OWN_SELECT
    for i, eid in enumerate(view.event_ids):
        if eid in saved or eid in planned:
            continue
        planned.add(eid)
        plan.covered.append(eid)
        event = (text_event(view.raw_events[i], eid) if texts else None) or view.event(i)
        if not event.timestamp:  # no time given: the time of its first save, in the session's order
            event = _dated(event, now + i * TIE)
        record = make_record(view.app_name, view.user_id, view.session_id, event, policy, metadata)
        if record is not None:
            plan.records.append(record)
    return plan
