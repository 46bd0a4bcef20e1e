"""What an erase of many ids under way costs a Redis search: no mark against marks of n ids.

    python bench/redis_erase_marks.py [--records 10000] [--queries 200] [--url redis://...]

One user's ``--records`` memories; an erase of n of them marked and not yet done (its marks
written, as an erase by date of n memories writes them before its first delete, or left by a
kill -9) hides them from every read by their ``rid`` tags. Each row asks the same questions
(``search``, top 5, through the public API) with marks of n ids pending, interleaved with the
row without marks, so a noisy machine slows both alike. Without --url (or LONGTERM_REDIS_URL)
it starts a throw-away Redis Stack on 127.0.0.1 the way the tests do. Prints a table; asserts
nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory
from longterm.core.erasures import Erasure
from longterm.testing import make_record

WORDS = ["tulip", "garden", "river", "piano", "coffee", "bicycle", "mountain", "lantern", "violin", "harbor"]


def _records(n: int, app: str, user: str) -> list[Any]:
    return [
        make_record(
            f"note {i} about the {WORDS[i % 10]} and the {WORDS[(i * 7) % 10]}",
            app=app,
            user=user,
            event=f"e{i}",
            timestamp=1_700_000_000.0 + i,  # a second apart: turns of one time would read their session whole
        )
        for i in range(n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--marked", type=int, nargs="+", default=[500, 1_000, 5_000, 10_000])
    ap.add_argument("--url", default=os.environ.get("LONGTERM_REDIS_URL"))
    args = ap.parse_args()
    server = None
    url = args.url
    if url is None:
        from tests.services.redis_server import RedisServer

        server = RedisServer()
        server.start(Path(tempfile.mkdtemp()))
        url = f"redis://127.0.0.1:{server.port}"
    user, app = "u", f"bench-{uuid.uuid4().hex[:8]}"
    cfg = {"url": url}
    memory = LongTermMemory(backend="redis", backend_config=cfg, app_name=app)
    try:
        engine: Any = memory.backend_instance
        records = _records(args.records, app, user)
        for i in range(0, len(records), 1000):
            memory.portal.call(engine.upsert(records[i : i + 1000]))
        ids = [r.id for r in records]
        questions = [f"{WORDS[i % 10]} {WORDS[(i * 3) % 10]}" for i in range(args.queries)]
        table = Table("ids marked", "search p50 ms (marked)", "p50 ms (no mark, same run)", "ratio")
        for n in args.marked:
            marks = [Erasure(app, user, None, {"id": {"$in": ids[j : min(j + 5_000, n)]}}) for j in range(0, n, 5_000)]
            stamped = engine._marked(marks)
            marked, plain = [], []
            for q in questions:
                t = time.perf_counter()
                memory.search_sync(q, user_id=user)
                marked.append(time.perf_counter() - t)
                for m in stamped:
                    engine._erasure_end(m)
                t = time.perf_counter()
                memory.search_sync(q, user_id=user)
                plain.append(time.perf_counter() - t)
                stamped = engine._marked(marks)
            for m in stamped:
                engine._erasure_end(m)
            a, b = statistics.median(marked) * 1000, statistics.median(plain) * 1000
            table.add_row(f"{n:,}", f"{a:.2f}", f"{b:.2f}", f"{a / b:.2f}x")
        Console().print(table)
        memory.portal.call(memory.delete_memories(app_name=app, user_id=user))
    finally:
        memory.close_sync(flush=False)
        if server is not None and server.proc is not None:
            server.proc.kill()


if __name__ == "__main__":
    main()
