"""Run as a process by test_crash_erase: erase a user, printing a line after each batch the
engine deletes, slowly, so the test can SIGKILL it part-way.

Usage: python -m tests.faults._eraser BACKEND CONFIG_JSON APP USER
Prints ``batch <records this batch deleted>`` after each of the engine's delete batches (Redis:
each ``ERASE`` script call), waiting 0.3 s after it; ``erased <n>`` at the end.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from redis.commands.core import Script

from longterm import LongTermMemory
from longterm.backends.redis.scripts import ERASE


def slow_batches() -> None:
    original = Script.__call__

    def call(self: Script, keys: Any = (), args: Any = (), client: Any = None) -> Any:
        out = original(self, keys=list(keys), args=list(args), client=client)
        if self.script == ERASE:
            print(f"batch {out[1]}", flush=True)
            time.sleep(0.3)
        return out

    Script.__call__ = call  # type: ignore[method-assign]


async def main() -> None:
    backend, config, app, user = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
    slow_batches()
    async with LongTermMemory(backend=backend, backend_config=config, app_name=app) as memory:
        n = await memory.delete_memory(app_name=app, user_id=user)
    print(f"erased {n}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
