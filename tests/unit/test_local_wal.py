"""The local store's write-ahead log: checkpointed by the writer every ``WAL_PAGES`` pages (a
tenth as often as SQLite's default: ``core.sqlite``), folded into the store and removed when the
memory closes, so a long log costs disk only while the memory is open."""

from __future__ import annotations

from pathlib import Path

from longterm import LongTermMemory
from longterm.core.sqlite import WAL_PAGES


def _session(i: int) -> dict[str, object]:
    events = [
        {"author": "user", "content": {"role": "user", "parts": [{"text": f"turn {i} {j} hello"}]}} for j in range(50)
    ]
    return {"id": f"s{i}", "app_name": "app", "user_id": "u", "events": events}


async def test_the_writer_checkpoints_a_long_log_and_closing_folds_it_in(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    memory = LongTermMemory(backend_config={"path": str(db)})
    for i in range(40):
        await memory.add_session_to_memory(_session(i))
    writer = memory.backend_instance.conn  # type: ignore[attr-defined]
    assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_PAGES == 10_000
    assert Path(f"{db}-wal").exists()
    await memory.close()
    assert not Path(f"{db}-wal").exists()  # folded into the store and removed
    again = LongTermMemory(backend_config={"path": str(db)})
    found = await again.search_memory(app_name="app", user_id="u", query="turn 39 hello")
    assert found.memories and await again.count(app_name="app", user_id="u") == 2_000
    await again.close()
