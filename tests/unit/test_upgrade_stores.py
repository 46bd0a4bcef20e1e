"""Stores written before the front-door change open and answer after it (tests/data/stores_71d0724).

What changed underneath a user: scores (now the core's, in [0, 1]), the gate that reads
events, times of time-less events. What must not: the records, their ids, the ledger (a
replay of a saved session writes nothing), search in English and Chinese.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import pytest

from longterm import LongTermMemory

DATA = Path(__file__).parent.parent / "data" / "stores_71d0724"
SESSION = {
    "id": "s1",
    "app_name": "travel",
    "user_id": "alice",
    "events": [
        {
            "id": "e1",
            "author": "user",
            "timestamp": 1700000000,
            "content": {"role": "user", "parts": [{"text": "My passport expires in August 2027"}]},
        },
        {
            "id": "e2",
            "author": "agent",
            "timestamp": 1700000001,
            "content": {"role": "model", "parts": [{"text": "Noted!"}]},
        },
        {
            "id": "e3",
            "author": "user",
            "timestamp": 1700000002,
            "content": {"role": "user", "parts": [{"text": "我住在杭州西湖边"}]},
        },
    ],
}


def _store(engine: str, tmp_path: Path) -> dict[str, str]:
    if engine == "local":
        shutil.copy(DATA / "memory.db", tmp_path / "memory.db")
        return {"path": str(tmp_path / "memory.db")}
    with tarfile.open(DATA / "qdrant-edge.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    return {"path": str(tmp_path / "qdrant"), "engine": "edge"}


@pytest.mark.parametrize("engine", ["local", "qdrant"])
async def test_a_store_of_the_previous_main_opens_and_answers(tmp_path: Path, engine: str):
    memory = LongTermMemory(backend=engine, backend_config=_store(engine, tmp_path), app_name="travel")
    try:
        assert await memory.count(app_name="travel", user_id="alice") == 2
        hits = await memory.search("when does my passport expire?", user_id="alice")
        assert hits[0].text == "My passport expires in August 2027" and hits[0].score == 1.0
        assert hits[0].timestamp.timestamp() == 1700000000
        assert [h.text for h in await memory.search("杭州", user_id="alice")] == ["我住在杭州西湖边"]
        again = await memory.add_session_to_memory(SESSION)
        assert (again.new_events, again.saved) == (0, 0)  # the ledger came along
        assert (await memory.add("a new memory about Lisbon", user_id="alice")).saved == 1
        assert await memory.scopes() == [("travel", "alice", 3)]
    finally:
        await memory.close()
