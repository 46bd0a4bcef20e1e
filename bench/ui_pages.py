"""``longterm ui`` at 100,000 memories of one user, on the local backend.

Times, p50 over runs, each through the HTTP app (uvicorn on 127.0.0.1, httpx) next to the
bare facade call that does the same work, in the same run:

- the memories page (newest 50)        vs ``memory.get_all(limit=50)`` (oldest 50)
- the next page by cursor              vs ``get_all(cursor=...)``
- a search (``?q=``)                   vs ``memory.search(...)``

Usage: ``.venv/bin/python bench/ui_pages.py [--memories 100000] [--runs 20] [--page-runs 5]``
(page runs are fewer: each reads the whole scope today; see docs/ui.md).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from longterm import LongTermMemory
from longterm.testing import make_record
from longterm.ui.app import ui_app
from longterm.ui.data import Inspector
from longterm.ui.security import Access

APP, USER = "bench", "u"
WORDS = ["passport", "lisbon", "flight", "hotel", "dinner", "museum", "train", "visa", "beach", "meeting"]


def fill(path: str, n: int) -> None:
    async def go() -> None:
        memory = LongTermMemory(backend="local", backend_config={"path": path}, app_name=APP)
        try:
            for i in range(0, n, 5000):
                batch = [
                    make_record(
                        f"memory {j}: the {WORDS[j % 10]} and the {WORDS[(j * 7) % 10]} on day {j % 365}",
                        app=APP,
                        user=USER,
                        session=f"s{j // 40}",
                        event=f"e{j}",
                        timestamp=1_700_000_000.0 + j,
                    )
                    for j in range(i, min(n, i + 5000))
                ]
                await memory.upsert_records(batch)
        finally:
            await memory.close()

    asyncio.run(go())


def serve(path: str) -> tuple[str, uvicorn.Server, threading.Thread]:
    def factory(index: str) -> LongTermMemory:
        return LongTermMemory(backend="local", backend_config={"path": path, "index": index}, index=index)

    app = ui_app(Inspector(factory), Access.open_local())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread


def p50(fn, runs: int) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--page-runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ui-bench-") as tmp:
        path = str(Path(tmp) / "memory.db")
        t = time.perf_counter()
        fill(path, args.memories)
        print(f"wrote {args.memories:,} memories in {time.perf_counter() - t:.1f} s")
        base, server, thread = serve(path)
        user = f"{base}/api/apps/{APP}/users/{USER}"
        client = httpx.Client(timeout=120)
        cursor = client.get(user).json()["next_cursor"]
        facade = LongTermMemory(backend="local", backend_config={"path": path}, app_name=APP)
        fcursor = facade.get_all_sync(user_id=USER, limit=50).next_cursor
        rows = [
            (
                "memories page",
                p50(lambda: client.get(user).raise_for_status(), args.page_runs),
                p50(lambda: facade.get_all_sync(user_id=USER, limit=50), args.page_runs),
            ),
            (
                "next page (cursor)",
                p50(lambda: client.get(user, params={"cursor": cursor}).raise_for_status(), args.page_runs),
                p50(lambda: facade.get_all_sync(user_id=USER, limit=50, cursor=fcursor), args.page_runs),
            ),
            (
                "search ?q=",
                p50(lambda: client.get(user, params={"q": "passport lisbon day 42"}).raise_for_status(), args.runs),
                p50(lambda: facade.search_sync("passport lisbon day 42", user_id=USER, top_k=20), args.runs),
            ),
        ]
        facade.close_sync()
        client.close()
        server.should_exit = True
        thread.join(timeout=30)
    print(f"\n{args.memories:,} memories of one user, local backend, p50 ms")
    print(f"{'':22} {'ui (HTTP)':>12} {'facade':>12} {'ratio':>7}")
    for name, ui_ms, bare_ms in rows:
        print(f"{name:22} {ui_ms:12.1f} {bare_ms:12.1f} {ui_ms / bare_ms:7.2f}x")


if __name__ == "__main__":
    main()
