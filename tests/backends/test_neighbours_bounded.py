"""A search reads its hits' neighbours by their place in time, never their whole session.

The seam: one user's memories are one session of 600 turns, each at its own time; a search
that finds a few of them asks for two turns of context each (``search_memory(context=2)``),
and the engine's whole-session read (``_session_rows``, what a hit's neighbours cost before
``core.windows``: every record of the session, for each search) is watched: it must never be
called, and each hit's context must be its own two turns before and after. On the previous
main Redis, OpenSearch and qdrant-client read the session whole on every search (a search for
a user with one 10,000-turn session cost 285-342 ms on Redis, ~7 ms in sessions of 50;
``bench/neighbours_session_size.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from longterm import LongTermMemory
from tests.contract.conftest import backend_config, backend_name, open_memory, provider_id  # noqa: F401

TURNS = 600


@pytest.mark.asyncio
@pytest.mark.parametrize("provider_id", ["local", "redis", "opensearch", "qdrant-edge", "qdrant-local"])
async def test_a_searchs_neighbours_never_read_the_whole_session(
    provider_id: str,  # noqa: F811
    open_memory: Callable[..., LongTermMemory],  # noqa: F811
):
    words = ["apricot", "beetroot", "cabbage", "damson", "endive", "fennel", "garlic", "hazelnut"]
    events = [
        {
            "id": f"e{i:04d}",
            "author": "user",
            "timestamp": 1_700_000_000.0 + 60 * i,
            "content": {"role": "user", "parts": [{"text": f"turn {i}: I planted {words[i % 8]} in row {i}"}]},
        }
        for i in range(TURNS)
    ]
    memory = open_memory()
    try:
        await memory.add_session_to_memory({"id": "big", "app_name": "app", "user_id": "u1", "events": events})
        engine: Any = memory.backend_instance
        whole: list[int] = []
        rows = engine._session_rows

        def watched(scope: Any, session_ids: Any) -> Any:
            got = rows(scope, session_ids)
            whole.append(sum(len(v) for v in got.values()))
            return got

        engine._session_rows = watched
        for word in ("hazelnut", "damson row 301", "endive"):
            found = await memory.search_memory(app_name="app", user_id="u1", query=word, top_k=5, context=2)
            assert found.memories
            for entry in found.memories:
                at = int(entry.custom_metadata["event_id"][1:])
                context = [c["event_id"] for c in entry.custom_metadata.get("context", [])]
                want = [f"e{j:04d}" for j in range(at - 2, at + 3) if 0 <= j < TURNS and j != at]
                assert context == want, (at, context)
        assert whole == [], f"{provider_id} read the whole session of {TURNS} turns for neighbours: {whole}"
    finally:
        await memory.close()
