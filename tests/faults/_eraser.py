"""Run as a process by test_crash_erase: erase, printing a line after each batch the engine
deletes, slowly, so the test can SIGKILL it part-way.

Usage: python -m tests.faults._eraser BACKEND CONFIG_JSON APP USER [HOW [ARG]]
HOW: ``user`` (the default: every memory of USER), ``before`` (``delete_all(before=ARG)``),
``sessions`` (``delete_all(filters={"session_id": {"$in": ARG}})``, ARG a JSON list) or
``expired`` (``sweep_expired`` by a clock standing at ARG).
Prints ``batch <records this batch deleted>`` after each of the engine's delete batches (Redis:
each ``ERASE`` script call; OpenSearch: each bulk request of tombstones; ``BATCH`` records each
here; mem0: each memory deleted), waiting 0.3 s after it; ``erased <n>`` at the end.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from longterm import LongTermMemory

#: Records an OpenSearch erase tombstones a request, a Redis ``ERASE`` call deletes, here (1,000 and 500 in
#: the library): a big erase is many steps, and an erase of more ids than this is marked.
BATCH = 50


def _batch(n: int) -> None:
    print(f"batch {n}", flush=True)
    time.sleep(0.3)


def slow_redis() -> None:
    from redis.commands.core import Script

    from longterm.backends.redis import erasing
    from longterm.backends.redis.scripts import ERASE

    erasing.ERASE_BATCH = BATCH
    original = Script.__call__

    def call(self: Script, keys: Any = (), args: Any = (), client: Any = None) -> Any:
        out = original(self, keys=list(keys), args=list(args), client=client)
        if self.script == ERASE:
            _batch(out[1])
        return out

    Script.__call__ = call  # type: ignore[method-assign]


def slow_opensearch() -> None:
    from longterm.backends.opensearch import OpenSearchBackend, erasing

    erasing.ERASE_PAGE = BATCH
    original = OpenSearchBackend._send

    def send(self: OpenSearchBackend, chunk: Any, tolerate: tuple[int, ...] = (409,)) -> list[int]:
        statuses = original(self, chunk, tolerate)
        if b'{"erased": true}' in chunk[0][0]:
            _batch(sum(s < 300 for s in statuses))
        return statuses

    OpenSearchBackend._send = send  # type: ignore[method-assign]


def slow_mem0() -> None:
    from longterm.backends.mem0 import Mem0Backend

    original = Mem0Backend._open

    def open_(self: Mem0Backend) -> None:
        original(self)
        delete = self._mem.delete

        def slow(memory_id: str) -> Any:
            out = delete(memory_id)
            _batch(1)
            return out

        self._mem.delete = slow

    Mem0Backend._open = open_  # type: ignore[method-assign]


SLOW = {"redis": slow_redis, "opensearch": slow_opensearch, "mem0": slow_mem0}


async def main() -> None:
    backend, config, app, user = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
    how, arg = (sys.argv[5:] + ["", ""])[:2] if len(sys.argv) > 5 else ("user", "")
    SLOW[backend]()
    clock = (lambda: float(arg)) if how == "expired" else None
    async with LongTermMemory(backend=backend, backend_config=config, app_name=app, clock=clock) as memory:
        if how == "user":
            n = await memory.delete_memories(app_name=app, user_id=user)
        elif how == "before":
            n = await memory.delete_all(user_id=user, before=float(arg))
        elif how == "sessions":
            n = await memory.delete_all(user_id=user, filters={"session_id": {"$in": json.loads(arg)}})
        else:
            n = await memory.sweep_expired(user_id=user)
    print(f"erased {n}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
