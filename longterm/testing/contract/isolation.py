"""The contract's isolation: no id and no query text reaches another user's or app's memories.

The seam: ``Isolation``, a mixin of test methods over ``Fixtures``' ``memory``, with the
hostile inputs it tries (``HOSTILE_IDS``, ``HOSTILE_QUERIES``): each engine's own query
language (RediSearch tags, FTS5, Lucene) has its own way to break out of a scope.
"""

from __future__ import annotations

import pytest

from ... import LongTermMemory
from .. import make_session
from .fixtures import search_texts

HOSTILE_IDS = [
    "a}|@user_id:{b",
    'x" | "',
    "*",
    "%",
    "user 1",
    "a@b.com",
    "Alice",
    "中文用户",
    "' OR 1=1 --",
    "\\",
    "{}",
    "-1",
    "line\nbreak",
    "a:b/c?d=e&f",
]

HOSTILE_QUERIES = [
    "",
    "   ",
    '"',
    "*",
    "NEAR(",
    "AND",
    "OR NOT",
    ":",
    "-",
    "secret*",
    '"secret',
    "@user_id:{*}",
    ") | (@app_name:{*}",
    "' OR '1'='1",
    "*:*",
    "user_id:victim",
    "$where",
    "\x00secret",
    "secret\\",
    "%secret%",
    "secret AND (",
]


class Isolation:
    """Hostile ids and queries stay inside their (app, user); an empty query finds nothing."""

    @pytest.mark.asyncio
    @pytest.mark.parametrize("hostile", HOSTILE_IDS)
    async def test_isolation_under_hostile_ids(self, memory: LongTermMemory, hostile: str):
        victim = make_session("v", app="app", user="victim", turns=[("user", "victim secret password swordfish")])
        await memory.add_session_to_memory(victim)
        await memory.add_session_to_memory(
            make_session("o", app="other", user=hostile, turns=[("user", "other app secret swordfish")])
        )
        await memory.add_session_to_memory(
            make_session("h", app="app", user=hostile, turns=[("user", "hostile own secret note")])
        )
        for query in ["secret swordfish", "secret", hostile, "*"]:
            texts = await search_texts(memory, "app", hostile, query)
            assert all("victim" not in t and "other app" not in t for t in texts), (query, texts)
        assert await search_texts(memory, "app", hostile, "secret") == ["hostile own secret note"]
        assert await search_texts(memory, "other", hostile, "secret") == ["other app secret swordfish"]
        assert await memory.count(app_name="app", user_id=hostile) == 1
        assert [r.text async for r in memory.iter_records(app_name="app", user_id=hostile)] == [
            "hostile own secret note"
        ]

    @pytest.mark.asyncio
    @pytest.mark.parametrize("query", HOSTILE_QUERIES)
    async def test_any_query_text_is_valid_and_stays_in_scope(self, memory: LongTermMemory, query: str):
        await memory.add_session_to_memory(make_session("v", user="victim", turns=[("user", "victim secret")]))
        await memory.add_session_to_memory(make_session("m", user="me", turns=[("user", "my own secret")]))
        texts = await search_texts(memory, "app", "me", query)
        assert "victim secret" not in texts
        assert set(texts) <= {"my own secret"}

    @pytest.mark.asyncio
    async def test_empty_query_returns_nothing(self, memory: LongTermMemory):
        await memory.add_session_to_memory(make_session())
        assert await search_texts(memory, "app", "u1", "") == []
