"""An erase leaves nothing behind on disk (local): not in any file of the store, not in the index.

The seam: a user saves memories holding made-up words (a name, a PIN, a town, an English word
whose stem differs from it, a Chinese phrase); another user saves their own. The user (or one
session, or one memory) is erased through the public API, and then, with the memory still
open, every file of the store (``memory.db``, ``-wal``, ``-shm``) is read for the erased words
as they are stored: as written, as FTS5 indexes them (porter stems, ``segment``'s CJK bigrams
and characters), in UTF-8; and the full-text index's own vocabulary (``fts5vocab``, on a
connection of its own) must not list them. What was not erased is still found.

Why each form: the record's text and terms are stored as written, FTS5 keeps the stems (and a
deleted row's terms until its segments merge), freed pages keep their bytes unless
``secure_delete`` zeroes them, and the WAL keeps every page as it was until it is reset.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory
from longterm.retrieval.text import segment

APP = "diary"
#: The erased user's words: a name, a PIN, a town, an English word whose stem differs
#: ("marmalades", stored as "marmalad"), a Chinese phrase (stored as bigrams and characters).
SECRET = "Qzorbelline said her PIN is 8061739, she lives in Vruxhaven and loves marmalades 翡翠蜻蜓"
#: What the other user and the erased user's kept session say: none of the secret's words.
OTHER = "the weather report said rain tomorrow and wind over the hills"
KEPT = "my dentist appointment moved to the afternoon"
SUFFIXES = ("", "-wal", "-shm")
#: Bounds every call of a test: a hang fails it.
LIMIT = 60.0


def stored_terms(text: str) -> set[str]:
    """The terms FTS5 keeps for ``text`` as the local store indexes it (same tokenizer, same
    ``segment``), read from a scratch index's own vocabulary."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5 (terms, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("INSERT INTO f (terms) VALUES (?)", (segment(text),))
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab (f, row)")
    terms = {row[0] for row in conn.execute("SELECT term FROM v")}
    conn.close()
    return terms


SECRET_TERMS = stored_terms(SECRET) - stored_terms(f"{OTHER} {KEPT} said her is she in and loves")
#: Byte strings that must be in no file: the secret's words as written and as indexed.
#: CJK characters alone (3 bytes) are left to the vocabulary check: a page of other data may
#: hold any 3 bytes by chance.
NEEDLES = {w.encode() for w in ("Qzorbelline", "8061739", "Vruxhaven", "marmalades", "翡翠蜻蜓")} | {
    t.encode() for t in SECRET_TERMS if len(t.encode()) > 3
}


def test_the_needles_are_the_stored_forms() -> None:
    """The check looks for what the index really keeps: stems and bigrams, not only the words."""
    assert {"qzorbellin", "8061739", "vruxhaven", "marmalad", "翡翠", "翠蜻", "蜻蜓", "翡"} <= SECRET_TERMS
    assert "marmalades" not in SECRET_TERMS


def session(sid: str, user: str, texts: list[str]) -> dict[str, Any]:
    return {
        "id": sid,
        "app_name": APP,
        "user_id": user,
        "events": [
            {
                "id": f"{sid}-e{i}",
                "author": "user",
                "timestamp": 1_700_000_000.0 + i,
                "content": {"role": "user", "parts": [{"text": text}]},
            }
            for i, text in enumerate(texts)
        ],
    }


def leftovers(db: Path) -> dict[str, list[str]]:
    """Each store file holding one of the ``NEEDLES``, and which."""
    found: dict[str, list[str]] = {}
    for suffix in SUFFIXES:
        path = Path(f"{db}{suffix}")
        data = path.read_bytes() if path.exists() else b""
        hits = sorted(n.decode() for n in NEEDLES if n in data)
        if hits:
            found[path.name] = hits
    return found


def vocabulary(db: Path) -> set[str]:
    """The terms the store's full-text tables list (all of them), read on a connection of its own."""
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'")]
        assert tables, "the store has no full-text table: this test must look where the words are"
        terms: set[str] = set()
        for i, table in enumerate(tables):
            conn.execute(f"CREATE VIRTUAL TABLE temp.vocab{i} USING fts5vocab (main, {table}, row)")
            terms |= {row[0] for row in conn.execute(f"SELECT term FROM temp.vocab{i}")}
        return terms
    finally:
        conn.close()


async def bounded(call: Any) -> Any:
    return await asyncio.wait_for(call, LIMIT)


async def texts_found(memory: LongTermMemory, user: str, query: str) -> list[str]:
    found = await bounded(memory.search_memory(app_name=APP, user_id=user, query=query))
    return [m.content.parts[0].text for m in found.memories]


@pytest.mark.parametrize("what", ["user", "session", "memory"])
async def test_erased_words_are_in_no_file_and_not_in_the_index(tmp_path: Path, what: str) -> None:
    db = tmp_path / "memory.db"
    memory = LongTermMemory(backend="local", backend_config={"path": str(db)}, app_name=APP)
    try:
        # 50 memories with the secret (the one erased memory: the first), others around them.
        secret = [f"{SECRET} (note {i})" if i == 0 or what != "memory" else f"{OTHER} ({i})" for i in range(50)]
        await bounded(memory.add_session_to_memory(session("secret", "alice", secret)))
        await bounded(memory.add_session_to_memory(session("kept", "alice", [KEPT] * 5)))
        for u in range(3):
            await bounded(
                memory.add_session_to_memory(session(f"o{u}", f"bob{u}", [f"{OTHER} {j}" for j in range(40)]))
            )
        assert leftovers(db), "the test must see the words before the erase"
        assert vocabulary(db) >= SECRET_TERMS

        if what == "user":
            erase: dict[str, Any] = {}
            expected = 55
        elif what == "session":
            erase, expected = {"session_id": "secret"}, 50
        else:
            hit = (await bounded(memory.search_memory(app_name=APP, user_id="alice", query="Vruxhaven"))).memories
            assert len(hit) == 1
            erase, expected = {"memory_id": hit[0].id}, 1
        erasing = memory.delete_memory if erase else memory.delete_memories  # no id: the whole user
        assert await bounded(erasing(app_name=APP, user_id="alice", **erase)) == expected

        # At once, with the memory still open: every file as it is now.
        assert leftovers(db) == {}
        assert SECRET_TERMS & vocabulary(db) == set()
        assert await texts_found(memory, "alice", "Vruxhaven marmalades 蜻蜓") == []
        # What was not erased is intact and found.
        assert len(await texts_found(memory, "bob1", "weather hills")) > 0
        if what != "user":
            assert await texts_found(memory, "alice", "dentist appointment") != []
    finally:
        await bounded(memory.close())
    assert leftovers(db) == {}
