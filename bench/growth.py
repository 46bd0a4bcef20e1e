"""How the local backend's costs grow with the store: 10k to 1M records, next to raw SQLite FTS5.

    python bench/growth.py [--max 1000000] [--queries 300]

Records are added in steps (10k, 30k, 100k, 300k, 1M, up to ``--max``) to one store and
one raw SQLite FTS5 file (as in ingest_search.py), interleaved session by session; after
each step both answer the same queries, interleaved. Prints, per step: the step's save
rate and its ratio to raw, search p50/p99, a 100 KB paste and 1,000 distinct words as
queries, and bytes per record on disk. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import USERS, pct
from _data import queries, texts
from ingest_search import RAW_SCHEMA, long_both, save_both, search_both
from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory

STEPS = (10_000, 30_000, 100_000, 300_000, 1_000_000)
PER_SESSION = 50


def sessions_between(start: int, stop: int):
    """Sessions of 50 user events for records ``start`` to ``stop``, round-robin over users."""
    chunk = texts(stop - start, seed=start)
    for at in range(0, len(chunk), PER_SESSION):
        s = (start + at) // PER_SESSION
        yield {
            "id": f"s{s}",
            "app_name": "bench",
            "user_id": f"user-{s % USERS}",
            "events": [
                {
                    "id": f"s{s}-e{i}",
                    "author": "user",
                    "timestamp": 1_700_000_000 + start + at + i,
                    "content": {"role": "user", "parts": [{"text": t}]},
                }
                for i, t in enumerate(chunk[at : at + PER_SESSION])
            ],
        }


def checkpointed(path: Path) -> int:
    """The file's size once its write-ahead log is folded in (what a closed store takes)."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def grow(tmp: Path, top: int, qs: list[str], console: Console) -> Table:
    table = Table(title=f"growth: longterm local vs raw SQLite FTS5 ({USERS} users, sessions of 50, top 5)")
    cols = ("records", "system", "saves/s", "ratio", "p50 ms", "p99 ms", "100 KB query ms", "1,000 words ms", "B/rec")
    for col in cols:
        table.add_column(col, justify="right")
    raw = sqlite3.connect(tmp / "raw.db", isolation_level=None)
    raw.executescript(RAW_SCHEMA)
    memory = LongTermMemory(backend_config={"path": str(tmp / "ours.db")})
    done = 0
    for step in [s for s in STEPS if s <= top]:
        took = {"raw": 0.0, "ours": 0.0}
        for s in sessions_between(done, step):
            await save_both(raw, memory, s, took)
        rate = {who: (step - done) / took[who] for who in took}
        done = step
        lat = await search_both(raw, memory, qs)
        long = await long_both(raw, memory)
        size = {who: checkpointed(tmp / f"{who}.db") / step for who in ("raw", "ours")}
        for who, label in (("raw", "raw sqlite3+FTS5"), ("ours", "longterm local")):
            table.add_row(
                f"{step:,}" if who == "raw" else "",
                label,
                f"{rate[who]:,.0f}",
                f"{rate[who] / rate['raw']:.2f}",
                f"{pct(lat[who], 0.5):.2f}",
                f"{pct(lat[who], 0.99):.2f}",
                f"{long['100 KB paste'][who]:.1f}",
                f"{long['1,000 distinct words'][who]:.1f}",
                f"{size[who]:,.0f}",
            )
        ratio, p50, p99 = rate["ours"] / rate["raw"], pct(lat["ours"], 0.5), pct(lat["ours"], 0.99)
        console.print(f"{step:,}: ours {rate['ours']:,.0f}/s ({ratio:.2f}x raw), p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    raw.close()
    await memory.close()
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max", type=int, default=1_000_000, help="stop after the step of this many records")
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    console = Console(width=160)
    with tempfile.TemporaryDirectory() as tmp:
        table = asyncio.run(grow(Path(tmp), args.max, queries(args.queries), console))
    console.print(table)


if __name__ == "__main__":
    main()
