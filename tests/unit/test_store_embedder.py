"""A store's vectors always match the store (local engine): what a user notices.

A memory opened without an embedder on a store that has one never leaves its memories to full
text for good: it saves with the store's embedder where that is built in, or leaves the vectors
pending for the next memory opened with the embedder. A store holding a vector of another
dimension (written before such vectors were refused) never fails a search: it is repaired on
opening. A query vector of another dimension answers from full text and says so.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from longterm import LongTermMemory
from longterm.errors import ConfigurationError
from longterm.retrieval import embedders
from longterm.retrieval.embedders import HashingEmbedder
from tests.conftest import make_session

HASHING = {"name": "hashing", "dim": 16}


class Custom(HashingEmbedder):
    """A user's own embedder: no built-in one has its id (and its dimension may change under it)."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__(dim)
        self.id = "custom-e"


def open_local(path: Path, embedder: object = None) -> LongTermMemory:
    return LongTermMemory(backend_config={"path": str(path)}, embedder=embedder, app_name="app")


async def save(memory: LongTermMemory, sid: str, text: str) -> None:
    await memory.add_session_to_memory(make_session(sid, turns=[("user", text)]))


async def arms(memory: LongTermMemory, query: str) -> dict[str, dict[str, float]]:
    """Each hit's text and the arms that found it (with their scores)."""
    res = await memory.search_memory(app_name="app", user_id="u1", query=query)
    return {m.content.parts[0].text: m.custom_metadata["arms"] for m in res.memories}


async def made_with(path: Path, embedder: object) -> None:
    """A store made with ``embedder``, holding one memory, closed."""
    made = open_local(path, embedder)
    await save(made, "s1", "I bought a red bicycle")
    await made.close()


def vector_sizes(path: Path) -> dict[str, int | None]:
    """Each record's text and the size in bytes of its vector (None: it has none)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT r.text, length(e.embedding) FROM records AS r LEFT JOIN embeddings AS e ON e.rowid = r.rowid"
        )
        return dict(rows.fetchall())


def waiting(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM unembedded").fetchone()[0])


async def test_a_memory_without_an_embedder_saves_with_the_stores_built_in_one(tmp_path: Path):
    path = tmp_path / "m.db"
    await made_with(path, HASHING)

    plain = open_local(path)  # as `LongTermMemory()` in another script, or `longterm import`
    await save(plain, "s2", "my puppy chews shoes")
    await plain.close()
    assert vector_sizes(path) == {"I bought a red bicycle": 64, "my puppy chews shoes": 64}

    again = open_local(path, HASHING)
    found = await arms(again, "puppy shoes")
    assert found["my puppy chews shoes"]["vector"] > 0.4  # the vector arm finds it
    await again.close()


async def test_a_built_in_embedder_is_never_loaded_to_open_or_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "m.db"
    await made_with(path, HASHING)
    loads: list[str] = []
    real = embedders.registry.builtin_embedder

    def counted(embedder_id: str):
        loads.append(embedder_id)
        return real(embedder_id)

    monkeypatch.setattr("longterm.core.identity.builtin_embedder", counted)
    plain = open_local(path)
    assert list(await arms(plain, "bicycle")) == ["I bought a red bicycle"]
    assert await plain.count(app_name="app", user_id="u1") == 1
    assert loads == []  # opened and read: nothing loaded
    await save(plain, "s2", "my puppy chews shoes")
    await save(plain, "s3", "the cat sleeps all day")
    assert loads == ["hashing-v1-16"]  # the first save loads it, once
    await plain.close()


async def test_without_a_built_in_embedder_the_vectors_wait_for_the_stores_own(tmp_path: Path):
    path = tmp_path / "m.db"
    await made_with(path, Custom())

    plain = open_local(path)
    await save(plain, "s2", "my puppy chews shoes")
    assert list(await arms(plain, "puppy")) == ["my puppy chews shoes"]  # full text finds it at once
    await plain.close()
    assert vector_sizes(path)["my puppy chews shoes"] is None and waiting(path) == 1

    again = open_local(path, Custom())  # not embed_later: it drains what waits all the same
    await again.backend_instance.embed_backlog()
    assert vector_sizes(path)["my puppy chews shoes"] == 128 and waiting(path) == 0
    assert (await arms(again, "puppy shoes"))["my puppy chews shoes"]["vector"] > 0.5
    await again.close()


async def test_the_store_opened_with_its_embedder_drains_what_waits_in_the_background(tmp_path: Path):
    path = tmp_path / "m.db"
    await made_with(path, Custom())
    plain = open_local(path)
    await save(plain, "s2", "my puppy chews shoes")
    await plain.close()

    again = open_local(path, Custom())
    await again.count(app_name="app", user_id="u1")  # opened: the background embedder starts
    for _ in range(1000):  # its work, waited for without timing it
        if not waiting(path):
            break
        await asyncio.sleep(0.01)
    assert waiting(path) == 0 and vector_sizes(path)["my puppy chews shoes"] == 128
    await again.close()


async def test_a_vector_of_another_dimension_is_refused_before_anything_is_written(tmp_path: Path):
    path = tmp_path / "m.db"
    await made_with(path, Custom(32))

    changed = open_local(path, Custom(48))  # same id, another dimension
    with pytest.raises(ConfigurationError, match=r"32-dimensional vectors of embedder 'custom-e'.*48-dimensional"):
        await save(changed, "s2", "my puppy chews shoes")
    hits = await changed.search_memory(app_name="app", user_id="u1", query="bicycle")  # reads answer from full text
    assert "48-dimensional" in hits.memories[0].custom_metadata["degraded"]
    await changed.close()
    assert list(vector_sizes(path)) == ["I bought a red bicycle"]

    right = open_local(path, Custom(32))
    assert (await arms(right, "red bicycle"))["I bought a red bicycle"]["vector"] > 0.5
    await right.close()


def poison(path: Path, text: str, size: int) -> None:
    """What a save of a changed embedder left before such vectors were refused: ``text``'s vector
    of ``size`` bytes, and a store that never checked its vectors' sizes (no dimension recorded)."""
    with sqlite3.connect(path) as conn:
        (rowid,) = conn.execute("SELECT rowid FROM records WHERE text = ?", (text,)).fetchone()
        blob = np.ones(size // 4, dtype=np.float32).tobytes()
        conn.execute("INSERT OR REPLACE INTO embeddings (rowid, embedding) VALUES (?, ?)", (rowid, blob))
        conn.execute("UPDATE scopes SET version = version + 1")
        conn.execute("DELETE FROM store_meta WHERE key IN ('vector_sizes') OR key LIKE 'embedder_dim:%'")


async def test_a_store_holding_a_vector_of_another_dimension_is_repaired_when_opened(tmp_path: Path):
    path = tmp_path / "m.db"
    made = open_local(path, Custom(32))
    await save(made, "s1", "I bought a red bicycle")
    await save(made, "s2", "my red bicycle has a bell")
    await save(made, "s3", "my puppy chews shoes")
    await made.close()
    poison(path, "my puppy chews shoes", 48 * 4)

    again = open_local(path, Custom(32))
    found = await arms(again, "red bicycle puppy")  # it failed: cannot reshape array of size 112 into shape (3,32)
    assert set(found) == {"I bought a red bicycle", "my red bicycle has a bell", "my puppy chews shoes"}
    assert vector_sizes(path)["my puppy chews shoes"] in (None, 128)  # dropped, then made again
    await again.backend_instance.embed_backlog()
    await again.close()
    assert set(vector_sizes(path).values()) == {128} and waiting(path) == 0
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM store_meta WHERE key = 'embedder_dim:app'").fetchone() == ("32",)


async def test_a_vector_of_another_size_never_fails_a_search(tmp_path: Path):
    """Written after the store was checked (by an older version, say): searches leave it out."""
    path = tmp_path / "m.db"
    made = open_local(path, Custom(32))
    await save(made, "s1", "I bought a red bicycle")
    await save(made, "s2", "my puppy chews shoes")
    assert "I bought a red bicycle" in await arms(made, "red bicycle")  # the scope's vectors read, cached
    with sqlite3.connect(path) as conn:
        (rowid,) = conn.execute("SELECT rowid FROM records WHERE text = 'my puppy chews shoes'").fetchone()
        conn.execute("UPDATE embeddings SET embedding = ? WHERE rowid = ?", (b"\0" * 20, rowid))
        conn.execute("UPDATE scopes SET version = version + 1")
    found = await arms(made, "puppy bicycle")
    assert set(found) == {"I bought a red bicycle", "my puppy chews shoes"}
    await made.close()
