"""A search's cost against the size of its hits' sessions, on every engine.

    python bench/neighbours_session_size.py [--events 10000] [--queries 200] [--engines local,redis,...]

Two users hold the same ``events`` texts at the same times: ``one`` in a single session, ``many``
in sessions of 50. Each query (three mid-frequency words) is searched for each user through
``LongTermMemory.search`` (top 5; the facade reads the neighbours of its top hits), alternating
users and the two ways of reading neighbours, in the same run:

- ``by time``: what the engines do now (``core.windows``: a few records each side of each hit,
  by time; local reads its positions by index, qdrant-edge its windows);
- ``whole``: the way before (each hit's whole session read), for every engine but local and
  qdrant-edge (which had their own reads already), by putting ``core.neighbours``' default
  ``_session_positions`` back.

Redis and OpenSearch are the test suite's engines (``tests/services``: a ``redis-server`` and an
OpenSearch JVM started here). Prints p50 and p90 per engine, user and way, and the ratio of
``one`` to ``many``; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.services: the suite's engines
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import pct
from _data import queries, texts
from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory
from longterm.core.neighbours import SessionReads
from longterm.core.windows import TimeWindows
from longterm.records import MemoryRecord, record_id

APP = "bench"
PER_SESSION = 50
ENGINES = ("local", "qdrant-edge", "qdrant-local", "redis", "opensearch")


def records(user: str, events: int, per_session: int | None) -> list[MemoryRecord]:
    pool = texts(events, seed=7)  # the vocabulary ``queries`` draws from
    out = []
    for i, text in enumerate(pool):
        session = "only" if per_session is None else f"s{i // per_session}"
        event = f"e{i:06d}"
        out.append(
            MemoryRecord(
                id=record_id(APP, user, session, event),
                app_name=APP,
                user_id=user,
                session_id=session,
                event_id=event,
                author="user",
                role="user",
                text=text,
                timestamp=1_700_000_000.0 + i * 30,
            )
        )
    return out


@contextlib.contextmanager
def servers(names: list[str], work: Path) -> Iterator[dict[str, Any]]:
    """backend (name, config) per engine, with Redis and OpenSearch started for the run."""
    from tests.services.opensearch_node import OpenSearchNode
    from tests.services.redis_server import RedisServer

    started: list[Any] = []
    configs: dict[str, Any] = {}
    try:
        for name in names:
            if name == "local":
                configs[name] = ("local", {"path": str(work / "memory.db")})
            elif name.startswith("qdrant-"):
                configs[name] = ("qdrant", {"path": str(work / name), "engine": name.split("-")[1]})
            elif name == "redis":
                server = RedisServer()
                (work / "redis").mkdir()
                server.start(work / "redis")
                started.append(server)
                configs[name] = ("redis", server.config(work))
            elif name == "opensearch":
                node = OpenSearchNode()
                node.launch(work / "os")
                node.wait_ready()
                started.append(node)
                configs[name] = ("opensearch", node.config(work))
        yield configs
    finally:
        for s in started:
            s.stop()


@contextlib.contextmanager
def whole_sessions(on: bool) -> Iterator[None]:
    """With ``on``: each hit's whole session read, as before ``core.windows``."""
    saved = TimeWindows._session_positions
    if on:
        TimeWindows._session_positions = SessionReads._session_positions  # type: ignore[method-assign]
    try:
        yield
    finally:
        TimeWindows._session_positions = saved  # type: ignore[method-assign]


async def run(name: str, backend: str, config: dict[str, Any], events: int, qs: list[str]) -> list[list[Any]]:
    rows = []
    async with LongTermMemory(backend=backend, backend_config=config, app_name=APP) as memory:
        engine: Any = memory.backend_instance
        for user, per in (("one", None), ("many", PER_SESSION)):
            batch = records(user, events, per)
            for i in range(0, len(batch), 1000):
                await engine.upsert(batch[i : i + 1000])
        ways = ["by time"] + (["whole"] if isinstance(engine, TimeWindows) else [])
        lat: dict[tuple[str, str], list[float]] = {(w, u): [] for w in ways for u in ("one", "many")}
        for q in qs[:5]:  # warm up
            await memory.search(q, user_id="one")
        for q in qs:
            for way in ways:
                for user in ("one", "many"):
                    with whole_sessions(way == "whole"):
                        t = time.perf_counter()
                        await memory.search(q, user_id=user)
                        lat[way, user].append(time.perf_counter() - t)
    for way in ways:
        one, many = lat[way, "one"], lat[way, "many"]
        ratio = statistics.median(one) / statistics.median(many)
        rows.append([name, way, f"{pct(one, 0.5):.2f}", f"{pct(one, 0.9):.2f}", f"{pct(many, 0.5):.2f}", f"{pct(many, 0.9):.2f}", f"{ratio:.2f}x"])  # fmt: skip
    return rows


def show(rows: list[list[Any]], events: int) -> None:
    table = Table(title=f"search p50/p90 (ms): one session of {events:,} vs sessions of {PER_SESSION}")
    for col in ("engine", "neighbours", "one p50", "one p90", "many p50", "many p90", "one / many p50"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console(width=120).print(table)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args()
    names = [e for e in args.engines.split(",") if e]
    qs = queries(args.queries, seed=17)
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory(prefix="longterm-bench-") as tmp, servers(names, Path(tmp)) as configs:
        for name in names:
            backend, config = configs[name]
            rows += await run(name, backend, config, args.events, qs)
            show(rows, args.events)  # so far: an engine's rows as soon as it is done


if __name__ == "__main__":
    asyncio.run(main())
