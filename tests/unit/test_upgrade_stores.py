"""Stores written before the front-door change open and answer after it (tests/data/stores_71d0724).

What changed underneath a user: scores (now the core's, in [0, 1]), the gate that reads
events, times of time-less events. What must not: the records, their ids, the ledger (a
replay of a saved session writes nothing), search in English and Chinese.
"""

from __future__ import annotations

import shutil
import sqlite3
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


V2 = Path(__file__).parent.parent / "data" / "stores_8077e4f"
"""Local stores of schema 2 (one full-text table, rowids in the order saved), made by 8077e4f:
alice and bob in app travel, carol in app other with one of her two memories erased; the
same with the offline ``hashing`` embedder's vectors in ``hybrid.db``."""


@pytest.mark.parametrize("name", ["memory.db", "hybrid.db"])
async def test_a_schema_2_store_moves_to_per_scope_rowids_and_keeps_everything(tmp_path: Path, name: str):
    shutil.copy(V2 / name, tmp_path / name)
    config = {"path": str(tmp_path / name), **({"embedder": "hashing"} if name == "hybrid.db" else {})}
    memory = LongTermMemory(backend="local", backend_config=config, app_name="travel")
    try:
        assert [
            await memory.count(app_name=a, user_id=u)
            for a, u in [("travel", "alice"), ("travel", "bob"), ("other", "carol")]
        ] == [3, 2, 1]
        alice = {"My passport expires in August 2027", "I work at the harbour office", "我住在杭州西湖边"}
        hits = [h.text for h in await memory.search("passport", user_id="alice")]  # hybrid: vector hits too
        assert hits[0] == "My passport expires in August 2027" and set(hits) <= alice
        hits = [h.text for h in await memory.search("passport", user_id="bob")]
        assert hits[0] == "Bob's passport is blue" and set(hits) <= {
            "Bob's passport is blue",
            "I work from home on Fridays",
        }
        assert (await memory.search("杭州", user_id="alice"))[0].text == "我住在杭州西湖边"
        erased = await memory.search_memory(app_name="other", user_id="carol", query="secret plan alpha")
        assert all("secret" not in m.content.parts[0].text for m in erased.memories)  # erased stays erased
        replay = await memory.add_session_to_memory(
            {
                "id": "c1",
                "app_name": "other",
                "user_id": "carol",
                "events": [
                    {
                        "id": "c1-1",
                        "author": "user",
                        "timestamp": 1700000001,
                        "content": {"role": "user", "parts": [{"text": "secret plan alpha"}]},
                    }
                ],
            }
        )
        assert replay.saved == 0  # the erase's ledger entry came along
        assert (await memory.add("I work late on Mondays", user_id="bob")).saved == 1
        found = [h.text for h in await memory.search("work", user_id="bob")]
        assert sorted(found[:2]) == ["I work from home on Fridays", "I work late on Mondays"]
        assert await memory.delete_memories(app_name="travel", user_id="alice") == 3
        assert await memory.search("passport", user_id="alice") == []
    finally:
        await memory.close()
    conn = sqlite3.connect(tmp_path / name)
    try:  # every rowid in its scope's range, no row without its scope's vector left behind
        assert conn.execute("SELECT count(*) FROM records WHERE rowid >> 32 != scope").fetchone()[0] == 0
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        if name == "hybrid.db":
            assert (
                conn.execute(
                    "SELECT count(*) FROM records WHERE rowid NOT IN (SELECT rowid FROM embeddings)"
                ).fetchone()[0]
                == 0
            )
            assert conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 4  # bob's 3, carol's 1
    finally:
        conn.close()
