"""The contract's durability: a store outlives its memories, and is the same store wherever it is opened.

The seam: ``Durability``, a mixin of test methods over ``Fixtures``' ``open_memory`` and
``home_config``: reopening, another index, the users and indices listed, a ledger that moves
with the store and not with ``LONGTERM_HOME``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ... import LongTermMemory
from .. import make_session
from .fixtures import search_texts


class Durability:
    """What is saved is there on reopening; an index is a store of its own; the ledger is the store's."""

    @pytest.mark.asyncio
    async def test_data_survives_reopen(self, open_memory: Callable[..., LongTermMemory]):
        first = open_memory()
        await first.add_session_to_memory(make_session(turns=[("user", "I was born in Porto")]))
        await first.close()
        second = open_memory()
        try:
            assert await search_texts(second, "app", "u1", "born") == ["I was born in Porto"]
            again = await second.add_session_to_memory(make_session(turns=[("user", "I was born in Porto")]))
            assert again.saved == 0
            assert await second.count(app_name="app", user_id="u1") == 1
        finally:
            await second.close()

    @pytest.mark.asyncio
    async def test_another_index_is_another_store_and_saves_everything(
        self, open_memory: Callable[..., LongTermMemory]
    ):
        sessions = [make_session(f"s{i}", turns=[("user", f"fact {i} about moving stores")]) for i in range(3)]
        v1 = open_memory(index="v1")
        assert [(await v1.add_session_to_memory(s)).saved for s in sessions] == [1, 1, 1]
        count = await v1.count(app_name="app", user_id="u1")
        await v1.close()
        v2 = open_memory(index="v2")  # same location, another index: its ledger is its own
        assert [(await v2.add_session_to_memory(s)).saved for s in sessions] == [1, 1, 1]
        assert await v2.count(app_name="app", user_id="u1") == count == 3
        assert [(await v2.add_session_to_memory(s)).saved for s in sessions] == [0, 0, 0]
        await v2.close()
        v1 = open_memory(index="v1")
        assert await v1.count(app_name="app", user_id="u1") == 3
        await v1.close()

    @pytest.mark.asyncio
    async def test_users_and_indices_are_listed(self, open_memory: Callable[..., LongTermMemory]):
        """``stats`` and ``migrate`` list a store's users and indices on every engine."""
        a = open_memory(index="listed_a")
        b = open_memory(index="listed_b")
        await a.add_session_to_memory(make_session("s1", turns=[("user", "alpha one"), ("user", "alpha two")]))
        await a.add_session_to_memory(make_session("s2", app="other app", user="u:2", turns=[("user", "beta")]))
        await b.add_session_to_memory(make_session("s3", user="u3", turns=[("user", "gamma")]))
        assert sorted(await a.scopes()) == [("app", "u1", 2), ("other app", "u:2", 1)]
        assert sorted(await b.scopes()) == [("app", "u3", 1)]
        assert {"listed_a", "listed_b"} <= set(await a.indices())
        await a.delete_memories(app_name="other app", user_id="u:2")
        assert sorted(await a.scopes()) == [("app", "u1", 2)]

    @pytest.mark.asyncio
    async def test_the_ledger_moves_with_the_store_not_with_the_home(
        self,
        open_memory: Callable[..., LongTermMemory],
        home_config: dict[str, Any] | None,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ):
        sessions = [make_session(f"s{i}", turns=[("user", f"fact {i} about homes")]) for i in range(3)]

        async def save_all(**kwargs: Any) -> tuple[list[int], int]:
            m = open_memory(**kwargs)
            try:
                saved = [(await m.add_session_to_memory(s)).saved for s in sessions]
                return saved, await m.count(app_name="app", user_id="u1")
            finally:
                await m.close()

        # A store at a given location is the same store under any home: nothing is saved twice.
        assert await save_all() == ([1, 1, 1], 3)
        monkeypatch.setenv("LONGTERM_HOME", str(tmp_path / "second-home"))
        assert await save_all() == ([0, 0, 0], 3)
        if home_config is not None:
            # A store that lives in the home: another home is another store, saved into whole.
            assert await save_all(backend_config=home_config) == ([1, 1, 1], 3)
            monkeypatch.setenv("LONGTERM_HOME", str(tmp_path / "third-home"))
            assert await save_all(backend_config=home_config) == ([1, 1, 1], 3)
