"""What ``wait_replicas=1`` costs a save: the same sessions saved with 0 and 1, in the same run.

    python bench/redis_wait.py [--sessions 300] [--events 10]

Starts a throw-away primary and replica (Redis Stack, the way the tests do; needs
`bash scripts/test` to have installed it once) on 127.0.0.1. Each session is saved by two
memories on the same primary, one with ``wait_replicas=0`` (the baseline) and one with
``wait_replicas=1`` (each save's script, then ``WAIT 1`` on its connection), interleaved
session by session so a noisy machine slows both alike. A replica on the same host answers
WAIT in about a round trip; over a network the cost grows with the link's latency. Prints
a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _common import pct  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from longterm import LongTermMemory  # noqa: E402
from tests.services.redis_sentinel import SentinelGroup  # noqa: E402


def _session(i: int, events: int) -> dict:
    turns = [
        {"id": f"e{j}", "author": "user", "content": {"role": "user", "parts": [{"text": f"fact {j} of session {i}"}]}}
        for j in range(events)
    ]
    return {"id": f"s{i}", "app_name": "bench", "user_id": f"user-{i % 50}", "events": turns}


async def run(sessions: int, events: int) -> dict[int, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        group = SentinelGroup(Path(tmp))
        group.start()
        try:
            url = f"redis://127.0.0.1:{group.primary_port()}/0"
            memories = {
                n: LongTermMemory(
                    backend="redis",
                    backend_config={"url": url, "prefix": f"b{uuid.uuid4().hex[:6]}:", "wait_replicas": n},
                )
                for n in (0, 1)
            }
            times: dict[int, list[float]] = {0: [], 1: []}
            for i in range(sessions):
                for n, memory in memories.items():
                    t = time.perf_counter()
                    await memory.add_session_to_memory(_session(i, events))
                    times[n].append(time.perf_counter() - t)
            for memory in memories.values():
                await memory.close()
            return times
        finally:
            group.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--events", type=int, default=10)
    args = ap.parse_args()
    times = asyncio.run(run(args.sessions, args.events))
    table = Table(title=f"redis saves, {args.sessions} sessions of {args.events} events, primary + 1 replica")
    for col in ("wait_replicas", "events/s", "save p50 ms", "save p95 ms", "vs 0"):
        table.add_column(col, justify="right")
    base = sum(times[0])
    for n, ts in times.items():
        rate = args.sessions * args.events / sum(ts)
        table.add_row(str(n), f"{rate:,.0f}", f"{pct(ts, 0.5):.2f}", f"{pct(ts, 0.95):.2f}", f"{sum(ts) / base:.2f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
