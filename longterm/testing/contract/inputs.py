"""The contract's front door: every common conversation shape is saved or refused, never dropped.

The seam: ``Inputs``, a mixin of test methods over ``Fixtures``' ``memory`` and
``open_memory``. Each test is what a new user does in the first minutes: OpenAI chat messages,
mem0's ``add()`` inputs, LangChain messages, a session holding ``messages``, plain strings,
the simple API; and what must never happen: an input the library does not understand marked
handled, a memory without a time dated 1970.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from ... import InvalidInputError, LongTermMemory, Scope
from ...entries import entry_text
from .. import make_session
from .fixtures import search_texts

#: (name, events) in the shapes of the ecosystem; each holds the word after "#" in its text.
SHAPES: list[tuple[str, list[Any]]] = [
    ("openai", [{"role": "user", "content": "I like blues #saxophone"}]),
    ("openai typed parts", [{"role": "user", "content": [{"type": "text", "text": "my dog is #rufus"}]}]),
    ("openai named", [{"role": "user", "name": "alice", "content": "call me #ally"}]),
    (
        "openai tool call and result",
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "#reykjavik"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "cold in #reykjavik"},
        ],
    ),
    ("mem0 string", ["I am allergic to #peanuts"]),
    ("langchain dict", [{"type": "human", "content": "I drive a #volvo"}, {"type": "ai", "content": "Noted"}]),
    (
        "langchain dumpd",
        [
            {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain", "schema", "messages", "HumanMessage"],
                "kwargs": {"content": "my sister lives in #lisbon", "type": "human"},
            }
        ],
    ),
    ("genai content", [{"role": "user", "parts": [{"text": "I collect #stamps"}]}]),
]


def _word(events: list[Any]) -> str:
    for e in events:
        text = e if isinstance(e, str) else str(e)
        if "#" in text:
            return text.split("#", 1)[1].split()[0].strip("'\"}],")
    raise AssertionError("no #word in the shape")


class Inputs:
    """Input shapes, refusals, times and the simple API, on every engine."""

    @pytest.mark.asyncio
    @pytest.mark.parametrize("shape", [name for name, _ in SHAPES])
    async def test_every_common_message_shape_is_saved_and_found(self, memory: LongTermMemory, shape: str):
        events = dict(SHAPES)[shape]
        word = _word(events)
        result = await memory.add_events_to_memory(app_name="app", user_id="u1", events=events, session_id="chat")
        assert result.new_events == len(events)
        again = await memory.add_events_to_memory(app_name="app", user_id="u1", events=events, session_id="chat")
        assert (again.new_events, again.saved) == (0, 0)
        # the default policy keeps user text: a shape's user words are found
        if shape not in ("openai tool call and result",):
            assert result.saved >= 1
            assert any(word in t for t in await search_texts(memory, "app", "u1", word))
        everything = await memory.add({"role": "user", "content": f"again {word}"}, user_id="u2")
        assert everything.saved == 1
        all_kept = await memory.add(events, user_id="u3")
        assert all_kept.saved == len(events)
        assert any(word in m.text for m in await memory.search(word, user_id="u3"))

    @pytest.mark.asyncio
    async def test_events_given_with_and_without_their_session_are_saved_once_and_stay_erased(
        self, memory: LongTermMemory
    ):
        turns = [("user", "my bike is a red Brompton"), ("user", "I park the bike at the office")]
        first, later = (
            make_session("ride", turns=turns),
            make_session("walk", turns=[("user", "my walk is by the bike shed")]),
        )
        assert (await memory.add_session_to_memory(first)).saved == 2
        again = await memory.add_events_to_memory(app_name="app", user_id="u1", events=first["events"])
        assert (again.new_events, again.saved) == (0, 0), "given without their session: no copy (_ledger_sessions)"
        found = (await memory.search_memory(app_name="app", user_id="u1", query="Brompton")).memories
        (gone,) = [m.id for m in found if "Brompton" in entry_text(m)]
        assert gone is not None and await memory.delete_memory(app_name="app", user_id="u1", memory_id=gone) == 1
        await memory.add_events_to_memory(app_name="app", user_id="u1", events=first["events"])
        delta = await memory.add_events_to_memory(app_name="app", user_id="u1", events=later["events"])
        assert delta.saved == 1, "a session-less delta of new events is saved"
        assert (await memory.add_session_to_memory(later)).saved == 0, "the session of a delta saved before: no copy"
        assert sorted(await search_texts(memory, "app", "u1", "bike")) == [
            "I park the bike at the office",
            "my walk is by the bike shed",
        ], "what was erased stays erased, and nothing is kept twice"

    @pytest.mark.asyncio
    async def test_a_session_holding_messages_is_saved(self, memory: LongTermMemory):
        session = {
            "id": "s1",
            "app_name": "app",
            "user_id": "u1",
            "messages": [{"role": "user", "content": "my locker code is 4417"}, {"role": "assistant", "content": "ok"}],
        }
        assert (await memory.add_session_to_memory(session)).saved == 1
        assert await search_texts(memory, "app", "u1", "locker code") == ["my locker code is 4417"]

    @pytest.mark.asyncio
    async def test_an_input_not_understood_is_refused_and_never_marked_handled(self, memory: LongTermMemory):
        bad: list[list[Any]] = [
            [{"id": "e1", "foo": "bar"}],
            [{"id": "e1", "content": {"parts": [{"foo": "bar"}]}}],
            [{"id": "e1", "role": "user", "content": [{"type": "hologram", "data": "x"}]}],
            [{"id": "e1", "role": "user", "content": 42}],
            [42],
        ]
        for events in bad:
            with pytest.raises(InvalidInputError, match="accepted|known|part"):
                await memory.add_events_to_memory(app_name="app", user_id="u1", events=events, session_id="s1")
        with pytest.raises(InvalidInputError, match="events"):
            await memory.add_session_to_memory({"id": "s1", "app_name": "app", "user_id": "u1", "turns": [{"x": 1}]})
        assert await memory.count(app_name="app", user_id="u1") == 0
        fixed = [{"id": "e1", "role": "user", "content": "the fixed event about zeppelins"}]
        result = await memory.add_events_to_memory(app_name="app", user_id="u1", events=fixed, session_id="s1")
        assert (result.new_events, result.saved) == (1, 1)
        assert await search_texts(memory, "app", "u1", "zeppelins") == ["the fixed event about zeppelins"]

    @pytest.mark.asyncio
    async def test_a_refused_event_in_an_automatic_save_waits_unmarked(self, memory: LongTermMemory):
        session = make_session(turns=[("user", "a readable line about kayaks")])
        session["events"].append({"id": "odd", "foo": "bar"})
        result = await memory.add_session_to_memory(session, lenient=True)
        assert (result.saved, result.refused) == (1, 1)
        session["events"][-1] = {"id": "odd", "author": "user", "content": "now readable, about canoes"}
        assert (await memory.add_session_to_memory(session)).saved == 1
        assert (await search_texts(memory, "app", "u1", "canoes"))[0] == "now readable, about canoes"

    @pytest.mark.asyncio
    async def test_a_timeless_session_is_dated_at_its_first_save_and_a_replay_keeps_it(self, memory: LongTermMemory):
        session = {
            "id": "s1",
            "app_name": "app",
            "user_id": "u1",
            "events": [{"author": "user", "content": "I moved to Tromso"}, {"role": "user", "content": "in winter"}],
        }
        before = time.time()
        assert (await memory.add_session_to_memory(session)).saved == 2
        first = [
            m.timestamp for m in (await memory.search_memory(app_name="app", user_id="u1", query="tromso")).memories
        ]
        assert first and all((m or "") >= time.strftime("%Y", time.gmtime(before)) for m in first)
        stamps = [r.timestamp async for r in memory.iter_records(app_name="app", user_id="u1")]
        assert all(before - 1 <= t <= time.time() + 1 for t in stamps)
        again = await memory.add_session_to_memory(session)
        assert (again.new_events, again.saved) == (0, 0)
        assert [r.timestamp async for r in memory.iter_records(app_name="app", user_id="u1")] == stamps

    @pytest.mark.asyncio
    async def test_the_simple_api_adds_searches_gets_pages_and_deletes(
        self, open_memory: Callable[..., LongTermMemory]
    ):
        memory = open_memory(app_name="travel")
        first = await memory.add("My passport expires in August 2027", user_id="alice")
        twice = await memory.add("My passport expires in August 2027", user_id="alice")
        assert first.saved == twice.saved == 1 and first.memory_ids != twice.memory_ids  # two adds, two memories
        await memory.add([{"role": "user", "content": f"note {i} about the garden"} for i in range(5)], user_id="alice")
        await memory.add("bob's own words about the garden", user_id="bob")
        hits = await memory.search("when does my passport expire?", user_id="alice")
        assert [h.text for h in hits[:2]] == ["My passport expires in August 2027"] * 2
        assert all(0.0 <= (h.score or 0) <= 1.0 and h.kind == "evidence" for h in hits)
        got = await memory.get(first.memory_ids[0], user_id="alice")
        assert got is not None and got.text == "My passport expires in August 2027" and got.session_id
        assert await memory.get(first.memory_ids[0], user_id="bob") is None
        page, seen = await memory.get_all(user_id="alice", limit=3), []
        while True:
            seen += [m.id for m in page.memories]
            if page.next_cursor is None:
                break
            page = await memory.get_all(user_id="alice", limit=3, cursor=page.next_cursor)
        assert len(seen) == len(set(seen)) == 7
        assert await memory.delete(first.memory_ids[0], user_id="alice") is True
        assert await memory.delete(first.memory_ids[0], user_id="alice") is False
        assert await memory.delete_all(user_id="alice") == 6
        assert await memory.search("garden", user_id="alice") == []
        assert [m.text for m in await memory.search("garden", user_id="bob")] == ["bob's own words about the garden"]
        # the same store through ADK's API: the simple API's app is the memory's app_name
        res = await memory.search_memory(app_name="travel", user_id="bob", query="garden")
        assert [entry_text(m) for m in res.memories] == ["bob's own words about the garden"]

    def test_the_simple_api_from_sync_code(self, open_memory: Callable[..., LongTermMemory]):
        with open_memory(app_name="notes") as memory:
            result = memory.add_sync([{"role": "user", "content": "the wifi password is hunter2"}], user_id="u")
            assert result.saved == 1
            hits = memory.search_sync("wifi password", user_id="u", min_score=0.5)
            assert [h.text for h in hits] == ["the wifi password is hunter2"]
            assert memory.get_sync(result.memory_ids[0], user_id="u") is not None
            assert len(memory.get_all_sync(user_id="u").memories) == 1
            assert memory.delete_sync(result.memory_ids[0], user_id="u") is True
            assert memory.delete_all_sync(user_id="u") == 0

    @pytest.mark.asyncio
    async def test_scores_are_in_zero_one_with_one_meaning(self, memory: LongTermMemory):
        await memory.add(
            ["My flight to Bangkok leaves on March 3rd", "I am vegetarian", "My sister Ana lives in Porto"],
            user_id="u",
            session_id="s",
        )
        best = (await memory.search("when is my flight to Bangkok?", user_id="u"))[0]
        assert best.text == "My flight to Bangkok leaves on March 3rd"
        assert best.score is not None and 0.0 <= best.score <= 1.0 and best.raw_score is not None
        if getattr((await memory.located(memory.default_app, "u")).backend, "text_arm", "fulltext") != "fulltext":
            return  # vectors only (mem0): the score is the engine's similarity, in [0, 1]
        assert best.score == 1.0  # every content word of the question
        for h in await memory.search("what is the capital of Mongolia?", user_id="u"):
            assert (h.score or 0.0) < 0.2
        strict = await memory.search("flight Bangkok sister", user_id="u", min_score=0.7)
        assert strict == []
        loose = await memory.search("flight Bangkok sister", user_id="u", min_score=0.3)
        assert {h.text for h in loose} == {"My flight to Bangkok leaves on March 3rd", "My sister Ana lives in Porto"}
        with pytest.raises(InvalidInputError, match="min_score"):
            await memory.search("flight", user_id="u", min_score=2)

    @pytest.mark.asyncio
    async def test_pages_by_time_cover_every_record_once_in_order(self, memory: LongTermMemory):
        """The time-ordered page primitive (``get_all``, the UI): newest or oldest first, by cursor."""
        turns = [("user", f"entry {i} about the harbour") for i in range(25)]
        session = make_session(turns=turns)
        for e in session["events"][-3:]:  # three at the same time: the cursor still moves past each once
            e["timestamp"] = 1_700_000_100.0
        await memory.add_session_to_memory(session)
        engine = (await memory.located("app", "u1")).backend
        scope = Scope(app_name="app", user_id="u1")
        for newest_first in (True, False):
            seen: list[tuple[float, str]] = []
            cursor = None
            while True:
                page, cursor = await engine.page_by_time(scope, cursor, 7, newest_first=newest_first)  # type: ignore[attr-defined]
                assert len(page) <= 7
                seen += [(r.timestamp, r.id) for r in page]
                if cursor is None:
                    break
            assert len(seen) == len({i for _, i in seen}) == 25
            times = [t for t, _ in seen]
            assert times == sorted(times, reverse=newest_first)
