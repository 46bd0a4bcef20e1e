"""qdrant-edge reads a hit's neighbours a few points each side of it (``qdrant.windows``), never
its whole session where the store indexes its points' time, and answers exactly as the
whole-session read does: ties in time, every window size, anchors erased or moved in time, and
a store with a point written without its time (read whole, as before)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory
from longterm.backends.qdrant import QdrantEdgeBackend
from longterm.backends.qdrant.common import point_id
from longterm.records import MemoryRecord


def _session(sid: str, times: list[float], user: str = "u") -> dict[str, Any]:
    events = [
        {
            "id": f"{sid}-e{i:03d}",
            "author": "user",
            "timestamp": t,
            "content": {"role": "user", "parts": [{"text": f"turn {i}"}]},
        }
        for i, t in enumerate(times)
    ]
    return {"id": sid, "app_name": "app", "user_id": user, "events": events}


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[LongTermMemory]:
    m = LongTermMemory(backend="qdrant", backend_config={"path": str(tmp_path / "q")}, index="w")
    yield m
    await m.close()


def _engine(memory: LongTermMemory) -> QdrantEdgeBackend:
    engine = memory.backend_instance
    assert isinstance(engine, QdrantEdgeBackend)
    return engine


async def _records(memory: LongTermMemory, user: str = "u") -> list[MemoryRecord]:
    return sorted([r async for r in memory.iter_records(app_name="app", user_id=user)], key=lambda r: r.event_id)


def _ids(got: list[tuple[list[MemoryRecord], list[MemoryRecord]]]) -> list[tuple[list[str], list[str]]]:
    return [([r.event_id for r in b], [r.event_id for r in a]) for b, a in got]


async def _whole(engine: QdrantEdgeBackend, scope: Any, anchors: list[MemoryRecord], before: int, after: int) -> Any:
    """The same neighbours read the way a store without windows reads them: sessions whole."""
    engine.windowed = False
    try:
        return await engine.neighbours(scope, anchors, before, after)
    finally:
        engine.windowed = True


async def test_a_new_store_reads_a_hits_neighbours_without_reading_its_session_whole(
    memory: LongTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    for s in range(3):  # sessions of 60 turns, their times apart
        await memory.add_session_to_memory(_session(f"s{s}", [1e6 + 1000.0 * s + i for i in range(60)]))
    await memory.add_session_to_memory(_session("s1", [1e6 + 1030.5], user="other"))  # another user, between s1's turns
    engine, recs = _engine(memory), {r.event_id: r for r in await _records(memory)}
    await engine.count(memory.scope("app", "u"))  # opened
    assert engine.windowed

    def whole(*args: object) -> None:
        raise AssertionError("a session was read whole")

    monkeypatch.setattr(engine, "_session_rows", whole)
    anchors = [recs["s1-e030"], recs["s0-e000"], recs["s2-e059"], recs["s1-e031"]]
    got = await engine.neighbours(memory.scope("app", "u"), anchors, 2, 1)
    assert _ids(got) == [
        (["s1-e028", "s1-e029"], ["s1-e031"]),
        ([], ["s0-e001"]),
        (["s2-e057", "s2-e058"], []),
        (["s1-e029", "s1-e030"], ["s1-e032"]),
    ]
    assert {r.user_id for b, a in got for r in (*b, *a)} == {"u"}


async def test_windows_answer_as_whole_sessions_do_ties_and_every_size(memory: LongTermMemory) -> None:
    rng = random.Random(7)
    for s, spread in enumerate((3, 12, 40, 10_000)):  # many ties in time ... none
        await memory.add_session_to_memory(_session(f"s{s}", [float(rng.randint(0, spread)) for _ in range(30)]))
    engine, recs = _engine(memory), await _records(memory)
    scope = memory.scope("app", "u")
    for _ in range(150):
        anchors, before, after = rng.sample(recs, rng.randint(1, 5)), rng.randint(0, 4), rng.randint(0, 4)
        got = await engine.neighbours(scope, anchors, before, after)
        assert _ids(got) == _ids(await _whole(engine, scope, anchors, before, after)), (anchors, before, after)


async def test_an_anchor_erased_or_moved_in_time_is_answered_as_before(memory: LongTermMemory) -> None:
    await memory.add_session_to_memory(_session("s", [10.0 + i for i in range(8)]))
    engine, recs = _engine(memory), await _records(memory)
    scope = memory.scope("app", "u")
    moved = recs[4].model_copy(update={"timestamp": 12.5})  # the stored one stays at 14
    assert await memory.delete_memory(app_name="app", user_id="u", memory_id=recs[2].id) == 1
    anchors = [recs[2], moved, recs[3]]
    got = await engine.neighbours(scope, anchors, 2, 2)
    assert _ids(got) == [
        ([], []),
        (["s-e001", "s-e003"], ["s-e005", "s-e006"]),
        (["s-e000", "s-e001"], ["s-e004", "s-e005"]),
    ]
    assert _ids(got) == _ids(await _whole(engine, scope, anchors, 2, 2))


async def test_a_store_with_a_point_written_without_its_time_reads_sessions_whole(tmp_path: Path) -> None:
    """As a store written before the time was kept (or since, by such a release)."""
    config = {"path": str(tmp_path / "q")}
    memory = LongTermMemory(backend="qdrant", backend_config=config, index="w")
    await memory.add_session_to_memory(_session("s", [10.0 + i for i in range(5)]))
    recs = await _records(memory)
    engine = _engine(memory)
    e = engine._e
    engine._shard.update(e.UpdateOperation.delete_payload([point_id(recs[1].id)], ["timestamp"]))
    await memory.close()
    again = LongTermMemory(backend="qdrant", backend_config=config, index="w")
    engine = _engine(again)
    got = await engine.neighbours(again.scope("app", "u"), [recs[2]], 1, 1)
    assert _ids(got) == [(["s-e001"], ["s-e003"])]
    assert not engine.windowed
    await again.close()
