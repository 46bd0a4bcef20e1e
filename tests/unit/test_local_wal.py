"""The local store's write-ahead log: its writer checkpoints it every ``WAL_PAGES`` pages (a
tenth as often as SQLite's default: ``core.sqlite``) and cuts the file back to as many after a
checkpoint; the last connection to close folds it into the store and removes it. Other SQLite
files of the library (a side ledger) keep SQLite's own log."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from longterm import LongTermMemory
from longterm.core.sqlite import WAL_PAGES, connect


def _session(i: int) -> dict[str, object]:
    turns = [
        {"author": "user", "content": {"role": "user", "parts": [{"text": f"turn {i} {j} hello"}]}} for j in range(50)
    ]
    return {"id": f"s{i}", "app_name": "app", "user_id": "u", "events": turns}


def _pragma(conn: sqlite3.Connection, name: str) -> int:
    return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


async def test_the_local_writer_keeps_a_long_log_and_closing_folds_it_in(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    memory = LongTermMemory(backend_config={"path": str(db)})
    for i in range(40):
        await memory.add_session_to_memory(_session(i))
    writer = memory.backend_instance.conn  # type: ignore[attr-defined]
    assert _pragma(writer, "wal_autocheckpoint") == WAL_PAGES == 10_000
    assert _pragma(writer, "journal_size_limit") == WAL_PAGES * 4096
    assert Path(f"{db}-wal").exists()
    await memory.close()
    assert not Path(f"{db}-wal").exists()  # folded into the store and removed
    again = LongTermMemory(backend_config={"path": str(db)})
    found = await again.search_memory(app_name="app", user_id="u", query="turn 39 hello")
    assert found.memories and await again.count(app_name="app", user_id="u") == 2_000
    await again.close()


def test_other_files_keep_sqlites_own_log(tmp_path: Path) -> None:
    conn = connect(tmp_path / "ledger.db", "CREATE TABLE IF NOT EXISTS t (x);")
    assert _pragma(conn, "wal_autocheckpoint") == 1_000 and _pragma(conn, "journal_size_limit") == -1
    conn.close()
