"""Where a save's time goes around the store: the hops to the engine's worker and back.

    python bench/save_hops.py [--events 20000] [--saves 400]

A save (``add_session_to_memory``, sessions of 50 user events, the local backend) is timed at
each of its ends and at both ends of its one call on the engine's worker (``save_planned``
and ``_plan_now`` wrapped with clocks, nothing else changed): before the call (reading the
session, its scope), the hop to the worker, the worker's plan and commit, the hop back, and
what follows. The baseline, in the same run and alternating with it: a bare
``ThreadPoolExecutor`` round trip from the same loop of an empty job and of a job that keeps
its thread busy as long as a save's worker call did, timed the same way. Medians in us; asserts
nothing.

Why: a save's hops are the part of its time that is neither the facade's Python nor SQLite;
this says how much of it any thread hand-off pays on this machine (waking an idle CPU) and
how much is ours.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import USERS
from _data import sessions
from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory
from longterm.core.saving import Saving

STEPS = ("before the worker call", "hop to the worker", "worker: plan and commit", "hop back", "after")


def clocked(marks: dict[str, float]) -> None:
    """Wrap ``Saving.save_planned`` (on the loop) and ``Saving._plan_now`` (on the worker) with clocks."""
    plan_now, save_planned = Saving._plan_now, Saving.save_planned

    def _plan_now(self: Any, *args: Any) -> Any:
        marks["start"] = time.perf_counter()
        try:
            return plan_now(self, *args)
        finally:
            marks["end"] = time.perf_counter()

    async def _save_planned(self: Any, *args: Any) -> Any:
        marks["call"] = time.perf_counter()
        try:
            return await save_planned(self, *args)
        finally:
            marks["back"] = time.perf_counter()

    setattr(Saving, "_plan_now", _plan_now)  # noqa: B010 (a clock around it, for this run only)
    setattr(Saving, "save_planned", _save_planned)  # noqa: B010


def busy(seconds: float) -> tuple[float, float]:
    """A job that keeps its thread on the CPU for ``seconds``: (its start, its end)."""
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        pass
    return start, time.perf_counter()


async def bare(pool: ThreadPoolExecutor, seconds: float) -> tuple[float, float]:
    """A bare round trip: (hop to the worker, hop back) in seconds."""
    t = time.perf_counter()
    start, end = await asyncio.wrap_future(pool.submit(busy, seconds))
    return start - t, time.perf_counter() - end


async def main(events: int, saves: int) -> None:
    marks: dict[str, float] = {}
    clocked(marks)
    data = list(sessions(events, USERS, per_session=50))[:saves]
    pool = ThreadPoolExecutor(1)
    rows: dict[str, list[float]] = {s: [] for s in STEPS}
    empty: list[tuple[float, float]] = []
    loaded: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        memory = LongTermMemory(backend_config={"path": str(Path(tmp) / "hops.db")})
        await memory.add_session_to_memory(data[0])  # opened and prepared: not counted
        for s in data[1:]:
            t = time.perf_counter()
            await memory.add_session_to_memory(s)
            done = time.perf_counter()
            m = marks
            for step, took in zip(
                STEPS,
                (m["call"] - t, m["start"] - m["call"], m["end"] - m["start"], m["back"] - m["end"], done - m["back"]),
                strict=True,
            ):
                rows[step].append(took)
            empty.append(await bare(pool, 0.0))
            loaded.append(await bare(pool, m["end"] - m["start"]))
        await memory.close()
    pool.shutdown()
    us = lambda xs: f"{statistics.median(xs) * 1e6:,.0f}"  # noqa: E731
    table = Table(title=f"a save's steps, {len(data) - 1} saves of 50 events (medians, us)")
    for col in ("step", "longterm save", "bare executor, empty job", "bare executor, job as long as the save's"):
        table.add_column(col, justify="right")
    for step in STEPS:
        base = {"hop to the worker": 0, "hop back": 1}.get(step)
        table.add_row(
            step,
            us(rows[step]),
            us([e[base] for e in empty]) if base is not None else "",
            us([e[base] for e in loaded]) if base is not None else "",
        )
    hops = [a + b for a, b in zip(rows["hop to the worker"], rows["hop back"], strict=True)]
    same = [a + b for a, b in loaded]
    table.add_row("both hops", us(hops), us([a + b for a, b in empty]), us(same))
    Console().print(table)
    per = statistics.median(hops) / 50 * 1e6
    print(
        f"both hops: {per:.1f} us a record; a bare round trip of a job as long: {statistics.median(same) / 50 * 1e6:.1f}"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--saves", type=int, default=400)
    a = ap.parse_args()
    asyncio.run(main(a.events, a.saves))
