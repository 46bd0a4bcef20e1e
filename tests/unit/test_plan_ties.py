"""Events given one time (``saves.plan_save``): dated 1 us apart in the session's order, the same on
every save of the session, so every engine orders a hit's neighbours as the session did."""

from __future__ import annotations

from longterm.policies import resolve_policy
from longterm.saves import TIE, plan_save
from longterm.sessions import SessionView, event_ids

T = 1_700_000_000.0
POLICY = resolve_policy("all")


def _view(events: list[dict[str, object]]) -> SessionView:
    return SessionView("app", "u1", "s1", event_ids(events), events)


def _event(eid: str, text: str, at: float = T) -> dict[str, object]:
    return {"id": eid, "author": "user", "timestamp": at, "content": {"role": "user", "parts": [{"text": text}]}}


def test_a_growing_session_dates_each_tied_event_as_its_first_save_did() -> None:
    first = plan_save(_view([_event("z", "one")]), set(), POLICY)
    grown = [_event("z", "one"), _event("a", "two"), _event("z", "one"), _event("m", "three"), _event("q", "x", T + 5)]
    later = plan_save(_view(grown), {"z"}, POLICY)
    times = {r.event_id: r.timestamp for r in [*first.records, *later.records]}
    # "z" repeated identically is one event: it takes no rank; "q" has a time of its own
    assert times == {"z": T, "a": T + TIE, "m": T + 2 * TIE, "q": T + 5}


def test_a_save_never_changes_the_callers_events() -> None:
    """``to_event`` hands back the caller's own ``Event``: a save that dated it in place moved its time
    for the next save, which then ranked the session's tied events anew."""
    from longterm.sessions import Event

    call = {"function_call": {"name": "weather", "args": {"city": "Oslo"}}}  # not text alone: read as an Event
    given = [_event("z", "z"), _event("a", "a"), _event("n", "none", 0)]
    events = [Event.model_validate({**e, "content": {"role": "model", "parts": [call]}}) for e in given]
    plan_save(_view(events), set(), POLICY, now=T + 9)  # type: ignore[arg-type]
    assert [e.timestamp for e in events] == [T, T, 0]
    later = Event.model_validate({**_event("m", "m"), "content": {"role": "model", "parts": [call]}})
    again = plan_save(_view([*events, later]), {"z", "a", "n"}, POLICY)  # type: ignore[list-item]
    assert [(r.event_id, r.timestamp) for r in again.records] == [("m", T + 2 * TIE)]
