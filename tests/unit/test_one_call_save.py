"""A save on an engine that is its own ledger is one call on its worker (issue 28).

The seam: ``Saver`` hands the engine ``plan(saved)``, and ``Saving.save_planned`` reads the
ledger, plans and writes in one worker call. Why it matters to a user: each hop to a worker
waits for the scheduler; on a busy machine those waits, not the work, were most of a small
save's time. What a save promises stays: incremental, nothing written twice, an erase stays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from longterm import LongTermMemory


def session(sid: str, n: int, start: int = 0) -> dict[str, Any]:
    return {
        "id": sid,
        "app_name": "app",
        "user_id": "u",
        "events": [
            {
                "id": f"{sid}-{i}",
                "author": "user",
                "timestamp": 1_700_000_000 + i,
                "content": {"parts": [{"text": f"turn {i} about tea"}]},
            }
            for i in range(start, n)
        ],
    }


async def counted(memory: LongTermMemory) -> list[str]:
    runner = (await memory.located("app", "u")).backend.runner  # type: ignore[attr-defined]
    calls: list[str] = []
    real = runner.run

    async def run(what: str, fn: Any, *args: object) -> Any:
        calls.append(what)
        return await real(what, fn, *args)

    runner.run = run  # type: ignore[method-assign]
    return calls


async def test_a_session_save_is_one_worker_call(tmp_path: Path) -> None:
    memory = LongTermMemory(backend="local", backend_config={"path": str(tmp_path / "m.db")})
    await memory.add_session_to_memory(session("s0", 3))  # opens the store and records the embedder
    calls = await counted(memory)
    result = await memory.add_session_to_memory(session("s1", 5))
    assert (result.saved, calls) == (5, ["saving memories"])
    await memory.close()


async def test_one_call_saves_stay_incremental_and_erased_stays_erased(tmp_path: Path) -> None:
    memory = LongTermMemory(backend="local", backend_config={"path": str(tmp_path / "m.db")})
    first = await memory.add_session_to_memory(session("s", 4))
    again = await memory.add_session_to_memory(session("s", 6))
    assert (first.saved, again.new_events, again.saved) == (4, 2, 2)
    hits = await memory.search_memory(app_name="app", user_id="u", query="tea")
    gone = hits.memories[0]
    assert await memory.delete_memory(app_name="app", user_id="u", memory_id=gone.id) == 1
    replay = await memory.add_session_to_memory(session("s", 6))
    assert replay.saved == 0
    left = await memory.search_memory(app_name="app", user_id="u", query="tea")
    assert gone.id not in {m.id for m in left.memories} and len(left.memories) == 5
    await memory.close()
