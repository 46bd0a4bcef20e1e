"""Cost of the redis backend next to the raw redis client doing the same work.

    python bench/redis_ingest_search.py [--sizes 10000 100000] [--queries 300] [--url redis://...]

Without --url (or LONGTERM_REDIS_URL) it starts a throw-away Redis Stack on 127.0.0.1
the way the tests do (needs `bash scripts/test` to have installed it once).

Systems, each in its own keyspace and index of the same schema on the same server:
- "raw redis-py" (the baseline; ratios are against it): redis.asyncio, one MULTI pipeline
  of HSETs per session, what a user of the client would write; per query the FT.SEARCH
  our backend sends (scope TAG + OR of the words, BM25, top 5, returning the stored text).
- "raw redis-py, one script": each session written by one Lua call, as our backend does:
  the fastest the raw client gets, shown for reference.
- "longterm redis": LongTermMemory(backend="redis") through the public API (ledger,
  policy, records, ADK MemoryEntry results included).

The three are interleaved step by step (session i by each, then query j by each), so a
noisy machine slows them alike; times are summed per system. Prints a table; asserts nothing.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _common import USERS, pct  # noqa: E402
from _data import queries, sessions  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from longterm import LongTermMemory  # noqa: E402

_LUA = """
local nf, pos = tonumber(ARGV[1]), 2
for i = 1, #KEYS do
  redis.call('HSET', KEYS[i], unpack(ARGV, pos, pos + 2 * nf - 1))
  pos = pos + 2 * nf
end
return #KEYS
"""


class Raw:
    """The raw client: HSETs into an index of our schema, FT.SEARCH like ours."""

    def __init__(self, url: str, script: bool) -> None:
        import redis.asyncio as R

        self.r = R.Redis.from_url(url, protocol=2)
        self.ns = f"raw{uuid.uuid4().hex[:6]}:"
        self.script = script
        self.lua = self.r.register_script(_LUA)

    async def create(self) -> None:
        await self.r.execute_command(
            "FT.CREATE",
            self.ns + "idx",
            "ON",
            "HASH",
            "PREFIX",
            "1",
            self.ns,
            "STOPWORDS",
            "0",
            "SCHEMA",
            "terms",
            "TEXT",
            "scope",
            "TAG",
            "timestamp",
            "NUMERIC",
            "SORTABLE",
        )

    async def save(self, s: dict) -> None:
        if self.script:
            keys: list[str] = []
            args: list[Any] = [4]
            for e in s["events"]:
                t = e["content"]["parts"][0]["text"]
                keys.append(f"{self.ns}{e['id']}")
                args += ["terms", t, "scope", s["user_id"], "timestamp", e["timestamp"], "text", t]
            await self.lua(keys=keys, args=args)
            return
        async with self.r.pipeline(transaction=True) as p:
            for e in s["events"]:
                t = e["content"]["parts"][0]["text"]
                p.hset(
                    f"{self.ns}{e['id']}",
                    mapping={"terms": t, "scope": s["user_id"], "timestamp": e["timestamp"], "text": t},
                )
            await p.execute()

    async def search(self, user: str, q: str) -> None:
        tag = user.replace("-", "\\-")
        await self.r.execute_command(
            "FT.SEARCH",
            self.ns + "idx",
            f"@scope:{{{tag}}} @terms:({'|'.join(q.split())})",
            "WITHSCORES",
            "SCORER",
            "BM25",
            "RETURN",
            "1",
            "text",
            "LIMIT",
            "0",
            "5",
            "DIALECT",
            "2",
        )

    async def close(self) -> None:
        await self.r.execute_command("FT.DROPINDEX", self.ns + "idx", "DD")
        await self.r.aclose()


class Ours:
    def __init__(self, url: str) -> None:
        self.m = LongTermMemory(
            backend="redis", backend_config={"url": url, "prefix": f"b{uuid.uuid4().hex[:6]}:"}, index="bench"
        )

    async def create(self) -> None:
        await self.m.count(app_name="bench", user_id="user-0")  # connects and makes the index

    async def save(self, s: dict) -> None:
        await self.m.add_session_to_memory(s)

    async def search(self, user: str, q: str) -> None:
        await self.m.search_memory(app_name="bench", user_id=user, query=q)

    async def close(self) -> None:
        await self.m.close()


async def run(url: str, data: list[dict], qs: list[str]) -> dict[str, dict]:
    systems = {
        "raw redis-py (baseline)": Raw(url, False),
        "raw redis-py, one script": Raw(url, True),
        "longterm redis": Ours(url),
    }
    for system in systems.values():
        await system.create()
    spent = dict.fromkeys(systems, 0.0)
    lat: dict[str, list[float]] = {name: [] for name in systems}
    for s in data:
        for name, system in systems.items():
            t = time.perf_counter()
            await system.save(s)
            spent[name] += time.perf_counter() - t
    for i, q in enumerate(qs):
        for name, system in systems.items():
            t = time.perf_counter()
            await system.search(f"user-{i % USERS}", q)
            lat[name].append(time.perf_counter() - t)
    for system in systems.values():
        await system.close()
    n = sum(len(s["events"]) for s in data)
    return {
        name: {"events/s": n / spent[name], "p50": pct(lat[name], 0.5), "p95": pct(lat[name], 0.95)} for name in systems
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--url", default=os.environ.get("LONGTERM_REDIS_URL"))
    args = ap.parse_args()
    server = None
    url = args.url
    tmp = tempfile.TemporaryDirectory()
    os.environ["LONGTERM_HOME"] = tmp.name
    if not url:
        from tests.services.redis_server import RedisServer

        server = RedisServer()
        server.start(Path(tmp.name))
        url = server.url
    console = Console(width=150)
    table = Table(title=f"redis backend vs raw redis client ({USERS} users, {args.queries} queries, interleaved)")
    for col in ("records", "system", "saves/s", "ratio", "search p50 ms", "p95 ms", "p50 ratio"):
        table.add_column(col, justify="right")
    try:
        qs = queries(args.queries)
        for n in args.sizes:
            console.print(f"{n:,} records ...")
            res = asyncio.run(run(url, list(sessions(n, USERS)), qs))
            base = res["raw redis-py (baseline)"]
            for i, (name, r) in enumerate(res.items()):
                table.add_row(
                    f"{n:,}" if i == 0 else "",
                    name,
                    f"{r['events/s']:,.0f}",
                    f"{r['events/s'] / base['events/s']:.2f}",
                    f"{r['p50']:.2f}",
                    f"{r['p95']:.2f}",
                    f"{r['p50'] / base['p50']:.2f}",
                )
    finally:
        if server:
            server.stop()
        tmp.cleanup()
    console.print(table)


if __name__ == "__main__":
    main()
