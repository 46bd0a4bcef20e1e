"""Run as a process by test_crash_join: open a memory not told its index on a store of the
previous release, which joins it, and stop for good after the join's first step of one kind.

Usage: python -m tests.faults._joiner CONFIG_JSON STEP
STEP is ``upsert`` (records written into the target), ``mark_saved`` (a ledger session carried)
or ``delete`` (the source erased, the marker not written yet). After the first such call of the
local engine it prints ``<STEP> done`` and waits to be killed; ``joined`` if it never came.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from longterm import LongTermMemory
from longterm.core.engine import Engine


def stop_after(step: str) -> None:
    original = getattr(Engine, step)

    async def then_stop(self: Engine, *args: Any, **kwargs: Any) -> Any:
        out = await original(self, *args, **kwargs)
        print(f"{step} done", flush=True)
        time.sleep(600)  # blocks the loop: nothing after this step runs before the kill
        return out

    setattr(Engine, step, then_stop)


def main() -> None:
    config, step = json.loads(sys.argv[1]), sys.argv[2]
    stop_after(step)
    with LongTermMemory(backend="local", backend_config=config) as memory:
        memory.indices_sync()
    print("joined", flush=True)


if __name__ == "__main__":
    main()
