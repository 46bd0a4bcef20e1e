"""Run as a process by test_open_race: in each round, wait for the shared start time, then
open a store that does not exist yet and save one session; report per round.

Usage: python -m tests.faults._opener MODE BASE ROUNDS WORKER
MODE ``local``: the store is ``BASE/r<round>/memory.db``. MODE ``home-ledger``: a backend
that keeps no ledger (``ThirdParty``, over that file), so the ledger is a new
``LONGTERM_HOME`` file (``BASE/r<round>/home/ledger.db``) created by all workers at once.
The test writes ``BASE/go<round>`` holding the start time after every worker printed
``ready <round>``; the worker prints ``ok <round>`` or ``failed <round> <error>``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from longterm import Hit, LongTermMemory, MemoryRecord, Scope
from longterm.backends.local import LocalBackend

APP, USER = "race-app", "racer"


class ThirdParty:
    """A backend that is not an ``Engine`` (keeps no ledger): a facade over a local store."""

    name: ClassVar[str] = "thirdparty"

    def __init__(self, path: Path) -> None:
        self._store = LocalBackend(path)
        self.store_id = f"thirdparty:{path}"

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        await self._store.upsert(records)

    async def search(self, scope: Scope, query: str, top_k: int) -> list[Hit]:
        return await self._store.search(scope, query, top_k)

    async def delete(self, scope: Scope, ids: Sequence[str] | None = None, *, session_id: str | None = None) -> int:
        return await self._store.delete(scope, ids, session_id=session_id)

    async def count(self, scope: Scope) -> int:
        return await self._store.count(scope)

    def scan(self, scope: Scope, batch_size: int = 500) -> AsyncIterator[MemoryRecord]:
        return self._store.scan(scope, batch_size)

    async def close(self) -> None:
        await self._store.close()


def session(worker: int) -> dict[str, Any]:
    return {
        "id": f"w{worker}",
        "app_name": APP,
        "user_id": USER,
        "events": [
            {
                "id": f"w{worker}-e{j}",
                "author": "user",
                "timestamp": 1_700_000_000 + j,
                "content": f"racer {worker} said {j}",
            }
            for j in range(5)
        ],
    }


def open_memory(mode: str, where: Path) -> LongTermMemory:
    if mode == "local":
        return LongTermMemory(backend_config={"path": str(where / "memory.db")})
    os.environ["LONGTERM_HOME"] = str(where / "home")
    return LongTermMemory(backend=ThirdParty(where / "memory.db"))


def wait_for_start(go: Path) -> None:
    while not go.exists():
        time.sleep(0.001)
    time.sleep(max(0.0, float(go.read_text()) - time.time()))


async def one_round(mode: str, where: Path, go: Path, worker: int) -> None:
    # Everything but the store's first open happens before the barrier, so the workers'
    # first SQLite calls overlap as closely as the scheduler allows.
    memory = open_memory(mode, where)
    async with memory:
        wait_for_start(go)
        await memory.add_session_to_memory(session(worker))


def main() -> None:
    mode, base, rounds, worker = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    for r in range(rounds):
        print(f"ready {r}", flush=True)
        try:
            asyncio.run(one_round(mode, base / f"r{r}", base / f"go{r}", worker))
        except Exception as exc:  # reported to the test, which fails with it
            print(f"failed {r} {type(exc).__name__}: {exc}".replace("\n", " "), flush=True)
        else:
            print(f"ok {r}", flush=True)


if __name__ == "__main__":
    main()
