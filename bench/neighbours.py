"""Cost of a hit's session neighbours on the local store, beside a plain search in the same run.

    python bench/neighbours.py [--records 100000] [--users 100] [--queries 500] [--per-session 50] [--saves 2000]

The facade asks for the neighbours of its top 5 hits (before=1, after=1) on every search, and
of the returned hits with ``context=N``. One store is built through the store's own write
primitive (``users`` users; sessions of ``per_session`` turns, saved a turn at a time among the
other users' turns, as agents saving after each turn do). Then each query (the last three words
of a text like the stored ones, a user in turn) is searched (top 5), and right after it one way
of reading its hits' neighbours is timed, each way in turn: ``neighbours`` through the engine's
public async API (one hop to a reader thread), the same work on this thread (``_around``), and
on this thread the ways not taken: each session's every row read to find the neighbours (then
those records), and one step (every record of the hits' sessions parsed). A second table is what
``records_by_session`` costs a write: one-turn saves on the store and on a copy without the index.
It prints the tables (medians and 90th percentiles) and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import texts
from rich.console import Console
from rich.table import Table

from longterm.backends.local import LocalBackend
from longterm.records import MemoryRecord, Scope, record_id

APP = "bench"
PER_SESSION = 50
BATCH = 5_000


def build(path: Path, n: int, users: int, per_session: int) -> None:
    pool = texts(20_000, seed=3)
    store = LocalBackend(path)
    store._open()
    batch: list[MemoryRecord] = []
    for i in range(n):
        user, turn = i % users, i // users
        session, event = f"s{turn // per_session}", f"e{turn % per_session}"
        text = pool[i % len(pool)]
        batch.append(
            MemoryRecord(
                id=record_id(APP, f"u{user}", session, event),
                app_name=APP,
                user_id=f"u{user}",
                session_id=session,
                event_id=event,
                author="user",
                role="user",
                text=text,
                content={"role": "user", "parts": [{"text": text}]},
                timestamp=1_700_000_000.0 + i,
            )
        )
        if len(batch) == BATCH:
            store._write(batch, None)
            batch = []
    if batch:
        store._write(batch, None)
    store._close()


#: The way not taken (the comparison): each session's every row read, as a store without
#: ``records_by_session`` would (through the UNIQUE index alone), with what the core needs of
#: each (its id, its rowid), in session order.
WHOLE = """
SELECT session_id, id, rowid FROM records INDEXED BY sqlite_autoindex_records_1
WHERE scope = ? AND session_id IN ({}) ORDER BY session_id, timestamp, rowid
"""


def every_row(store: LocalBackend, scope: Scope, anchors: list[MemoryRecord], everything: bool = False) -> list[int]:
    """The rowids of the rows just before and after each anchor, found by reading its session's
    every row; with ``everything``, of all those rows."""
    conn = store._reader()
    scope_id = store._scope(scope.app_name, scope.user_id, conn=conn)
    sessions = list({a.session_id for a in anchors})
    order: dict[str, list[tuple[str, int]]] = {}
    for sid, rid, rowid in conn.execute(WHOLE.format(",".join("?" * len(sessions))), (scope_id, *sessions)):
        order.setdefault(sid, []).append((rid.hex() if isinstance(rid, bytes) else rid, rowid))
    if everything:
        return [rowid for rows in order.values() for _, rowid in rows]
    wanted = []
    for a in anchors:
        rows = order[a.session_id]
        i = [rid for rid, _ in rows].index(a.id)
        wanted += [rowid for _, rowid in rows[max(0, i - 1) : i] + rows[i + 1 : i + 2]]
    return wanted


def row(name: str, ms: list[float], base: float | None) -> tuple[str, ...]:
    med = statistics.median(ms)
    p90 = statistics.quantiles(ms, n=10)[-1]
    added = "" if base is None else f"{med / base:.2f}x of the search"
    return name, f"{med:.3f}", f"{p90:.3f}", f"{len(ms)}", added


def ways(store: LocalBackend) -> dict[str, Callable[[Scope, list[MemoryRecord]], Awaitable[object]]]:
    """What is timed after a search, one per search in turn (each right after a search, as the
    facade's): the public call, and on this thread the same work and the ways not taken."""

    async def public(n: int, scope: Scope, anchors: list[MemoryRecord]) -> object:
        return await store.neighbours(scope, anchors, n, n)

    async def here(scope: Scope, anchors: list[MemoryRecord]) -> object:
        return store._around(scope, anchors, 1, 1)

    async def whole(scope: Scope, anchors: list[MemoryRecord]) -> object:
        return store._records_at(scope, every_row(store, scope, anchors))

    async def one_step(scope: Scope, anchors: list[MemoryRecord]) -> object:
        return store._records_at(scope, every_row(store, scope, anchors, everything=True))

    return {
        "neighbours of the 5 hits, 1 before and 1 after": functools.partial(public, 1),
        "neighbours of the 5 hits, context=3": functools.partial(public, 3),
        "the same (1, 1) on this thread, no hop": here,
        "instead: each session's every row read, then those 10 records": whole,
        "instead, one step: every record of their sessions parsed": one_step,
    }


async def measure(path: Path, users: int, n_queries: int) -> list[tuple[str, list[float]]]:
    store = LocalBackend(path)
    times: dict[str, list[float]] = {"search, top 5": []}
    qs = [" ".join(t.split()[-3:]) for t in texts(20_000, seed=3)[7::61][:n_queries]]  # words of stored texts
    options = ways(store)
    try:
        for i, q in enumerate([*qs[:20], *qs]):  # the first 20: warming caches and connections, not counted
            scope = Scope(app_name=APP, user_id=f"u{i % users}")
            start = time.perf_counter()
            hits = await store.search(scope, q, 5)
            searched = (time.perf_counter() - start) * 1000
            if len(hits) < 5:
                continue
            name, way = list(options.items())[i % len(options)]
            start = time.perf_counter()
            await way(scope, [h.record for h in hits])
            if i >= 20:
                times["search, top 5"].append(searched)
                times.setdefault(name, []).append((time.perf_counter() - start) * 1000)
    finally:
        await store.close()
    return list(times.items())


def saves(path: Path, users: int, n: int) -> dict[str, list[float]]:
    """Microseconds of one-turn saves (``_write`` of one record: an agent saving after each turn, users
    in turn) on a copy of the store with ``records_by_session`` and on one without it, in
    alternating rounds of 100 (what the index costs a write)."""
    without = path.with_name("without.db")
    shutil.copy(path, without)
    with sqlite3.connect(without) as conn:
        conn.execute("DROP INDEX records_by_session")
    stores = {"with records_by_session": LocalBackend(path), "without it": LocalBackend(without)}
    times: dict[str, list[float]] = {name: [] for name in stores}
    for store in stores.values():
        store._open()
    for k in range(n):
        for name, store in stores.items():
            user = f"u{k % users}"
            r = MemoryRecord(
                id=record_id(APP, user, "new", f"n{k}"),
                app_name=APP,
                user_id=user,
                session_id="new",
                event_id=f"n{k}",
                role="user",
                text=f"one more turn {k}",
                timestamp=1_800_000_000.0 + k,
            )
            start = time.perf_counter()
            store._write([r], None)
            times[name].append((time.perf_counter() - start) * 1e6)
    for store in stores.values():
        store._close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--per-session", type=int, default=PER_SESSION)
    parser.add_argument("--saves", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.db"
        start = time.perf_counter()
        build(path, args.records, args.users, args.per_session)
        built = time.perf_counter() - start
        results = asyncio.run(measure(path, args.users, args.queries))
        written = saves(path, args.users, args.saves)
    per_user = args.records // args.users
    table = Table(
        title=f"local, {args.records:,} records: {args.users} users of {per_user:,}, sessions of {args.per_session} turns"
    )
    for col in ("operation", "median ms", "p90 ms", "runs", "beside the search"):
        table.add_column(col, justify="right")
    base = statistics.median(results[0][1])
    for k, (name, ms) in enumerate(results):
        table.add_row(*row(name, ms, None if k == 0 else base))
    Console().print(table)
    print(f"{len(results[0][1])} searches with 5 hits; store built in {built:.0f} s through LocalBackend._write")
    table = Table(title=f"what the index costs a write: one-turn saves at {args.records:,} records")
    for col in ("store", "median us", "p90 us", "saves"):
        table.add_column(col, justify="right")
    for name, us in written.items():
        table.add_row(name, f"{statistics.median(us):.0f}", f"{statistics.quantiles(us, n=10)[-1]:.0f}", str(len(us)))
    Console().print(table)


if __name__ == "__main__":
    main()
