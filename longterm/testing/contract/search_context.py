"""The contract's search with context: what a user of ``search_memory`` sees of a hit's
neighbours and of time named in a question, on every engine.

The seam: ``SearchContext``, a mixin of test methods over ``Fixtures``' ``memory``. Each test
saves a few sessions through the public API and searches them as a user would: the answer
to a question found through the question before it, ``context=N`` returning the hit's turns
in order, a time in the question favouring that time's memories, and, above all, an erased
turn's words found through no neighbour (context is read from the store at search time, so
it cannot outlive its source).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from ... import LongTermMemory

MAY = datetime(2023, 5, 10, tzinfo=timezone.utc).timestamp()
JUNE = datetime(2023, 6, 20, tzinfo=timezone.utc).timestamp()
NOW = datetime(2023, 7, 1, tzinfo=timezone.utc)


def _session(sid: str, turns: list[tuple[str, str, float]], user: str = "u1", app: str = "app") -> dict[str, Any]:
    """Turns (author, text, time) of one session, role from the author."""
    events = [
        {
            "id": f"{sid}-{i}",
            "author": author,
            "timestamp": at,
            "content": {"role": "user" if author == "user" else "model", "parts": [{"text": text}]},
        }
        for i, (author, text, at) in enumerate(turns, start=1)
    ]
    return {"id": sid, "app_name": app, "user_id": user, "events": events}


def _texts(res: Any) -> list[str]:
    return [m.content.parts[0].text for m in res.memories]


class SearchContext:
    """``search_memory``'s context and time on the engine under test (see the module docstring)."""

    @pytest.mark.asyncio
    async def test_context_returns_each_hits_turns_before_and_after_in_order(self, memory: LongTermMemory) -> None:
        app = memory.default_app  # the simple API's app
        turns = [
            ("user", "I adopted a cat", MAY),
            ("user", "her name is Luna", MAY + 1),
            ("user", "she is grey", MAY + 2),
        ]
        await memory.add_session_to_memory(_session("s1", turns, app=app))
        res = await memory.search_memory(app_name=app, user_id="u1", query="Luna", context=1)
        assert _texts(res)[0] == "her name is Luna"
        context = res.memories[0].custom_metadata["context"]
        assert [c["text"] for c in context] == ["I adopted a cat", "she is grey"]
        typed = await memory.search("Luna", user_id="u1", context=2)
        assert [c.text for c in typed[0].context] == ["I adopted a cat", "she is grey"]  # the session has no more
        assert (await memory.search("Luna", user_id="u1"))[0].context == []  # only when asked

    @pytest.mark.asyncio
    async def test_an_erased_turns_words_are_found_through_no_neighbour(self, memory: LongTermMemory) -> None:
        turns = [
            ("user", "my locker code is zanzibar", MAY),
            ("user", "and the gym opens at six", MAY + 1),
            ("user", "I go there after work", MAY + 2),
        ]
        await memory.add_session_to_memory(_session("s1", turns))
        res = await memory.search_memory(app_name="app", user_id="u1", query="zanzibar", context=1)
        assert _texts(res)[:1] == ["my locker code is zanzibar"]
        erased = res.memories[0].id
        assert await memory.delete_memory(app_name="app", user_id="u1", memory_id=erased) == 1
        for context in (0, 1, 3):
            res = await memory.search_memory(app_name="app", user_id="u1", query="zanzibar", context=context)
            seen = [*_texts(res), *(c["text"] for m in res.memories for c in m.custom_metadata.get("context", []))]
            assert not [t for t in seen if "zanzibar" in t]  # (a vectors-only engine returns the others)
            if memory.backend_name != "mem0":
                assert res.memories == []  # full text: nothing holds the word, and no neighbour lends it
        res = await memory.search_memory(app_name="app", user_id="u1", query="gym opens", context=2)
        assert all("zanzibar" not in c["text"] for m in res.memories for c in m.custom_metadata.get("context", []))

    @pytest.mark.asyncio
    async def test_a_time_in_the_question_favours_that_times_memories(self, memory: LongTermMemory) -> None:
        june = "I went hiking with Ana and her dog, and it rained all day long"
        await memory.add_session_to_memory(_session("june", [("user", june, JUNE)]))
        await memory.add_session_to_memory(_session("may", [("user", "hiking with Ana", MAY)]))
        plain = await memory.search_memory(app_name="app", user_id="u1", query="hiking with Ana", now=NOW)
        assert _texts(plain) == ["hiking with Ana", june]  # the shorter first, by words alone
        for query in ("hiking with Ana last month", "上个月 hiking with Ana"):
            res = await memory.search_memory(app_name="app", user_id="u1", query=query, now=NOW)
            assert _texts(res)[0] == june, query
        res = await memory.search_memory(app_name="app", user_id="u1", query="hiking with Ana in June", now=NOW)
        assert _texts(res)[0] == june

    @pytest.mark.asyncio
    async def test_a_neighbour_shows_only_in_its_own_users_context(self, memory: LongTermMemory) -> None:
        for user in ("u1", "u2"):
            turns = [("user", f"the secret of {user} is kept", MAY), ("user", f"flamingo of {user}", MAY + 1)]
            await memory.add_session_to_memory(_session("same-id", turns, user=user))
        res = await memory.search_memory(app_name="app", user_id="u1", query="the secret of u1", context=2)
        assert _texts(res)[0] == "the secret of u1 is kept"  # (a vectors-only engine returns the other turn too)
        assert [c["text"] for c in res.memories[0].custom_metadata["context"]] == ["flamingo of u1"]
        seen = [*_texts(res), *(c["text"] for m in res.memories for c in m.custom_metadata.get("context", []))]
        assert not [t for t in seen if "u2" in t]
