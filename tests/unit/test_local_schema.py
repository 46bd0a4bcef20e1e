"""A store written by the previous local schema (scopes spelled out in every row, hex ids)
opens with this version: moved over once, every memory, vector and ledger entry kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from longterm import LongTermMemory
from longterm.records import record_id
from longterm.retrieval.embedders import HashingEmbedder
from longterm.testing import make_session

#: The previous schema, as version 0.x wrote it (tables only; the new triggers need none of its own).
SCHEMA_1 = """
CREATE TABLE memories (
    rowid INTEGER PRIMARY KEY, index_name TEXT NOT NULL, id TEXT NOT NULL, app_name TEXT NOT NULL,
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, event_id TEXT NOT NULL, author TEXT NOT NULL,
    role TEXT NOT NULL, event_types TEXT NOT NULL, text TEXT NOT NULL, content TEXT, timestamp REAL NOT NULL,
    metadata TEXT NOT NULL, digest TEXT NOT NULL, scope_key TEXT NOT NULL, terms TEXT, UNIQUE (index_name, id)
);
CREATE VIRTUAL TABLE memories_fts USING fts5 (scope_key, terms, content='memories', content_rowid='rowid');
CREATE TABLE vectors (rowid INTEGER PRIMARY KEY REFERENCES memories (rowid) ON DELETE CASCADE, embedding BLOB);
CREATE TABLE scope_versions (
    index_name TEXT, app_name TEXT, user_id TEXT, version INTEGER, PRIMARY KEY (index_name, app_name, user_id)
) WITHOUT ROWID;
CREATE TABLE saved_events (
    index_name TEXT, app_name TEXT, user_id TEXT, session_id TEXT, event_id TEXT,
    PRIMARY KEY (index_name, app_name, user_id, session_id, event_id)
) WITHOUT ROWID;
CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
"""


def _old_store(path: Path, embedder: HashingEmbedder) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_1)
    # 0.1 indexed Chinese unfolded: traditional characters as bigrams of themselves.
    texts = {"s1-e0": ("I keep bees in the garden", None), "s1-e1": ("my sister lives in Porto", None)}
    texts["s1-e2"] = ("我下個月搬到臺灣", "我下 下個 個月 月搬 搬到 到臺 臺灣")
    for n, (event, (text, terms)) in enumerate(texts.items(), 1):
        rid = record_id("app", "u1", "s1", event)
        conn.execute(
            "INSERT INTO memories VALUES (?, 'default_app', ?, 'app', 'u1', 's1', ?, 'user', 'user', ?, "
            "?, NULL, 1700000000, '{}', 'd', 'sx', ?)",
            (n, rid, event, '["text"]', text, terms),
        )
        conn.execute("INSERT INTO vectors VALUES (?, ?)", (n, embedder.embed([text])[0].tobytes()))
    conn.executemany(
        "INSERT INTO saved_events VALUES ('default_app', 'app', 'u1', 's1', ?)", [("s1-e0",), ("s1-e1",), ("s1-e3",)]
    )
    conn.execute("INSERT INTO scope_versions VALUES ('default_app', 'app', 'u1', 3)")
    conn.execute("INSERT INTO store_meta VALUES ('embedder:default_app', ?)", (embedder.id,))
    conn.commit()
    conn.close()


async def test_a_store_of_the_previous_schema_is_moved_over_on_open(tmp_path: Path):
    path, embedder = tmp_path / "memory.db", HashingEmbedder(64)
    _old_store(path, embedder)
    memory = LongTermMemory(backend_config={"path": str(path)}, embedder=embedder)
    res = await memory.search_memory(app_name="app", user_id="u1", query="bees")
    top = res.memories[0]
    assert top.content.parts[0].text == "I keep bees in the garden"
    assert set(top.custom_metadata["arms"]) == {"fulltext", "vector"}  # its vector came along
    assert [r.id async for r in memory.iter_records(app_name="app", user_id="u1")] == [
        record_id("app", "u1", "s1", f"s1-e{i}") for i in range(3)
    ]
    # Indexed again by this version: the simplified question finds the traditional text.
    res = await memory.search_memory(app_name="app", user_id="u1", query="谁搬去台湾?")
    assert res.memories and res.memories[0].content.parts[0].text == "我下個月搬到臺灣"
    assert "fulltext" in res.memories[0].custom_metadata["arms"]  # by its words, not only by its vector
    turns = [("user", "I keep bees in the garden"), ("user", "my sister lives in Porto"), ("user", "我下個月搬到臺灣")]
    turns.append(("model", "ok"))
    again = await memory.add_session_to_memory(make_session(turns=turns))
    assert (again.new_events, again.saved) == (0, 0)  # the ledger came along
    await memory.close()
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "memories" not in tables and "saved_events" not in tables


async def test_a_store_makes_the_full_text_tables_its_users_use_and_no_more(tmp_path: Path) -> None:
    """Each full-text table costs ~0.7 ms to make: a new store with one user makes one (all
    sixteen at once doubled what opening a new store cost), and a user in another bucket gets
    theirs with their first save, searchable at once, isolated from the first."""
    path = tmp_path / "memory.db"
    memory = LongTermMemory(backend="local", backend_config={"path": str(path)})
    try:
        await memory.add("my bike is a green Brompton", user_id="alice")

        def tables() -> list[str]:
            conn = sqlite3.connect(path)
            try:
                return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL%'")]
            finally:
                conn.close()

        assert len(tables()) == 1
        await memory.add("my bike is a red Dahon", user_id="bob")
        assert len(tables()) == 2
        assert [m.text for m in await memory.search("bike", user_id="bob")] == ["my bike is a red Dahon"]
        assert [m.text for m in await memory.search("bike", user_id="alice")] == ["my bike is a green Brompton"]
    finally:
        await memory.close()
