"""Embedded Qdrant: our backend next to raw qdrant-edge and raw qdrant-client local mode.

    python bench/qdrant_embedded.py [--sizes 10000 100000] [--queries 50] [--local-max 10000]
                                    [--tree PATH] [--chunk 10]

Same synthetic data as the other cost benchmarks (100 users, sessions of 100 turns); full-text
only (sparse BM25 vectors), filtered on the user, top 5. "longterm qdrant" goes through the
public API (``search_memory``: the full-text query, then its hits' session neighbours, then
the facade's scoring) on each embedded engine; "raw edge" is qdrant-edge-py (Qdrant's engine
in-process) with the same points, a keyword index on user_id and the same filtered sparse
query; "raw client" is qdrant-client's local mode called the same way. ``--tree PATH`` also
runs the ``longterm`` of another checkout (e.g. ``git archive HEAD | tar -x -C PATH``) in a
process of its own, on its own store of the same data: the baseline of the same run.

The systems save the data in turns of ``--chunk`` sessions (1,000 turns; saves/s: the records
over each one's own time), then each query is asked of every system in turn, so all pay the
same gaps between calls. Raw qdrant-edge asked back to back (its threads never idle, as this
table was measured before) is the extra row "raw qdrant-edge, back to back", and raw asked for
``TOP_K * POOL`` points (the pool ours asks the engine for, to re-score) the row "what ours
asks", each query right after the others. Under ours, the
"of which" rows time the engine's parts on its thread: the full-text query (``_fulltext``) and
the neighbours' read (``_around``; only searches with hits read neighbours). The ratios are
against raw qdrant-edge in turn (saves: its saves/s). Prints a table and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
if not os.environ.get("QDRANT_BENCH_CHILD"):  # a --tree child takes longterm from its PYTHONPATH
    sys.path.insert(0, str(ROOT))

from _common import USERS, pct  # noqa: E402
from _data import queries, sessions  # noqa: E402

from longterm import LongTermMemory  # noqa: E402
from longterm.retrieval.rescoring import Rescoring  # noqa: E402
from longterm.retrieval.sparse import document_vector, query_vector  # noqa: E402

TOP_K = 5
#: Candidates a search asks the engine for per hit wanted (re-scoring's pool, by default).
POOL = Rescoring().candidates


def points(data):
    for s in data:
        for e in s["events"]:
            text = e["content"]["parts"][0]["text"]
            yield str(uuid.uuid5(uuid.NAMESPACE_URL, e["id"])), text, s["user_id"]


def user(i: int) -> str:
    return f"user-{i % USERS}"


class Ours:
    """Our backend through the public API, its engine's parts timed on its thread."""

    def __init__(self, where: Path, engine: str) -> None:
        config = {"path": str(where), "engine": engine}
        self.memory = LongTermMemory(backend="qdrant", backend_config=config, index="bench")
        self.parts: dict[str, list[float]] = {"fulltext": [], "around": []}
        backend = self.memory.backend_instance
        for name, attr in (("fulltext", "_fulltext"), ("around", "_around")):
            setattr(backend, attr, self._timed(getattr(backend, attr), self.parts[name]))

    @staticmethod
    def _timed(fn, into: list[float]):
        def timed(*args):
            t = time.perf_counter()
            try:
                return fn(*args)
            finally:
                into.append(time.perf_counter() - t)

        return timed

    async def save(self, i: int, session: dict) -> float:
        t = time.perf_counter()
        await self.memory.add_session_to_memory(session)
        return time.perf_counter() - t

    async def done(self) -> float:
        return 0.0

    async def ask(self, i: int, q: str) -> float:
        t = time.perf_counter()
        await self.memory.search_memory(app_name="bench", user_id=user(i), query=q, top_k=TOP_K)
        return time.perf_counter() - t


class RawEdge:
    def __init__(self, where: Path) -> None:
        import qdrant_edge as e

        self.e = e
        config = e.EdgeConfig(sparse_vectors={"text": e.EdgeSparseVectorParams(modifier=e.Modifier.Idf)})
        self.shard = e.EdgeShard.create(str(where), config)
        self.shard.update(e.UpdateOperation.create_field_index("user_id", e.PayloadSchemaType.Keyword))

    async def save(self, i: int, session: dict) -> float:
        e, t = self.e, time.perf_counter()
        batch = [
            e.Point(pid, {"text": e.SparseVector(*document_vector(text))}, {"user_id": u, "text": text})
            for pid, text, u in points([session])
        ]
        self.shard.update(e.UpdateOperation.upsert_points(batch))
        return time.perf_counter() - t

    async def done(self) -> float:
        t = time.perf_counter()
        self.shard.flush()
        return time.perf_counter() - t

    async def ask(self, i: int, q: str, limit: int = TOP_K) -> float:
        e = self.e
        flt = e.Filter(must=[e.FieldCondition(key="user_id", match=e.MatchValue(user(i)))])
        query = e.Query.Nearest(e.SparseVector(*query_vector(q)), using="text")
        t = time.perf_counter()
        self.shard.query(e.QueryRequest(limit=limit, query=query, filter=flt, with_payload=True))
        return time.perf_counter() - t


class RawClient:
    def __init__(self, where: Path) -> None:
        from qdrant_client import QdrantClient
        from qdrant_client import models as m

        self.m, self.c = m, QdrantClient(path=str(where))
        text = {"text": m.SparseVectorParams(modifier=m.Modifier.IDF)}
        self.c.create_collection("b", vectors_config={}, sparse_vectors_config=text)

    def sparse(self, vector: tuple[list[int], list[float]]) -> Any:
        return self.m.SparseVector(indices=vector[0], values=vector[1])

    async def save(self, i: int, session: dict) -> float:
        m, t = self.m, time.perf_counter()
        batch = [
            m.PointStruct(
                id=pid, vector={"text": self.sparse(document_vector(text))}, payload={"user_id": u, "text": text}
            )
            for pid, text, u in points([session])
        ]
        self.c.upsert("b", batch, wait=True)
        return time.perf_counter() - t

    async def done(self) -> float:
        return 0.0

    async def ask(self, i: int, q: str) -> float:
        m = self.m
        flt = m.Filter(must=[m.FieldCondition(key="user_id", match=m.MatchValue(value=user(i)))])
        t = time.perf_counter()
        self.c.query_points("b", query=self.sparse(query_vector(q)), using="text", query_filter=flt, limit=TOP_K)
        return time.perf_counter() - t


class Tree:
    """``Ours`` of another checkout, in a child process: this script, ``--child``, on its PYTHONPATH."""

    def __init__(self, tree: Path, where: Path, n: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(tree), QDRANT_BENCH_CHILD="1")
        cmd = [sys.executable, __file__, "--child", str(where), "--sizes", str(n)]
        self.proc = subprocess.Popen(cmd, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.parts: dict[str, list[float]] = {"fulltext": [], "around": []}

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the --tree child ended (exit {self.proc.wait()}); its error is above")
        return json.loads(line)

    def _call(self, *request: object) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._read()

    async def save(self, i: int, session: dict) -> float:
        return float(self._call("save", i)["s"])  # its own copy of session i (the same data)

    async def done(self) -> float:
        return 0.0

    async def ask(self, i: int, q: str) -> float:
        got = self._call("ask", i, q)
        for name, values in got["parts"].items():
            self.parts[name] += values
        return float(got["s"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=300)


async def child(where: Path, n: int) -> None:
    """The --tree side: each request line ("save", i) or ("ask", i, query) answered with its timings."""
    ours, data = Ours(where, "edge"), list(sessions(n, USERS))
    print(f"the --tree child runs {sys.modules['longterm'].__file__}", file=sys.stderr)
    for line in sys.stdin:
        what, i, *q = json.loads(line)
        if what == "save":
            print(json.dumps({"s": await ours.save(i, data[i])}), flush=True)
            continue
        s = await ours.ask(i, q[0])
        print(json.dumps({"s": s, "parts": ours.parts}), flush=True)
        for v in ours.parts.values():
            v.clear()
    await ours.memory.close()


async def run_size(n: int, args: argparse.Namespace, tmp: Path, console: Any) -> list[tuple[str, dict]]:
    data, qs, d = list(sessions(n, USERS)), queries(args.queries), tmp / str(n)
    d.mkdir()
    systems: list[tuple[str, Any]] = [
        ("raw qdrant-edge", RawEdge(d / "edge")),
        ("longterm qdrant, engine=edge (default)", Ours(d / "ours-edge", "edge")),
    ]
    if args.tree:
        systems.append(("  the same, --tree (before)", Tree(Path(args.tree).resolve(), d / "tree-edge", n)))
    if n <= args.local_max:  # the pure-Python local mode takes minutes beyond this
        systems += [
            ("raw qdrant-client local", RawClient(d / "raw")),
            ("longterm qdrant, engine=local", Ours(d / "ours-local", "local")),
        ]
    console.print(f"{n:,} records: saving, {args.chunk} sessions at a time by each of {len(systems)} systems ...")
    spent = {label: 0.0 for label, _ in systems}
    for start in range(0, len(data), args.chunk):
        for label, system in systems:
            for i in range(start, min(len(data), start + args.chunk)):
                spent[label] += await system.save(i, data[i])
    for label, system in systems:
        spent[label] += await system.done()
    records = sum(len(s["events"]) for s in data)
    results = {label: {"rate": records / spent[label], "lat": []} for label, _ in systems}
    console.print(f"{n:,} records: searching, each query in turn ...")
    raw = systems[0][1]
    tight = [await raw.ask(i, q) for i, q in enumerate(qs)]  # back to back, as measured before
    pool: list[float] = []  # raw asked for as many as ours asks the engine (re-scoring's pool)
    for i, q in enumerate(qs):
        for label, system in systems:
            results[label]["lat"].append(await system.ask(i, q))
        pool.append(await raw.ask(i, q, limit=TOP_K * POOL))
    out: list[tuple[str, dict]] = []
    for label, system in systems:
        out.append((label, results[label]))
        if label == "raw qdrant-edge":
            out.append(("raw qdrant-edge, back to back", {"lat": tight}))
            out.append((f"raw qdrant-edge, top {TOP_K * POOL} (what ours asks)", {"lat": pool}))
        for name, what in (("fulltext", "the full-text query"), ("around", "the neighbours' read")):
            if getattr(system, "parts", {}).get(name):
                out.append((f"    of which {what} alone", {"lat": system.parts[name]}))
        if isinstance(system, Ours):
            await system.memory.close()
        elif isinstance(system, Tree):
            system.close()
    return out


def table(rows: dict[int, list[tuple[str, dict]]], args: argparse.Namespace) -> Any:
    from rich.table import Table

    title = f"embedded Qdrant, filtered full-text search ({USERS} users, {args.queries} queries, top {TOP_K})"
    t = Table(title=title)
    for col in ("records", "system", "saves/s", "x raw", "search p50 ms", "x raw", "p95 ms"):
        t.add_column(col, justify="right")
    for n, results in rows.items():
        base = dict(results)["raw qdrant-edge"]
        base_rate, base_p50 = base["rate"], pct(base["lat"], 0.5)
        for label, r in results:
            p50 = pct(r["lat"], 0.5)
            rate = f"{r['rate']:,.0f}" if "rate" in r else ""
            rate_x = f"{r['rate'] / base_rate:.2f}" if "rate" in r else ""
            cells = (f"{n:,}", label, rate, rate_x, f"{p50:.2f}", f"{p50 / base_p50:.1f}", f"{pct(r['lat'], 0.95):.2f}")
            t.add_row(*cells)
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--local-max", type=int, default=10_000, help="largest size run on qdrant-client's local mode")
    ap.add_argument("--tree", help="another checkout whose longterm runs too (the baseline)")
    ap.add_argument("--chunk", type=int, default=10, help="sessions each system saves in its turn")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        asyncio.run(child(Path(args.child), args.sizes[0]))
        return
    from rich.console import Console

    console = Console(width=140)
    rows: dict[int, list[tuple[str, dict]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LONGTERM_HOME"] = tmp
        for n in args.sizes:
            rows[n] = asyncio.run(run_size(n, args, Path(tmp), console))
    console.print(table(rows, args))


if __name__ == "__main__":
    main()
