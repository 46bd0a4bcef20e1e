"""Cost of the local backend: saves/s and search latency, next to raw SQLite FTS5.

    python bench/ingest_search.py [--sizes 10000 100000] [--queries 300]

Both sides run in this process on the same data: "ours" goes through the public API
(add_session_to_memory: session reading, ledger, policy, records, upsert; search_memory:
scope check, query processing, FTS5, MemoryEntry building); "raw" is the least a
program could do with sqlite3 alone (one table with an FTS5 index, executemany in a
transaction per session; MATCH joined on the user, ORDER BY rank). Prints a table;
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import pct
from _data import queries, sessions
from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory

USERS = 100


def raw_sqlite(path: Path, data: list[dict], qs: list[str]) -> dict:
    n = sum(len(s["events"]) for s in data)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE m (rowid INTEGER PRIMARY KEY, user_id TEXT, text TEXT)")
    conn.execute("CREATE INDEX m_user ON m(user_id)")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(text, content='m', content_rowid='rowid')")
    conn.execute(
        "CREATE TRIGGER m_ai AFTER INSERT ON m BEGIN INSERT INTO f(rowid, text) VALUES (new.rowid, new.text); END"
    )
    start = time.perf_counter()
    for s in data:
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO m (user_id, text) VALUES (?, ?)",
            [(s["user_id"], e["content"]["parts"][0]["text"]) for e in s["events"]],
        )
        conn.execute("COMMIT")
    ingest = time.perf_counter() - start
    lat = []
    sql = "SELECT m.text FROM f JOIN m ON m.rowid = f.rowid WHERE f MATCH ? AND m.user_id = ? ORDER BY f.rank LIMIT 5"
    for i, q in enumerate(qs):
        t = time.perf_counter()
        conn.execute(sql, (" OR ".join(q.split()), f"user-{i % USERS}")).fetchall()
        lat.append(time.perf_counter() - t)
    conn.close()
    return {"events/s": n / ingest, "p50": pct(lat, 0.5), "p95": pct(lat, 0.95), "bytes": path.stat().st_size}


async def ours(path: Path, data: list[dict], qs: list[str]) -> dict:
    n = sum(len(s["events"]) for s in data)
    memory = LongTermMemory(backend_config={"path": str(path)})
    start = time.perf_counter()
    for s in data:
        await memory.add_session_to_memory(s)
    ingest = time.perf_counter() - start
    bulk_path = path.with_name("bulk.db")
    bulk = LongTermMemory(backend_config={"path": str(bulk_path)})
    start = time.perf_counter()
    await bulk.add_sessions_to_memory(data)
    bulk_rate = n / (time.perf_counter() - start)
    await bulk.close()
    lat = []
    for i, q in enumerate(qs):
        t = time.perf_counter()
        await memory.search_memory(app_name="bench", user_id=f"user-{i % USERS}", query=q)
        lat.append(time.perf_counter() - t)
    await memory.close()
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return {"events/s": n / ingest, "bulk/s": bulk_rate, "p50": pct(lat, 0.5), "p95": pct(lat, 0.95), "bytes": size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    qs = queries(args.queries)
    table = Table(title=f"local backend vs raw SQLite FTS5 ({USERS} users, {args.queries} queries)")
    Console(width=150).print("saving and searching ...")
    for col in ("records", "system", "saves/s", "ratio", "search p50 ms", "p95 ms", "p50 ratio", "bytes/record"):
        table.add_column(col, justify="right")
    for n in args.sizes:
        data = list(sessions(n, USERS))
        with tempfile.TemporaryDirectory() as tmp:
            raw = raw_sqlite(Path(tmp) / "raw.db", data, qs)
            mine = asyncio.run(ours(Path(tmp) / "ours.db", data, qs))
        table.add_row(
            f"{n:,}",
            "raw sqlite3+FTS5",
            f"{raw['events/s']:,.0f}",
            "1.00",
            f"{raw['p50']:.2f}",
            f"{raw['p95']:.2f}",
            "1.00",
            f"{raw['bytes'] / n:,.0f}",
        )
        table.add_row(
            "", "longterm bulk (add_sessions_to_memory)", f"{mine['bulk/s']:,.0f}", f"{mine['bulk/s'] / raw['events/s']:.2f}",
            "", "", "", "",
        )  # fmt: skip
        table.add_row(
            "", "longterm (add_session_to_memory)", f"{mine['events/s']:,.0f}", f"{mine['events/s'] / raw['events/s']:.2f}",
            f"{mine['p50']:.2f}", f"{mine['p95']:.2f}", f"{mine['p50'] / raw['p50']:.2f}", f"{mine['bytes'] / n:,.0f}",
        )  # fmt: skip
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
