"""A save's plan (``saves.plan_save``) never changes the caller's events: ``to_event`` hands back the
caller's own ``Event``, which the plan dated in place where it had no time."""

from __future__ import annotations

from longterm.policies import resolve_policy
from longterm.saves import TIE, plan_save
from longterm.sessions import Event, SessionView, event_ids

T = 1_700_000_000.0
POLICY = resolve_policy("all")
CALL = {"function_call": {"name": "weather", "args": {"city": "Oslo"}}}  # not text alone: read as an Event


def _event(eid: str, at: float) -> Event:
    return Event.model_validate({"id": eid, "author": "agent", "timestamp": at, "content": {"parts": [CALL]}})


def test_a_save_never_changes_the_callers_events() -> None:
    events = [_event("z", T), _event("n", 0)]
    first = plan_save(SessionView("app", "u1", "s1", event_ids(events), events), set(), POLICY, now=T + 9)
    assert [e.timestamp for e in events] == [T, 0], "the caller's events as given"
    assert [r.timestamp for r in first.records] == [T, T + 9 + TIE]  # no time: the save's, in the session's order
