"""Cost of the opensearch backend next to the raw opensearch-py client doing the same work.

    python bench/opensearch_ingest_search.py [--sizes 10000] [--queries 200] [--url http://...]

Without --url (or LONGTERM_OPENSEARCH_URL) it starts the test node (bash scripts/test
builds it once). "ours" = LongTermMemory(backend="opensearch") through the public API (which
also keeps its ledger in the cluster: one more bulk request per save); "raw" = the sync
OpenSearch client: one bulk request per session (refresh=wait_for) into an index with the
same analyzer, and the same filtered match query per search. Prints a table.
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
from longterm.backends.opensearch import ANALYSIS  # noqa: E402

MAPPING = {
    "properties": {
        "user_id": {"type": "keyword"},
        "terms": {"type": "text", "analyzer": "lt_text"},
        "text": {"type": "keyword", "index": False},
    }
}


def raw(url: str, data: list[dict], qs: list[str]) -> dict:
    from opensearchpy import OpenSearch

    c = OpenSearch(hosts=[url])
    idx = f"raw-{uuid.uuid4().hex[:6]}"
    settings = {"index": {"number_of_replicas": 0, "analysis": ANALYSIS}}
    c.indices.create(index=idx, body={"settings": settings, "mappings": MAPPING})
    n = sum(len(s["events"]) for s in data)
    t = time.perf_counter()
    for s in data:
        body: list[dict] = []
        for e in s["events"]:
            text = e["content"]["parts"][0]["text"]
            body += [{"index": {"_index": idx, "_id": e["id"]}}, {"user_id": s["user_id"], "terms": text, "text": text}]
        c.bulk(body=body, refresh="wait_for")
    rate = n / (time.perf_counter() - t)
    lat = []
    for i, q in enumerate(qs):
        t = time.perf_counter()
        scope = [{"term": {"user_id": f"user-{i % USERS}"}}]
        c.search(index=idx, body={"size": 5, "query": {"bool": {"filter": scope, "must": [{"match": {"terms": q}}]}}})
        lat.append(time.perf_counter() - t)
    c.indices.delete(index=idx)
    c.close()
    return {"rate": rate, "lat": lat}


async def ours(url: str, data: list[dict], qs: list[str]) -> dict:
    cfg = {"url": url, "prefix": f"b{uuid.uuid4().hex[:6]}-", "replicas": 0}
    return await through_api(LongTermMemory(backend="opensearch", backend_config=cfg, index="bench"), data, qs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--url", default=os.environ.get("LONGTERM_OPENSEARCH_URL"))
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    node = None
    url = args.url
    if not url:
        from tests.services.opensearch_node import OpenSearchNode

        node = OpenSearchNode()
        node.start(Path(tmp.name))
        url = node.url
    console = Console(width=140)
    table = Table(title=f"opensearch backend vs raw opensearch-py ({USERS} users, {args.queries} queries, top 5)")
    for col in ("records", "system", "saves/s", "ratio", "search p50 ms", "p95 ms", "p50 ratio"):
        table.add_column(col, justify="right")
    try:
        qs = queries(args.queries)
        for n in args.sizes:
            data = list(sessions(n, USERS))
            console.print(f"{n:,} records ...")
            b = raw(url, data, qs)
            m = asyncio.run(ours(url, data, qs))
            b50, b95, m50, m95 = (pct(r["lat"], p) for r in (b, m) for p in (0.5, 0.95))
            table.add_row(
                f"{n:,}", "raw opensearch-py", f"{b['rate']:,.0f}", "1.00", f"{b50:.2f}", f"{b95:.2f}", "1.00"
            )
            saves = f"{m['rate']:,.0f}", f"{m['rate'] / b['rate']:.2f}"
            table.add_row("", "longterm opensearch", *saves, f"{m50:.2f}", f"{m95:.2f}", f"{m50 / b50:.2f}")
    finally:
        if node:
            node.stop()
        tmp.cleanup()
    console.print(table)


if __name__ == "__main__":
    main()
