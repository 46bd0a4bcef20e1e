"""The contract's erasing: one memory, one session, a whole user; what was erased stays erased.

The seam: ``Erasing``, a mixin of test methods over ``Fixtures``' ``memory``. It replaces the
ledger's ``saved`` through the memory's public ``located`` to play a save planned before
an erase.
"""

from __future__ import annotations

from typing import Any

import pytest

from ... import InvalidInputError, LongTermMemory
from .. import make_session
from .fixtures import search_texts


class Erasing:
    """Deletes reach exactly what they name; a replayed session does not bring an erase back."""

    @pytest.mark.asyncio
    async def test_erase_and_delete_one(self, memory: LongTermMemory):
        await memory.add_session_to_memory(
            make_session(user="u1", turns=[("user", "alpha fact"), ("user", "beta fact")])
        )
        await memory.add_session_to_memory(make_session(user="u2", turns=[("user", "alpha fact of u2")]))
        res = await memory.search_memory(app_name="app", user_id="u1", query="beta")
        assert await memory.delete_memory(app_name="app", user_id="u1", memory_id=res.memories[0].id) == 1
        assert await search_texts(memory, "app", "u1", "fact") == ["alpha fact"]
        # an id of another user's memory deletes nothing
        other = (await memory.search_memory(app_name="app", user_id="u2", query="alpha")).memories[0].id
        assert await memory.delete_memory(app_name="app", user_id="u1", memory_id=other) == 0
        assert await memory.delete_memories(app_name="app", user_id="u1") == 1
        assert await memory.count(app_name="app", user_id="u1") == 0
        assert await search_texts(memory, "app", "u1", "alpha") == []
        assert await search_texts(memory, "app", "u2", "alpha") == ["alpha fact of u2"]

    @pytest.mark.asyncio
    @pytest.mark.parametrize("memory_id", ["*", "%", "", " ", "' OR '1'='1", "../", "{}", "a}|@scope:{*", "\\", "中文"])
    async def test_a_hostile_memory_id_deletes_nothing(self, memory: LongTermMemory, memory_id: str):
        await memory.add_session_to_memory(
            make_session(user="u1", turns=[("user", "alpha fact"), ("user", "beta fact")])
        )
        try:
            n = await memory.delete_memory(app_name="app", user_id="u1", memory_id=memory_id)
        except InvalidInputError:
            n = 0
        assert n == 0
        assert await memory.count(app_name="app", user_id="u1") == 2

    @pytest.mark.asyncio
    async def test_deleting_a_session_deletes_only_its_memories(self, memory: LongTermMemory):
        await memory.add_session_to_memory(make_session("s1", turns=[("user", "alpha fact"), ("user", "beta fact")]))
        await memory.add_session_to_memory(make_session("s2", turns=[("user", "gamma fact")]))
        await memory.add_session_to_memory(make_session("s1", user="u2", turns=[("user", "alpha fact of u2")]))
        for hostile in ("*", "%", "s1' OR '1'='1", "s"):
            assert await memory.delete_memory(app_name="app", user_id="u1", session_id=hostile) == 0
        assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s1") == 2
        assert await memory.count(app_name="app", user_id="u1") == 1
        assert [r.session_id async for r in memory.iter_records(app_name="app", user_id="u1")] == ["s2"]
        assert await search_texts(memory, "app", "u1", "fact") == ["gamma fact"]
        assert await search_texts(memory, "app", "u2", "alpha") == ["alpha fact of u2"]
        assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s1") == 0

    @pytest.mark.asyncio
    async def test_what_a_user_erased_stays_erased(self, memory: LongTermMemory):
        s = make_session(turns=[("user", "I live in Lisbon"), ("user", "my dog is called Rex")])
        assert (await memory.add_session_to_memory(s)).saved == 2
        assert await memory.delete_memories(app_name="app", user_id="u1") == 2
        # the session is still live and saved again: what was erased does not come back
        again = await memory.add_session_to_memory(s)
        assert (again.new_events, again.saved) == (0, 0)
        assert await memory.count(app_name="app", user_id="u1") == 0
        assert await search_texts(memory, "app", "u1", "Lisbon") == []
        # new events of that session are saved
        cello = {"id": "s1-new", "author": "user", "content": {"role": "user", "parts": [{"text": "I play the cello"}]}}
        s["events"].append(cello)
        assert (await memory.add_session_to_memory(s)).saved == 1
        assert [r.text async for r in memory.iter_records(app_name="app", user_id="u1")] == ["I play the cello"]
        # bringing them back is explicit, and writes each memory once
        for _ in range(2):
            assert (await memory.add_session_to_memory(s, reconsider=True)).saved == 3
            assert await memory.count(app_name="app", user_id="u1") == 3
        assert (await search_texts(memory, "app", "u1", "Lisbon"))[:1] == ["I live in Lisbon"]

    @pytest.mark.asyncio
    async def test_a_save_planned_before_an_erase_does_not_bring_it_back(
        self, memory: LongTermMemory, monkeypatch: pytest.MonkeyPatch
    ):
        # Two workers save one session; the user erases it after it landed; the slower worker
        # read the ledger before the erase and writes now: what was erased stays erased.
        s = make_session(turns=[("user", "I live in Lisbon"), ("user", "my dog is called Rex")])
        await memory.add_session_to_memory(s)
        await memory.delete_memory(app_name="app", user_id="u1", session_id=s["id"])

        async def read_before_the_erase(scope: Any, session_id: str) -> set[str]:
            return set()

        monkeypatch.setattr((await memory.located("app", "u1")).ledger, "saved", read_before_the_erase)
        await memory.add_session_to_memory(s)
        assert await memory.count(app_name="app", user_id="u1") == 0
        assert await search_texts(memory, "app", "u1", "Lisbon") == []
