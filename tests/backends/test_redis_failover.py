"""Redis failover: a primary, a replica and three Sentinels; the primary is killed (SIGKILL) in the
middle of an import. With ``wait_replicas=1`` every save acknowledged to the caller is on the new
primary, none is duplicated, and the caller hears only our errors during the switch."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from longterm import LongTermMemory, LongTermMemoryError
from tests.conftest import make_session
from tests.services.redis_sentinel import SERVICE, SentinelGroup

SESSIONS, EVENTS, KILL_AFTER = 40, 5, 12


@pytest.fixture
def group(tmp_path: Path):
    g = SentinelGroup(tmp_path)
    try:
        g.start()
        yield g
    finally:
        g.stop()


def _session(i: int) -> dict:
    return make_session(f"s{i}", turns=[("user", f"imported fact {j} of session {i}") for j in range(EVENTS)])


async def test_a_primary_killed_mid_import_loses_no_acknowledged_save_and_duplicates_none(group: SentinelGroup):
    cfg = {"sentinels": group.addresses, "service_name": SERVICE, "wait_replicas": 1, "socket_timeout": 2}
    memory = LongTermMemory(backend="redis", backend_config={**cfg, "prefix": f"f{uuid.uuid4().hex[:8]}:"})
    acknowledged: list[int] = []
    failed: list[int] = []
    errors: list[BaseException] = []
    old = group.primary_port()

    async def importer() -> None:
        for i in range(SESSIONS):
            if i == KILL_AFTER:
                group.kill_primary()
            try:
                await memory.add_session_to_memory(_session(i))
                acknowledged.append(i)
            except LongTermMemoryError as exc:  # anything else fails the test, as it escapes
                failed.append(i)
                errors.append(exc)
                await asyncio.sleep(0.1)

    async def on_the_new_primary() -> dict[str, int]:
        per: dict[str, int] = {}
        async for r in memory.iter_records(app_name="app", user_id="u1"):
            per[r.session_id] = per.get(r.session_id, 0) + 1
        return per

    async def scenario() -> None:
        await importer()
        assert group.wait_failover() != old
        # Before anything is retried: every acknowledged save is whole on the promoted replica.
        per = await on_the_new_primary()
        assert {f"s{i}": EVENTS for i in acknowledged}.items() <= per.items(), (acknowledged, per)
        print(f"acknowledged {len(acknowledged)}, failed {len(failed)} ({sorted(set(map(type, errors)), key=str)})")
        await asyncio.get_running_loop().run_in_executor(None, group.restart_old)
        for i in failed:  # after the switch, each failed save is retried until it lands
            deadline = time.monotonic() + 30
            while True:
                try:
                    await memory.add_session_to_memory(_session(i))
                    break
                except LongTermMemoryError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)

    try:
        await asyncio.wait_for(scenario(), 150)
        assert len(acknowledged) >= KILL_AFTER and failed, (acknowledged, failed)
        assert all("redis at sentinel://" in str(e) for e in errors), errors[:3]
        records = [r async for r in memory.iter_records(app_name="app", user_id="u1")]
        assert len(records) == len({r.id for r in records}) == SESSIONS * EVENTS  # all of them, each once
        by_session = {r.session_id for r in records}
        assert {f"s{i}" for i in acknowledged} <= by_session  # what was acknowledged survived the failover
        assert await memory.count(app_name="app", user_id="u1") == SESSIONS * EVENTS
        for i in range(SESSIONS):  # replays write nothing
            assert (await memory.add_session_to_memory(_session(i))).saved == 0
        found = await memory.search_memory(app_name="app", user_id="u1", query="imported fact 3 of session 0")
        assert found.memories
    finally:
        await memory.close()
