"""Cost of the local backend: saves/s, search latency and bytes per record, next to raw SQLite FTS5.

    python bench/ingest_search.py [--sizes 10000 100000] [--queries 300] [--runs 3]

Both sides run in this process on the same data, interleaved session by session and query
by query, so a busy machine slows both alike and the ratio holds. "ours" goes through the
public API (add_session_to_memory: session reading, ledger, policy, records, the store;
search_memory: scope check, query processing, FTS5, MemoryEntry building); "raw" is the
least a program could do with sqlite3 alone (one table with an FTS5 index, executemany in
a transaction per session; MATCH joined on the user, ORDER BY rank). Long queries: a
100 KB paste and 1,000 distinct words. Prints a table per run; asserts nothing.
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

from _common import USERS, pct
from _data import queries, sessions, texts
from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory
from longterm.backends.local import LocalBackend
from longterm.policies import resolve_policy
from longterm.records import Scope
from longterm.retrieval.text import query_terms
from longterm.saves import plan_save
from longterm.sessions import read_session

RAW_SCHEMA = """
PRAGMA journal_mode=WAL;
PRAGMA synchronous=NORMAL;
CREATE TABLE m (rowid INTEGER PRIMARY KEY, user_id TEXT, text TEXT);
CREATE INDEX m_user ON m(user_id);
CREATE VIRTUAL TABLE f USING fts5(text, content='m', content_rowid='rowid');
CREATE TRIGGER m_ai AFTER INSERT ON m BEGIN INSERT INTO f(rowid, text) VALUES (new.rowid, new.text); END;
"""
RAW_SEARCH = (
    "SELECT m.text FROM f JOIN m ON m.rowid = f.rowid WHERE f MATCH ? AND m.user_id = ? ORDER BY f.rank LIMIT 5"
)


def long_queries() -> dict[str, str]:
    paste = " ".join(texts(2000, seed=3))[:100_000]
    words = list(dict.fromkeys(" ".join(texts(400, seed=5)).split()))[:1000]
    return {"100 KB paste": paste, "1,000 distinct words": " ".join(words)}


def raw_query(q: str) -> str:
    return " OR ".join(f'"{t}"' for t in dict.fromkeys(query_terms(q, stem=False)))


async def save_both(raw: sqlite3.Connection, memory: LongTermMemory, s: dict, took: dict[str, float]) -> None:
    """One session into raw (a transaction of inserts) and into ours, each timed into ``took``."""
    t = time.perf_counter()
    raw.execute("BEGIN")
    raw.executemany(
        "INSERT INTO m (user_id, text) VALUES (?, ?)",
        [(s["user_id"], e["content"]["parts"][0]["text"]) for e in s["events"]],
    )
    raw.execute("COMMIT")
    took["raw"] += time.perf_counter() - t
    t = time.perf_counter()
    await memory.add_session_to_memory(s)
    took["ours"] += time.perf_counter() - t


async def search_both(raw: sqlite3.Connection, memory: LongTermMemory, qs: list[str]) -> dict[str, list[float]]:
    """Each query on raw then on ours (user ``i % USERS``): latencies in ms."""
    lat: dict[str, list[float]] = {"raw": [], "ours": []}
    for i, q in enumerate(qs):
        user = f"user-{i % USERS}"
        t = time.perf_counter()
        raw.execute(RAW_SEARCH, (raw_query(q), user)).fetchall()
        lat["raw"].append(time.perf_counter() - t)
        t = time.perf_counter()
        await memory.search_memory(app_name="bench", user_id=user, query=q)
        lat["ours"].append(time.perf_counter() - t)
    return lat


async def long_both(raw: sqlite3.Connection, memory: LongTermMemory) -> dict[str, dict[str, float]]:
    """``long_queries()`` on raw and on ours: ms each."""
    long: dict[str, dict[str, float]] = {}
    for label, q in long_queries().items():
        t = time.perf_counter()
        raw.execute(RAW_SEARCH, (raw_query(q), "user-1")).fetchall()
        t_r = time.perf_counter() - t
        t = time.perf_counter()
        await memory.search_memory(app_name="bench", user_id="user-1", query=q)
        long[label] = {"raw": t_r * 1000, "ours": (time.perf_counter() - t) * 1000}
    return long


async def run(tmp: Path, n: int, qs: list[str]) -> dict:
    data = list(sessions(n, USERS, per_session=50))
    raw = sqlite3.connect(tmp / "raw.db", isolation_level=None)
    raw.executescript(RAW_SCHEMA)
    memory = LongTermMemory(backend_config={"path": str(tmp / "ours.db")})
    took = {"raw": 0.0, "ours": 0.0}
    for s in data:
        await save_both(raw, memory, s, took)
    lat = await search_both(raw, memory, qs)
    long = await long_both(raw, memory)
    raw.close()
    await memory.close()
    size = {who: sum(p.stat().st_size for p in tmp.glob(f"{who}.db*")) / n for who in ("raw", "ours")}  # closed
    return {"rate": {who: n / took[who] for who in took}, "lat": lat, "long": long, "bytes": size}


def breakdown(tmp: Path, n: int) -> dict[str, float]:
    """Microseconds per record of a save's parts, each timed alone on the same data: the
    facade's Python (reading the session; planning: policy and records) and the store's
    primitives (ledger read, records and ledger written) called directly on this thread."""
    data = list(sessions(n, USERS, per_session=50))
    policy = resolve_policy(None)
    store = LocalBackend(tmp / "parts.db")
    store.runner.prepare()
    reading = planning = primitives = 0.0
    for s in data:
        t = time.perf_counter()
        view = read_session(s)
        scope = Scope(app_name=view.app_name, user_id=view.user_id)
        t2 = time.perf_counter()
        saved = store._ledger_saved(scope, view.session_id)
        t3 = time.perf_counter()
        plan = plan_save(view, saved, policy)
        t4 = time.perf_counter()
        store._commit(plan.records, None, scope, view.session_id, plan.covered)
        t5 = time.perf_counter()
        reading += t2 - t
        planning += t4 - t3
        primitives += (t3 - t2) + (t5 - t4)
    store._close()
    return {
        "reading the session": reading / n * 1e6,
        "planning (policy, records)": planning / n * 1e6,
        "store primitives": primitives / n * 1e6,
    }


async def embedding(tmp: Path, embedder: str) -> dict[str, float]:
    """Seconds for one 50-event session to be saved, and to be fully embedded, with ``embedder``:
    on the save path, and with ``embed_later``."""
    data = list(sessions(150, USERS, per_session=50))
    out = {}
    for mode in ("on the save path", "embed_later"):
        config = {"path": str(tmp / f"{mode}.db"), "embedder": embedder, "embed_later": mode == "embed_later"}
        memory = LongTermMemory(backend_config=config)
        await memory.add_session_to_memory(data[0])  # loads the model
        await memory.backend_instance.embed_backlog()
        for s in data[1:]:
            t = time.perf_counter()
            await memory.add_session_to_memory(s)
            saved = time.perf_counter() - t
            await memory.backend_instance.embed_backlog()
            out.setdefault(mode, []).append((saved, time.perf_counter() - t))
        await memory.close()
    return {
        f"{mode}: {what}": min(x[i] for x in runs)
        for mode, runs in out.items()
        for i, what in enumerate(("saved", "embedded"))
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--embedder", help="also time a 50-event session's save and embedding with this embedder")
    args = ap.parse_args()
    qs = queries(args.queries)
    console = Console(width=160)
    for r in range(1, args.runs + 1):
        table = Table(title=f"run {r}: local backend vs raw SQLite FTS5 ({USERS} users, sessions of 50, top 5)")
        cols = (
            "records",
            "system",
            "saves/s",
            "ratio",
            "p50 ms",
            "p99 ms",
            "100 KB query ms",
            "1,000 words ms",
            "B/rec",
        )
        for col in cols:
            table.add_column(col, justify="right")
        for n in args.sizes:
            with tempfile.TemporaryDirectory() as tmp:
                res = asyncio.run(run(Path(tmp), n, qs))
            for who, label in (("raw", "raw sqlite3+FTS5"), ("ours", "longterm local")):
                rate, lat, long = res["rate"][who], res["lat"][who], res["long"]
                table.add_row(
                    f"{n:,}" if who == "raw" else "",
                    label,
                    f"{rate:,.0f}",
                    f"{rate / res['rate']['raw']:.2f}",
                    f"{pct(lat, 0.5):.2f}",
                    f"{pct(lat, 0.99):.2f}",
                    f"{long['100 KB paste'][who]:.1f}",
                    f"{long['1,000 distinct words'][who]:.1f}",
                    f"{res['bytes'][who]:,.0f}",
                )
        console.print(table)
        with tempfile.TemporaryDirectory() as tmp:
            parts = breakdown(Path(tmp), max(args.sizes))
        console.print("a save's parts alone, us per record: " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()))
        if args.embedder:
            with tempfile.TemporaryDirectory() as tmp:
                for what, seconds in asyncio.run(embedding(Path(tmp), args.embedder)).items():
                    console.print(f"{args.embedder}, a 50-event session {what}: {seconds * 1000:,.0f} ms")


if __name__ == "__main__":
    main()
