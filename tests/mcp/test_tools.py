"""The tools themselves, through the SDK's in-process client: lone surrogates, which no JSON
transport of the SDK carries, are tool errors too, a bug of ours is reported as one, and the
profile tool appears exactly when the memory has a fact layer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from longterm import LongTermMemory
from longterm.mcp import tools
from tests.mcp.conftest import call, ok, refused, texts


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[LongTermMemory]:
    mem = LongTermMemory(backend="local", backend_config={"path": str(tmp_path / "memory.db")})
    yield mem
    await mem.close()


async def test_lone_surrogates_are_tool_errors(memory: LongTermMemory) -> None:
    async with Client(tools.build_server(memory, app_name="app", user_id="alice")) as client:
        assert "not valid Unicode" in await refused(client, "delete_memory", {"memory_id": "\ud800"})
        assert "not valid Unicode" in await refused(client, "erase_session", {"session_id": "s\udfff"})
        await refused(client, "save_memory", {"text": "half an emoji \ud83d here"})
        await refused(client, "search_memory", {"query": "emoji \ud83d"})
        saved = await ok(client, "save_memory", {"text": "a whole emoji \U0001f600 here", "metadata": {"k": "\ud800"}})
        [hit] = (await ok(client, "search_memory", {"query": "whole emoji"}))["memories"]
        assert hit["id"] == saved["id"] and hit["metadata"]["k"] == "\ufffd"  # metadata is repaired


async def test_search_gives_the_metadata_as_saved_with_the_librarys_fields_beside_it(
    memory: LongTermMemory,
) -> None:
    # names the library also uses: a search once showed "backend": "local", dropped "role" and "score"
    given = {"topic": "jackets", "backend": "mine", "score": "high", "role": "buyer", "arms": [1]}
    async with Client(tools.build_server(memory, app_name="shop", user_id="u1")) as client:
        saved = await ok(client, "save_memory", {"text": "The user wants a red jacket", "metadata": given})
        [hit] = (await ok(client, "search_memory", {"query": "red jacket"}))["memories"]
        [listed] = (await ok(client, "list_memories"))["memories"]
    assert hit["metadata"] == listed["metadata"] == given
    assert list(hit) == ["id", "text", "author", "timestamp", "score", "arms", "session_id", "event_id", "metadata"]
    assert "fulltext" in hit["arms"]
    assert hit["id"] == saved["id"] and 0 < hit["score"] <= 1
    assert {k: hit[k] for k in listed} == listed


def test_a_search_that_had_less_than_it_was_set_up_with_says_why() -> None:
    from longterm.records import Hit
    from longterm.testing import make_record

    why = "vectors are off: words only"
    hit = Hit(record=make_record("tea"), score=0.5, arms={"fulltext": 1.0}, extra={"degraded": why})
    assert tools._found(hit)["degraded"] == why
    assert "degraded" not in tools._found(Hit(record=make_record("tea"), score=0.5))


async def test_a_bug_of_ours_is_an_internal_error_and_the_server_goes_on(
    memory: LongTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Client(tools.build_server(memory, app_name="app", user_id="alice")) as client:
        await ok(client, "save_memory", {"text": "The user likes green tea"})

        def broken(hit: Any) -> dict[str, Any]:
            raise KeyError("parts")

        monkeypatch.setattr(tools, "_found", broken)
        result = await call(client, "search_memory", {"query": "tea"})
        message = result.content[0].text
        assert result.is_error and "internal error" in message and "please report" in message
        monkeypatch.undo()
        assert texts(await ok(client, "search_memory", {"query": "tea"})) == ["The user likes green tea"]


async def test_the_profile_tool_comes_with_the_fact_layer(
    memory: LongTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Client(tools.build_server(memory, app_name="app", user_id="alice")) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert ("get_user_profile" in names) is hasattr(LongTermMemory, "get_user_profile")

    seen: list[tuple[str, str]] = []

    async def get_user_profile(self: LongTermMemory, *, app_name: str, user_id: str) -> dict[str, Any]:
        seen.append((app_name, user_id))
        return {"facts": ["likes green tea"]}

    monkeypatch.setattr(LongTermMemory, "get_user_profile", get_user_profile, raising=False)
    async with Client(tools.build_server(memory, app_name="app", user_id="alice")) as client:
        assert "get_user_profile" in {t.name for t in (await client.list_tools()).tools}
        assert await ok(client, "get_user_profile", {"user_id": "bob"}) == {"profile": {"facts": ["likes green tea"]}}
    assert seen == [("app", "alice")]
