"""A second import of the same export writes nothing, on every engine.

The seam: an export is every record of a user read from the store (``longterm export``), an
import writes them as they are (``upsert_records``, what ``longterm import`` calls). The first
import into a new store writes them all; the second finds each one stored exactly so and writes
none. What counts as a write is each engine's own: Redis the server's change counter
(``INFO persistence``: ``rdb_changes_since_last_save``), OpenSearch the documents sent in bulk
requests to the data index, Qdrant the points built for an upsert, the local store SQLite's
``total_changes`` (``tests.backends.writes``). On the previous main a second import into Redis
made 5 server writes a record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from longterm import LongTermMemory, MemoryRecord, Scope
from longterm.testing import make_session
from tests.backends.writes import write_counter
from tests.contract.conftest import backend_config, backend_name, open_memory, provider_id  # noqa: F401

SCOPE = Scope(app_name="app", user_id="u1")


def _sessions() -> list[dict[str, Any]]:
    return [
        make_session(
            sid=f"s{i}", turns=[("user", f"session {i} turn {j}: my sister's dog is called Pepper") for j in range(20)]
        )
        for i in range(3)
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("provider_id", ["local", "redis", "opensearch", "qdrant-edge", "qdrant-local"])
async def test_a_second_import_of_an_export_writes_nothing(
    provider_id: str,  # noqa: F811
    open_memory: Callable[..., LongTermMemory],  # noqa: F811
):
    source = open_memory(app_name="app")  # the memory's own index is the one the sessions live in
    try:
        for s in _sessions():
            await source.add_session_to_memory(s)
        engine: Any = source.backend_instance
        exported: list[MemoryRecord] = [r async for r in engine.scan(SCOPE)]
        assert len(exported) == 60
        await engine.delete(SCOPE)  # the store the export is restored into holds none of it
    finally:
        await source.close()
    target = open_memory(app_name="app")
    try:
        await target.upsert_records(exported[:1])  # opened, prepared and written once
        engine = target.backend_instance
        writes = write_counter(engine, provider_id)
        before = writes()
        await target.upsert_records(exported)
        first = writes() - before
        await target.upsert_records(exported)
        second = writes() - before - first
        assert first >= 59, f"the first import wrote {first} times for 59 new records"
        assert second == 0, f"the second import of the same export wrote {second} times"
        assert await target.count(app_name="app", user_id="u1") == 60
        found = await target.search_memory(app_name="app", user_id="u1", query="Pepper dog")
        assert len(found.memories) > 0
    finally:
        await target.close()
