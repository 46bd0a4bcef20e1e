"""The contract's saving: a save and a search, upserts by id, a save made twice writing nothing new.

The seam: ``Saving``, a mixin of test methods over ``Fixtures``' ``memory``; an engine's test
class composes it with the other behaviours (``longterm.testing.contract``).
"""

from __future__ import annotations

from datetime import datetime

import pytest

from ... import InvalidInputError, LongTermMemory, Scope, record_id
from .. import make_record, make_session
from .fixtures import hit_parts, search_texts


class Saving:
    """A save is found as it was said, best match first; ids make every write idempotent."""

    @pytest.mark.asyncio
    async def test_round_trip(self, memory: LongTermMemory):
        s = make_session(turns=[("user", "My favourite colour is teal"), ("model", "Teal is nice")])
        result = await memory.add_session_to_memory(s)
        assert (result.new_events, result.saved) == (2, 1)
        res = await memory.search_memory(app_name="app", user_id="u1", query="what is my favourite colour?")
        assert len(res.memories) == 1
        m = res.memories[0]
        assert m.content.role == "user"
        assert hit_parts(m)[0].text == "My favourite colour is teal"
        assert m.author == "user"
        assert m.id == record_id("app", "u1", "s1", "s1-e0")
        assert datetime.fromisoformat(m.timestamp or "").timestamp() == pytest.approx(1_700_000_000.0)
        assert m.custom_metadata["session_id"] == "s1"
        assert m.custom_metadata["event_id"] == "s1-e0"
        assert m.custom_metadata["score"] > 0

    @pytest.mark.asyncio
    async def test_best_match_first_and_top_k(self, memory: LongTermMemory):
        turns = [("user", f"note number {i} about gardening") for i in range(8)]
        turns.append(("user", "I keep bees and harvest honey from the bees every summer"))
        await memory.add_session_to_memory(make_session(turns=turns))
        texts = await search_texts(memory, "app", "u1", "bees honey", k=3)
        assert texts[0].startswith("I keep bees")
        assert len(await search_texts(memory, "app", "u1", "gardening", k=3)) == 3

    @pytest.mark.asyncio
    async def test_upsert_is_idempotent_by_id(self, memory: LongTermMemory):
        scope = Scope(app_name="app", user_id="u1")
        text = "the quick brown fox"
        rec = make_record(text, author="user", role="user", timestamp=1.0)
        backend = (await memory.located("app", "u1")).backend
        await backend.upsert([rec])
        await backend.upsert([rec])
        await backend.upsert([rec, rec])
        assert await backend.count(scope) == 1
        lazy = {"text": "a lazy dog", "content": {"role": "user", "parts": [{"text": "a lazy dog"}]}}
        await backend.upsert([rec.model_copy(update=lazy)])
        assert await backend.count(scope) == 1
        assert await search_texts(memory, "app", "u1", "lazy dog") == ["a lazy dog"]
        assert "the quick brown fox" not in await search_texts(memory, "app", "u1", "quick fox")

    @pytest.mark.asyncio
    async def test_a_record_given_another_users_id_is_refused(self, memory: LongTermMemory):
        """Restoring alice's export into bob's account by editing the user: refused, and alice's
        memory stays hers (an id says where a memory belongs); with bob's own id it is bob's."""
        await memory.add_session_to_memory(make_session(user="alice", turns=[("user", "alice passport number")]))
        [rec] = [r async for r in memory.iter_records(app_name="app", user_id="alice")]
        diary = {"text": "bob private diary", "content": {"role": "user", "parts": [{"text": "bob private diary"}]}}
        moved = rec.model_copy(update={"user_id": "bob", **diary})
        with pytest.raises(InvalidInputError, match="ids are derived from where a memory belongs"):
            await memory.upsert_records([moved])
        assert await memory.count(app_name="app", user_id="bob") == 0
        assert await search_texts(memory, "app", "alice", "passport") == ["alice passport number"]
        await memory.upsert_records([moved.model_copy(update={"id": moved.own_id()})])
        assert await memory.delete_memories(app_name="app", user_id="alice") == 1
        assert await search_texts(memory, "app", "bob", "diary") == ["bob private diary"]

    @pytest.mark.asyncio
    async def test_saving_again_writes_nothing_new(self, memory: LongTermMemory):
        s = make_session(turns=[("user", f"fact {i} about tea") for i in range(5)])
        assert (await memory.add_session_to_memory(s)).saved == 5
        again = await memory.add_session_to_memory(s)
        assert (again.new_events, again.saved) == (0, 0)
        late = {"id": "late", "author": "user", "content": {"role": "user", "parts": [{"text": "one more about tea"}]}}
        s["events"].append(late)
        assert (await memory.add_session_to_memory(s)).saved == 1
        assert await memory.count(app_name="app", user_id="u1") == 6
