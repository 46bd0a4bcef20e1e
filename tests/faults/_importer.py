"""Run as a process by test_crash_resume: import a JSON file of sessions, four at a time,
printing one progress line per chunk, so the test can SIGKILL it part-way.

Usage: python -m tests.faults._importer BACKEND CONFIG_JSON SESSIONS_FILE
Prints ``chunk <sessions done> <records this run saved>`` after each chunk, ``done`` at the end.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from longterm import LongTermMemory

CHUNK = 4


async def main() -> None:
    backend, config, sessions_file = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    sessions = json.loads(Path(sessions_file).read_text(encoding="utf-8"))
    async with LongTermMemory(backend=backend, backend_config=config) as memory:
        saved = 0
        for start in range(0, len(sessions), CHUNK):
            chunk = sessions[start : start + CHUNK]
            results = await memory.add_sessions_to_memory(chunk, concurrency=CHUNK)
            saved += sum(r.saved for r in results)
            print(f"chunk {start + len(chunk)} {saved}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
