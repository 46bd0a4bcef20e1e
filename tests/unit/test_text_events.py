"""An event of text parts is planned without the models (``sessions.text_events``): the records, the
ids covered and the errors must be exactly what reading it as an ``Event`` gives, for any such
event (generated: odd text, lone surrogates, blank parts, role aliases, times in seconds or
milliseconds, out of range) under any policy; and a shape it does not cover goes the long way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import longterm.saves as saves
import longterm.shapes as shapes
from longterm import LongTermMemory
from longterm.errors import InvalidInputError
from longterm.policies import MemoryAutoSavePolicy, resolve_policy
from longterm.sessions import read_session
from longterm.sessions.text_events import TextEvent, text_event

NOW = 1_750_000_000.0
POLICIES = [
    resolve_policy(None),
    resolve_policy("all"),
    resolve_policy({"preset": "custom", "include_roles": ["assistant", "user"], "exclude_authors": ["bot"]}),
    resolve_policy({"include_authors": ["ana", "user"], "include_empty_text": True}),
    resolve_policy({"include_event_types": ["text"], "exclude_roles": ["system"]}),
    resolve_policy({"exclude_event_types": ["text"]}),
]

#: Text of any characters, lone surrogates too (``st.text`` never draws those).
texts = st.lists(st.one_of(st.characters(), st.sampled_from(["\ud800", "\udfff", " ", "\u00a0"])), max_size=12).map(
    "".join
)
roles = st.one_of(
    st.none(), st.sampled_from(["user", "Assistant", " HUMAN ", "model", "tool", "system", "", "x", "\ud800", "a\x00b"])
)
authors = st.one_of(st.none(), st.sampled_from(["user", "ana", "bot", " System", ""]), texts)
times = st.one_of(
    st.none(),
    st.integers(-10, 10**14),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1.5, 1_700_000_000, 1_700_000_000_123, 10**13, 2**63, 2**1030, -(10**400), 10**5000]),
)
ids = st.one_of(st.sampled_from(["e1", "e2", "", None]), st.integers(), st.lists(st.integers(), max_size=2))


@st.composite
def text_events(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {}
    content: dict[str, Any] = {"parts": [{"text": t} for t in draw(st.lists(texts, min_size=1, max_size=3))]}
    if (role := draw(roles)) is not None or draw(st.booleans()):
        content["role"] = role
    event["content"] = content
    for key, values in (("author", authors), ("timestamp", times), ("id", ids)):
        if draw(st.booleans()):
            event[key] = draw(values)
    return event


def _plan(events: list[dict[str, Any]], policy: MemoryAutoSavePolicy) -> Any:
    try:
        view = read_session({"id": "s", "app_name": "app", "user_id": "u", "events": events})
        plan = saves.plan_save(view, set(), policy, now=NOW)
    except InvalidInputError as exc:
        return ("refused", str(exc))
    return [r.model_dump() for r in plan.records], plan.covered


def _the_long_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every event read as an ``Event``, and through every check of the input gate."""
    monkeypatch.setattr(saves, "text_event", lambda raw, eid: None)
    monkeypatch.setattr(shapes, "text_parts", lambda raw: None)


def _both_ways(events: list[Any], policy: MemoryAutoSavePolicy) -> tuple[Any, Any]:
    """``_plan`` of ``events`` as saves run it, and the long way (``_the_long_way``)."""
    fast = _plan(events, policy)
    with pytest.MonkeyPatch.context() as mp:
        _the_long_way(mp)
        return fast, _plan(events, policy)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(text_events(), min_size=1, max_size=4), policy=st.sampled_from(POLICIES))
def test_a_text_event_is_planned_as_its_event_would_be(events: list[dict[str, Any]], policy: Any) -> None:
    fast, slow = _both_ways(events, policy)
    assert fast == slow


def test_the_shape_it_reads_is_the_common_one_and_nothing_else() -> None:
    text = {"role": "user", "parts": [{"text": "hi"}]}
    assert isinstance(text_event({"author": "user", "timestamp": 1.0, "content": text}, "e"), TextEvent)
    assert isinstance(text_event({"id": "x", "content": {"parts": [{"text": "a"}, {"text": " "}]}}, "e"), TextEvent)
    others = [
        {"author": "user", "content": text, "custom_metadata": {"k": 1}},  # metadata kept by Event
        {"author": "user", "content": {"role": "user", "parts": [{"text": "hi", "thought": True}]}},
        {"author": "user", "content": {"role": "user", "parts": [{"function_call": {"name": "f"}}]}},
        {"author": "user", "content": {"role": "user", "parts": []}},
        {"author": "user", "content": "hi"},
        {"author": 7, "content": text},
        {"author": "user", "timestamp": "2024-05-01T10:00:00Z", "content": text},
        {"author": "user", "timestamp": True, "content": text},
        {"author": "user", "timestamp": 1e300, "content": text},  # refused: the Event path says why
        {"author": "user", "content": {**text, "extra": 1}},
        {"author": "user", "partial": False, "content": text},
    ]
    assert [text_event(raw, "e") for raw in others] == [None] * len(others)


def test_a_policy_with_its_own_select_is_given_events(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[type] = []

    class Mine(MemoryAutoSavePolicy):
        def select(self, event: Any) -> Any:
            seen.append(type(event))
            return super().select(event)

    events = [{"author": "user", "content": {"role": "user", "parts": [{"text": "hello"}]}}]
    view = read_session({"id": "s", "app_name": "app", "user_id": "u", "events": events})
    assert len(saves.plan_save(view, set(), Mine(), now=NOW).records) == 1
    assert [t.__name__ for t in seen] == ["Event"]


def test_a_policy_whose_select_was_patched_onto_the_class_is_given_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MemoryAutoSavePolicy, "select", lambda self, event: None)  # keeps nothing
    events = [{"author": "user", "content": {"role": "user", "parts": [{"text": "hello"}]}}]
    view = read_session({"id": "s", "app_name": "app", "user_id": "u", "events": events})
    plan = saves.plan_save(view, set(), MemoryAutoSavePolicy(), now=NOW)
    assert plan.records == [] and len(plan.covered) == 1


def test_a_policy_with_its_own_select_classified_is_asked_on_both_paths() -> None:
    class Nothing(MemoryAutoSavePolicy):
        def select_classified(self, c: Any, author: str) -> Any:
            return None

    events = [{"author": "user", "content": {"role": "user", "parts": [{"text": "hello"}]}}]
    assert _plan(events, Nothing()) == ([], _plan(events, resolve_policy(None))[1])


@pytest.mark.parametrize("when", [10**400, 2**1030], ids=["10**400", "2**1030"])
async def test_a_time_past_any_float_is_the_callers_error_on_every_way_in(tmp_path: Path, when: int) -> None:
    # It was an OverflowError out of the time reader: the save's guard reported it as the
    # store failing ("saving memories failed"), not as the caller's input.
    memory = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    event = {"author": "user", "timestamp": when, "content": {"role": "user", "parts": [{"text": "hi"}]}}
    with pytest.raises(InvalidInputError, match="timestamp of about .* digits is not a time"):
        await memory.add_session_to_memory({"id": "s", "app_name": "app", "user_id": "u", "events": [event]})
    with pytest.raises(InvalidInputError, match="not a time"):
        await memory.add({"role": "user", "content": "hi", "timestamp": when}, user_id="u")
    assert await memory.search("hi", user_id="u") == []
    await memory.close()


@st.composite
def adk_events(draw: st.DrawFn) -> Any:
    """ADK event objects as a runner's session holds them: mostly text parts, now and then a part
    or a field the text path must leave to the ``Event`` path."""
    from google.adk.events import Event
    from google.genai import types

    parts = []
    for text in draw(st.lists(texts, min_size=0, max_size=3)):
        kind = draw(st.sampled_from(["text"] * 6 + ["thought", "call", "none-set"]))
        if kind == "thought":
            parts.append(types.Part(text=text, thought=True))
        elif kind == "call":
            parts.append(types.Part(function_call=types.FunctionCall(name="f", args={"q": text})))
        elif kind == "none-set":
            parts.append(types.Part(text=text, thought=None))
        else:
            parts.append(types.Part(text=text))
    fields: dict[str, Any] = {"author": draw(st.sampled_from(["user", "agent", "User", "\ud800x", ""]))}
    fields["content"] = types.Content(role=draw(st.sampled_from(["user", "model", None])), parts=parts)
    fields["timestamp"] = draw(st.one_of(st.floats(0, 4e12), st.sampled_from([0.0, 1.7e9, 1.7e12])))
    extra = draw(st.sampled_from([{}, {}, {}, {"error_code": "E1"}, {"custom_metadata": {"k": 1}}, {"partial": False}]))
    return Event(**fields, **extra)


@settings(max_examples=150, deadline=None)
@given(events=st.lists(adk_events(), min_size=1, max_size=4), policy=st.sampled_from(POLICIES))
def test_an_adk_event_of_text_parts_is_planned_as_its_event_would_be(events: list[Any], policy: Any) -> None:
    fast, slow = _both_ways(events, policy)
    assert fast == slow


def test_an_adk_event_of_text_parts_is_read_without_the_models() -> None:
    from google.adk.events import Event
    from google.genai import types

    text = Event(author="user", content=types.Content(role="user", parts=[types.Part(text="hi")]))
    assert isinstance(text_event(text, "e"), TextEvent)
    thought = Event(author="user", content=types.Content(parts=[types.Part(text="hi", thought=True)]))
    failed = Event(author="user", error_code="E", content=types.Content(parts=[types.Part(text="hi")]))
    assert text_event(thought, "e") is None and text_event(failed, "e") is None
