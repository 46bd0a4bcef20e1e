"""The background sweep: what a memory saved with a ttl leaves the store soon after it expired,
by the memory's own clock (injected here), with no call of the user's; a closed memory sweeps no more."""

from __future__ import annotations

import time
from pathlib import Path

from longterm import LongTermMemory
from longterm.testing.contract import HANG_LIMIT
from longterm.testing.contract.life import Clock


def _stored(memory: LongTermMemory) -> list[str]:
    """Every record the store holds for the user, expired or not (the engine's own scan)."""

    async def read() -> list[str]:
        backend = (await memory.located("app", "u")).backend
        return sorted([r.text async for r in backend.scan(memory.scope("app", "u"))])

    return memory.portal.call(read())


def _until(check, limit: float = HANG_LIMIT) -> bool:  # a bound against a hang, not a timing
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_what_expired_leaves_the_store_without_a_call(tmp_path: Path) -> None:
    clock = Clock()
    memory = LongTermMemory(app_name="app", backend_config={"path": str(tmp_path / "m.db")}, clock=clock)
    memory.add_sync("a one-time code 441200", user_id="u", ttl=0.1)
    memory.add_sync("my name is Ines", user_id="u")
    time.sleep(0.3)  # the timer fired, but the memory's clock has not reached the moment
    assert _stored(memory) == ["a one-time code 441200", "my name is Ines"]
    clock.now += 1
    assert _until(lambda: _stored(memory) == ["my name is Ines"]), _stored(memory)
    memory.close_sync()


def test_a_closed_memory_sweeps_no_more(tmp_path: Path) -> None:
    clock = Clock()
    path = str(tmp_path / "m.db")
    memory = LongTermMemory(app_name="app", backend_config={"path": path}, clock=clock)
    memory.add_sync("a one-time code 441200", user_id="u", ttl=0.1)
    memory.close_sync()
    clock.now += 1
    time.sleep(0.3)
    with LongTermMemory(app_name="app", backend_config={"path": path}) as again:
        assert _stored(again) == ["a one-time code 441200"]  # still on disk: `delete --expired` takes it


def test_a_save_expiring_after_a_pending_sweep_is_swept_at_its_own_moment(tmp_path: Path) -> None:
    """A second save's memories, expiring after the first's sweep, were never swept in the background."""
    clock = Clock()
    memory = LongTermMemory(app_name="app", backend_config={"path": str(tmp_path / "m.db")}, clock=clock)
    memory.add_sync("a first code 441200", user_id="u", ttl=0.2)
    clock.now += 0.1
    memory.add_sync("a later code 551300", user_id="u", ttl=0.5)  # expires 0.6 from the start
    memory.add_sync("my name is Ines", user_id="u")
    clock.now += 0.2
    assert _until(lambda: _stored(memory) == ["a later code 551300", "my name is Ines"]), _stored(memory)
    clock.now += 0.4
    assert _until(lambda: _stored(memory) == ["my name is Ines"]), _stored(memory)
    memory.close_sync()
