"""Embedded Qdrant: our backend next to raw qdrant-client local mode and raw qdrant-edge.

    python bench/qdrant_embedded.py [--sizes 10000 100000] [--queries 50]

Same synthetic data as the other cost benchmarks (100 users); full-text only (sparse BM25
vectors), filtered on the user. "longterm qdrant" goes through the public API on each
embedded engine; "raw client" is qdrant-client's local mode called directly with the
same points; "raw edge" is qdrant-edge-py (Qdrant's engine in-process) with the same
points, a keyword index on user_id, and the same filtered sparse query. Prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _common import USERS, pct, through_api  # noqa: E402
from _data import queries, sessions  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from longterm import LongTermMemory  # noqa: E402
from longterm.retrieval.sparse import document_vector, query_vector  # noqa: E402


def points(data):
    for s in data:
        for e in s["events"]:
            text = e["content"]["parts"][0]["text"]
            yield str(uuid.uuid5(uuid.NAMESPACE_URL, e["id"])), text, s["user_id"]


async def ours(tmp: Path, data, qs, engine: str) -> dict:
    config = {"path": str(tmp / f"ours-{engine}"), "engine": engine}
    memory = LongTermMemory(backend="qdrant", backend_config=config, index="bench")
    alone: list[float] = []
    backend = memory.backend_instance
    search = backend._fulltext

    def timed(*args):  # the engine's part of each search, on its own thread
        t = time.perf_counter()
        try:
            return search(*args)
        finally:
            alone.append(time.perf_counter() - t)

    backend._fulltext = timed
    return {**await through_api(memory, data, qs), "alone": alone}


def raw_client(tmp: Path, data, qs) -> dict:
    from qdrant_client import QdrantClient
    from qdrant_client import models as m

    def sparse(vector: tuple[list[int], list[float]]) -> m.SparseVector:
        return m.SparseVector(indices=vector[0], values=vector[1])

    c = QdrantClient(path=str(tmp / "raw"))
    c.create_collection(
        "b", vectors_config={}, sparse_vectors_config={"text": m.SparseVectorParams(modifier=m.Modifier.IDF)}
    )
    pts = list(points(data))
    t = time.perf_counter()
    for i in range(0, len(pts), 100):
        batch = [
            m.PointStruct(id=pid, vector={"text": sparse(document_vector(text))}, payload={"user_id": u, "text": text})
            for pid, text, u in pts[i : i + 100]
        ]
        c.upsert("b", batch, wait=True)
    rate = len(pts) / (time.perf_counter() - t)
    lat = []
    for i, q in enumerate(qs):
        flt = m.Filter(must=[m.FieldCondition(key="user_id", match=m.MatchValue(value=f"user-{i % USERS}"))])
        t = time.perf_counter()
        c.query_points("b", query=sparse(query_vector(q)), using="text", query_filter=flt, limit=5, with_payload=True)
        lat.append(time.perf_counter() - t)
    c.close()
    return {"rate": rate, "lat": lat}


def raw_edge(tmp: Path, data, qs) -> dict:
    import qdrant_edge as e

    config = e.EdgeConfig(sparse_vectors={"text": e.EdgeSparseVectorParams(modifier=e.Modifier.Idf)})
    shard = e.EdgeShard.create(str(tmp / "edge"), config)
    shard.update(e.UpdateOperation.create_field_index("user_id", e.PayloadSchemaType.Keyword))
    pts = list(points(data))
    t = time.perf_counter()
    for i in range(0, len(pts), 100):
        batch = [
            e.Point(pid, {"text": e.SparseVector(*document_vector(text))}, {"user_id": u, "text": text})
            for pid, text, u in pts[i : i + 100]
        ]
        shard.update(e.UpdateOperation.upsert_points(batch))
    shard.flush()
    rate = len(pts) / (time.perf_counter() - t)
    lat = []
    for i, q in enumerate(qs):
        flt = e.Filter(must=[e.FieldCondition(key="user_id", match=e.MatchValue(f"user-{i % USERS}"))])
        query = e.Query.Nearest(e.SparseVector(*query_vector(q)), using="text")
        t = time.perf_counter()
        shard.query(e.QueryRequest(limit=5, query=query, filter=flt, with_payload=True))
        lat.append(time.perf_counter() - t)
    shard.close()
    return {"rate": rate, "lat": lat}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--local-max", type=int, default=10_000, help="largest size run on qdrant-client's local mode")
    args = ap.parse_args()
    console = Console(width=140)
    table = Table(title=f"embedded Qdrant, filtered full-text search ({USERS} users, {args.queries} queries, top 5)")
    for col in ("records", "system", "saves/s", "search p50 ms", "p95 ms", "qps"):
        table.add_column(col, justify="right")
    qs = queries(args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LONGTERM_HOME"] = tmp
        for n in args.sizes:
            data = list(sessions(n, USERS))
            d = Path(tmp) / str(n)
            d.mkdir()
            runs = [("raw qdrant-edge", "raw", "edge"), ("longterm qdrant, engine=edge (default)", "ours", "edge")]
            if n <= args.local_max:  # the pure-Python local mode takes minutes beyond this
                runs += [
                    ("raw qdrant-client local", "raw", "local"),
                    ("longterm qdrant, engine=local", "ours", "local"),
                ]
            for label, who, engine in runs:
                console.print(f"{n:,} records: {label} ...")
                if who == "ours":
                    r = asyncio.run(ours(d, data, qs, engine))
                else:
                    r = (raw_edge if engine == "edge" else raw_client)(d, data, qs)
                p50, p95, qps = pct(r["lat"], 0.5), pct(r["lat"], 0.95), len(r["lat"]) / max(1e-9, sum(r["lat"]))
                console.print(f"   saves/s {r['rate']:,.0f}, search p50 {p50:.2f} ms, p95 {p95:.2f} ms")
                table.add_row(f"{n:,}", label, f"{r['rate']:,.0f}", f"{p50:.2f}", f"{p95:.2f}", f"{qps:,.0f}")
                if "alone" in r:  # what the facade and the hand-off to the engine's thread add
                    p50, p95 = pct(r["alone"], 0.5), pct(r["alone"], 0.95)
                    table.add_row("", "  of which the engine's search alone", "", f"{p50:.2f}", f"{p95:.2f}", "")
    console.print(table)


if __name__ == "__main__":
    main()
