"""Cost of the redis backend next to the raw redis client doing the same work.

    python bench/redis_ingest_search.py [--sizes 10000 100000] [--queries 300] [--url redis://...]

Without --url (or LONGTERM_REDIS_URL) it starts a throw-away Redis Stack on 127.0.0.1
the way the tests do (needs `bash scripts/test` to have installed it once).
"ours" = LongTermMemory(backend="redis") through the public API; "raw" = redis.asyncio:
one MULTI pipeline of HSETs per session into an index of the same schema (what a user of
the client would write; the ratios are against it), and the same FT.SEARCH (scope TAG +
OR of the words, BM25) per query. "raw, one script" writes each session with one Lua
call, as our backend does: the fastest the raw client gets, shown for reference.
Prints a table; asserts nothing.
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




_LUA = """
local nf, pos = tonumber(ARGV[1]), 2
for i = 1, #KEYS do
  redis.call('HSET', KEYS[i], unpack(ARGV, pos, pos + 2 * nf - 1))
  pos = pos + 2 * nf
end
return #KEYS
"""


async def raw(url: str, data: list[dict], qs: list[str], script: bool = False) -> dict:
    import redis.asyncio as R

    r = R.Redis.from_url(url, protocol=2)
    ns = f"raw{uuid.uuid4().hex[:6]}:"
    await r.execute_command("FT.CREATE", ns + "idx", "ON", "HASH", "PREFIX", "1", ns, "STOPWORDS", "0",
                            "SCHEMA", "terms", "TEXT", "scope", "TAG", "timestamp", "NUMERIC", "SORTABLE")  # fmt: skip
    n = sum(len(s["events"]) for s in data)
    start = time.perf_counter()
    lua = r.register_script(_LUA)
    for s in data:
        if script:
            keys, args = [], [4]
            for e in s["events"]:
                t = e["content"]["parts"][0]["text"]
                keys.append(f"{ns}{e['id']}")
                args += ["terms", t, "scope", s["user_id"], "timestamp", e["timestamp"], "text", t]
            await lua(keys=keys, args=args)
            continue
        async with r.pipeline(transaction=True) as p:
            for e in s["events"]:
                p.hset(f"{ns}{e['id']}", mapping={"terms": e["content"]["parts"][0]["text"], "scope": s["user_id"], "timestamp": e["timestamp"], "text": e["content"]["parts"][0]["text"]})
            await p.execute()
    ingest = time.perf_counter() - start
    lat = []
    for i, q in enumerate(qs):
        t = time.perf_counter()
        await r.execute_command("FT.SEARCH", ns + "idx", f"@scope:{{user\\-{i % USERS}}} @terms:({'|'.join(q.split())})",
                                "WITHSCORES", "SCORER", "BM25", "LIMIT", "0", "5", "DIALECT", "2")  # fmt: skip
        lat.append(time.perf_counter() - t)
    await r.execute_command("FT.DROPINDEX", ns + "idx", "DD")
    await r.aclose()
    return {"events/s": n / ingest, "p50": pct(lat, 0.5), "p95": pct(lat, 0.95)}


async def ours(url: str, data: list[dict], qs: list[str]) -> dict:
    memory = LongTermMemory(backend="redis", backend_config={"url": url, "prefix": f"b{uuid.uuid4().hex[:6]}:"}, index="bench")
    r = await through_api(memory, data, qs)
    return {"events/s": r["rate"], "p50": pct(r["lat"], 0.5), "p95": pct(r["lat"], 0.95)}


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
    table = Table(title=f"redis backend vs raw redis client ({USERS} users, {args.queries} queries)")
    for col in ("records", "system", "saves/s", "ratio", "search p50 ms", "p95 ms", "p50 ratio"):
        table.add_column(col, justify="right")
    try:
        qs = queries(args.queries)
        for n in args.sizes:
            console.print(f"{n:,} records ...")
            data = list(sessions(n, USERS))
            b = asyncio.run(raw(url, data, qs))
            lua = asyncio.run(raw(url, data, qs, script=True))
            m = asyncio.run(ours(url, data, qs))
            table.add_row(f"{n:,}", "raw redis-py (baseline)", f"{b['events/s']:,.0f}", "1.00", f"{b['p50']:.2f}", f"{b['p95']:.2f}", "1.00")
            table.add_row("", "raw redis-py, one script", f"{lua['events/s']:,.0f}", f"{lua['events/s'] / b['events/s']:.2f}",
                          f"{lua['p50']:.2f}", f"{lua['p95']:.2f}", f"{lua['p50'] / b['p50']:.2f}")  # fmt: skip
            table.add_row("", "longterm redis", f"{m['events/s']:,.0f}", f"{m['events/s'] / b['events/s']:.2f}",
                          f"{m['p50']:.2f}", f"{m['p95']:.2f}", f"{m['p50'] / b['p50']:.2f}")  # fmt: skip
    finally:
        if server:
            server.stop()
        tmp.cleanup()
    console.print(table)


if __name__ == "__main__":
    main()
