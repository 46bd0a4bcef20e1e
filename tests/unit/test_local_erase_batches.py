"""An erase of many ids on the local store (by date, by filter, the sweep) deletes them in
batches: one statement per id read the user's records once per id (16,000 by date: 20.9 s;
``bench/erase_by_ids.py``), and a timeout of a few seconds cut such an erase short."""

from __future__ import annotations

import time
from pathlib import Path

from longterm import LongTermMemory


def test_an_erase_of_501_ids_is_two_statements_and_takes_exactly_them(tmp_path: Path) -> None:
    with LongTermMemory(app_name="app", backend_config={"path": str(tmp_path / "m.db")}) as memory:
        memory.add_sync([f"old note {i}" for i in range(501)], user_id="u", session_id="old")
        cut = time.time() + 1
        memory.add_sync("a note kept", user_id="u", session_id="new", metadata={"keep": True})
        kept = memory.get_all_sync(user_id="u", filters={"keep": True}).memories
        statements: list[str] = []
        memory.backend_instance.conn.set_trace_callback(statements.append)  # type: ignore[attr-defined]
        assert memory.delete_all_sync(user_id="u", filters={"keep": {"$exists": False}}, before=cut) == 501
        memory.backend_instance.conn.set_trace_callback(None)  # type: ignore[attr-defined]
        # each statement's text is traced again for every trigger it fires: counted once each
        deletes = {s for s in statements if s.startswith("DELETE FROM records WHERE")}
        assert len(deletes) == 2, len(deletes)
        assert [m.id for m in memory.get_all_sync(user_id="u").memories] == [kept[0].id]
