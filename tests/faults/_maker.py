"""Run as a process by test_crash_create: open a store that does not exist yet, killing this
process with SIGKILL at one step of its making; or (STEP ``none``) open it, save and search.

Usage: python -m tests.faults._maker BACKEND CONFIG_JSON STEP
STEP names where the kill comes:
- an embedded Qdrant store's making (``core.making.step``): ``created``, ``indexed <field>``,
  ``flushed``, ``built``, ``moved``; ``edge-half`` and ``edge-wal``: the states an earlier release left when killed
  inside ``EdgeShard.create`` (the write-ahead log, no config), made by hand, then killed;
- a local store's: ``file`` (the file made, empty), ``wal`` (switched to WAL, no schema),
  ``schema`` (inside the schema's transaction, before its COMMIT).
``purge:<step>``: a memory saved, then purged (embedded Qdrant rebuilds its shard), killed at
that step of the replacement (``replacement built``, ``replaced moved aside``, ``replacement moved``).
Prints ``ok <count> <hits>`` after a save of one session and a search, with STEP ``none``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

from longterm import LongTermMemory
from longterm.core import making
from longterm.core import sqlite as lsqlite


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm(backend: str, config: dict[str, Any], at: str) -> None:
    """Make this process die at step ``at``."""
    if at in ("edge-half", "edge-wal"):
        import qdrant_edge as e

        shard = Path(config["path"]) / "default_app" / "shard"
        text = {"text": e.EdgeSparseVectorParams(modifier=e.Modifier.Idf)}
        e.EdgeShard.create(str(shard), e.EdgeConfig(vectors={}, sparse_vectors=text)).close()
        (shard / "edge_config.json").unlink()  # what a kill inside ``create`` leaves: no config
        if at == "edge-wal":
            shutil.rmtree(shard / "segments")  # ... nor a segment: the write-ahead log alone
        die()
    if at in ("file", "wal", "schema"):
        original_file, original_missing, original_connect = (
            lsqlite.private_file,
            lsqlite.schema_missing,
            lsqlite._connect,
        )

        def private_file(path: Path) -> None:
            original_file(path)
            if at == "file":
                die()

        def schema_missing(conn: sqlite3.Connection, schema: str) -> list[str]:
            if at == "wal":
                die()
            return original_missing(conn, schema)

        class Dying(sqlite3.Connection):
            def executescript(self, script: str) -> sqlite3.Cursor:  # type: ignore[override]
                if at == "schema" and script.startswith("BEGIN IMMEDIATE"):
                    super().executescript(script.replace("COMMIT;", ""))
                    die()
                return super().executescript(script)

        def connect(path: Path) -> sqlite3.Connection:
            return sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False, factory=Dying)

        lsqlite.private_file, lsqlite.schema_missing, lsqlite._connect = private_file, schema_missing, connect
        del original_connect
        return

    def step(name: str) -> None:
        if name == at:
            die()

    making.step = step


async def purge_killed(backend: str, config: dict[str, Any], at: str) -> None:
    """Save, then purge, dying at step ``at`` of the shard's replacement (``core.making``)."""
    async with LongTermMemory(backend=backend, backend_config=config) as memory:
        await memory.add("I keep my kayak at the marina in Portsmouth", user_id="maker", session_id="s1")
        arm(backend, config, at)
        await memory.backend_instance.purge()


async def main() -> None:
    backend, config, at = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    if at.startswith("purge:"):
        await purge_killed(backend, config, at.removeprefix("purge:"))
        return
    if at != "none":
        arm(backend, config, at)
    async with LongTermMemory(backend=backend, backend_config=config) as memory:
        await memory.add("I keep my kayak at the marina in Portsmouth", user_id="maker", session_id="s1")
        hits = await memory.search("kayak marina", user_id="maker")
        count = len((await memory.get_all(user_id="maker")).memories)
    print(f"ok {count} {len(hits)}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
