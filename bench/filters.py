"""Filtered reads on the local backend at 100k records in one user's scope, beside unfiltered ones.

    python bench/filters.py [--records 100000] [--queries 200] [--dim 384]

One store is built through the engine's own write primitive (``upsert``, batches of 5,000), with
the stand-in embedder of ``vector_latency.py`` (fixed random unit vectors: the table is about our
search path, not a model's) and metadata ``{"project": "p<i % 100>", "kind": "note"|"chat", "n":
i % 10}``, so ``{"project": "p7"}`` keeps 1% of the user's memories and ``{"kind": "note"}`` 50%
(and ``{"n": {"$gte": 5}}``, a range, 50%). Then, for each query (``_data.queries``: three
mid-frequency words), the hybrid search (top 5) without a filter and with each filter, one after
the other, so that all see the same machine; then counts and the first page of a listing (100,
newest first), with and without each filter. It prints p50 and p95 in ms and each one's ratio to
the unfiltered one of the same run (the goal for a filtered search: at most 1.5x), and what the
filter index costs a write: the write rate of the build against that of a store made without it
(``filtering.values_of`` answering nothing; 1,000 records to each in turn), and its bytes per
record. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import pct
from _data import queries, texts
from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory
from longterm.backends.local import rows as local_rows
from longterm.core.where import where_of
from longterm.records import MemoryRecord, record_id
from longterm.retrieval.embedders import normalize

APP, USER = "bench", "one-user"
FILTERS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "1%: project = p7": {"project": "p7"},
    "50%: kind = note": {"kind": "note"},
    "50%: n >= 5 (range)": {"n": {"$gte": 5}},
}


class RandomEmbedder:
    def __init__(self, dim: int) -> None:
        self.dim, self.id = dim, f"random-{dim}"
        self.rng = np.random.default_rng(3)

    def embed(self, batch: list[str], *, kind: str = "passage") -> np.ndarray:
        return normalize(self.rng.standard_normal((len(batch), self.dim)).astype(np.float32))


def records(n: int, start: int = 0) -> list[MemoryRecord]:
    out = []
    for i, text in enumerate(texts(n), start=start):
        meta = {"project": f"p{i % 100}", "kind": "note" if i % 2 else "chat", "n": i % 10}
        session, event = f"s{i // 1000}", f"e{i}"
        out.append(
            MemoryRecord(id=record_id(APP, USER, session, event), app_name=APP, user_id=USER, session_id=session,
                         event_id=event, author="user", role="user", text=text, timestamp=1.7e9 + i, metadata=meta)
        )  # fmt: skip
    return out


async def build(path: Path, data: list[MemoryRecord], dim: int) -> tuple[LongTermMemory, Any, float]:
    """A store of ``data``; its write rate (records per second; none written: 0)."""
    memory = LongTermMemory(backend_config={"path": str(path)}, embedder=RandomEmbedder(dim), app_name=APP)
    backend = (await memory.located(APP, USER)).backend
    start = time.perf_counter()
    for i in range(0, len(data), 5_000):
        await backend.upsert(data[i : i + 5_000])
    return memory, backend, len(data) / (time.perf_counter() - start) if data else 0.0


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def run(n: int, nq: int, dim: int, tmp: Path) -> dict[str, Any]:
    data = records(n)
    memory, backend, rate = await build(tmp / "filters.db", data, dim)
    scope = memory.scope(APP, USER)
    wheres = {label: where_of(spec) for label, spec in FILTERS.items()}
    kept = {label: await backend.count(scope, where=w) / n for label, w in wheres.items()}
    lat: dict[tuple[str, str], list[float]] = {}
    for w in wheres.values():  # the scope's matrix loaded, each statement prepared once
        await backend.search(scope, "warm up", 5, where=w)
    for q in queries(nq):
        for label, w in wheres.items():
            lat.setdefault(("search (hybrid, top 5)", label), []).append(
                await timed(lambda w=w, q=q: backend.search(scope, q, 5, where=w))
            )
    for _ in range(20):
        for label, w in wheres.items():
            lat.setdefault(("count", label), []).append(await timed(lambda w=w: backend.count(scope, where=w)))
            lat.setdefault(("listing (100, newest first)", label), []).append(
                await timed(lambda w=w: backend.page_by_time(scope, None, 100, where=w))
            )
    with sqlite3.connect(tmp / "filters.db") as conn:
        index = conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name IN ('record_values', 'record_values_by_record')"
        ).fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM record_values").fetchone()[0]
    await memory.close()
    # What the index costs a write: the same records (a fifth) into two stores, one keeping no
    # values (``values_of`` answering nothing), a batch to each in turn, so both see the same machine.
    spent = {True: 0.0, False: 0.0}
    stores = {keeps: await build(tmp / f"write-{keeps}.db", [], dim) for keeps in spent}
    real = local_rows.values_of
    part = data[: n // 5]
    for i in range(0, len(part), 1_000):
        for keeps, (_, backend, _) in stores.items():
            local_rows.values_of = real if keeps else (lambda metadata: [])  # type: ignore[assignment]
            try:
                spent[keeps] += await timed(lambda b=backend, batch=part[i : i + 1_000]: b.upsert(batch))
            finally:
                local_rows.values_of = real  # type: ignore[assignment]
    for memory, _, _ in stores.values():
        await memory.close()
    with_values, without = len(part) / spent[True], len(part) / spent[False]
    return {
        "lat": lat,
        "kept": kept,
        "rate": rate,
        "with": with_values,
        "without": without,
        "bytes": index / n,
        "rows": rows / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dim", type=int, default=384)
    args = ap.parse_args()
    console = Console(width=140)
    console.print(f"{args.records:,} records in one scope ...")
    with tempfile.TemporaryDirectory() as tmp:
        r = asyncio.run(run(args.records, args.queries, args.dim, Path(tmp)))
    table = Table(title=f"local, {args.records:,} records in one scope (dim {args.dim}, {args.queries} queries)")
    for col in ("read", "filter", "kept", "p50 ms", "p95 ms", "p50 x none", "p95 x none"):
        table.add_column(col, justify="right" if col not in ("read", "filter") else "left")
    for op in ("search (hybrid, top 5)", "count", "listing (100, newest first)"):
        base = r["lat"][(op, "none")]
        for label in FILTERS:
            got = r["lat"][(op, label)]
            table.add_row(
                op if label == "none" else "",
                label,
                f"{r['kept'][label]:.0%}",
                f"{pct(got, 0.5):.2f}",
                f"{pct(got, 0.95):.2f}",
                "" if label == "none" else f"{pct(got, 0.5) / pct(base, 0.5):.2f}",
                "" if label == "none" else f"{pct(got, 0.95) / pct(base, 0.95):.2f}",
            )
    console.print(table)
    cost = 1e6 / r["with"] - 1e6 / r["without"]
    console.print(
        f"build: {r['rate']:,.0f} records/s; the filter index: {r['rows']:.1f} rows and {r['bytes']:.0f} bytes a "
        f"record (3 metadata keys), {cost:+.1f} us a record written ({r['with']:,.0f} records/s with it, "
        f"{r['without']:,.0f} without)"
    )


if __name__ == "__main__":
    main()
