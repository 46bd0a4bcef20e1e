"""What importing the same export twice writes, on every engine.

    python bench/restore_writes.py [--records 1206] [--engines local,redis,...]

An export is a user's every record (what ``longterm export`` writes); each engine gets a new
store and imports it twice (``upsert_records``, what ``longterm import`` calls, 500 at a time).
Printed per engine and import: the writes the engine made and the seconds it took. Writes are
each engine's own count: Redis the server's change counter (``INFO persistence``:
``rdb_changes_since_last_save``, every field set or member added), OpenSearch the documents
sent in bulk requests to the data index, Qdrant the points built for an upsert, the local store
SQLite's ``total_changes``. The first import is what every import cost before a store compared
what it holds (the issue measured a second Redis import at 6,030 writes for 1,206 records);
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.services: the suite's engines
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import texts
from neighbours_session_size import servers
from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory
from longterm.records import MemoryRecord, record_id
from tests.backends.writes import write_counter

APP, USER = "bench", "restorer"
ENGINES = ("local", "qdrant-edge", "qdrant-local", "redis", "opensearch")


def export(n: int) -> list[MemoryRecord]:
    return [
        MemoryRecord(
            id=record_id(APP, USER, f"s{i // 40}", f"e{i}"),
            app_name=APP,
            user_id=USER,
            session_id=f"s{i // 40}",
            event_id=f"e{i}",
            author="user",
            role="user",
            text=text,
            timestamp=1_700_000_000.0 + i,
            metadata={"source": "import"},
        )
        for i, text in enumerate(texts(n, seed=7))
    ]


async def run(name: str, backend: str, config: dict[str, Any], records: list[MemoryRecord]) -> list[list[str]]:
    rows = []
    async with LongTermMemory(backend=backend, backend_config=config, app_name=APP) as memory:
        await memory.count(app_name=APP, user_id=USER)  # opened and prepared
        writes = write_counter(memory.backend_instance, name)
        for attempt in ("first", "second"):
            before, t = writes(), time.perf_counter()
            for i in range(0, len(records), 500):
                await memory.upsert_records(records[i : i + 500])
            took, made = time.perf_counter() - t, writes() - before
            rows.append([name, attempt, f"{len(records):,}", f"{made:,}", f"{made / len(records):.2f}", f"{took:.2f}"])
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1206)
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args()
    names = [e for e in args.engines.split(",") if e]
    records = export(args.records)
    table = Table(title="importing one export twice: the engine's writes")
    for col in ("engine", "import", "records", "writes", "writes a record", "seconds"):
        table.add_column(col)
    with tempfile.TemporaryDirectory(prefix="longterm-bench-") as tmp, servers(names, Path(tmp)) as configs:
        for name in names:
            backend, config = configs[name]
            for row in await run(name, backend, config, records):
                table.add_row(*row)
    Console(width=120).print(table)


if __name__ == "__main__":
    asyncio.run(main())
