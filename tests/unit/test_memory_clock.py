"""A memory's clock (``LongTermMemory(clock=...)``) is the time of what it saves without one, as it is
the start of a ttl: a memory saved "now" is never dated after the moment it expires."""

from __future__ import annotations

from pathlib import Path

from longterm import LongTermMemory
from longterm.testing.contract.life import T0, Clock


def test_what_is_saved_without_a_time_is_dated_by_the_memory_clock(tmp_path: Path) -> None:
    clock = Clock(T0)
    with LongTermMemory(app_name="app", backend_config={"path": str(tmp_path / "m.db")}, clock=clock) as memory:
        memory.add_sync("a one-time code 441200", user_id="u", ttl=60)
        memory.portal.call(memory.add_memory(app_name="app", user_id="u", memories=["my name is Ines"]))
        memory.portal.call(memory.add_events_to_memory(app_name="app", user_id="u", events=["I like tea"]))
        memories = memory.get_all_sync(user_id="u").memories
        assert sorted(round(m.timestamp.timestamp()) for m in memories) == [round(T0)] * 3
        assert memory.delete_all_sync(user_id="u", before=T0 + 1, dry_run=True) == 3
