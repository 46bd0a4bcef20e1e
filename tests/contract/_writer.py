"""Run as a separate process by the contract suite: save one session file, many times."""

from __future__ import annotations

import json
import sys

from longterm import BackendUnavailableError, LongTermMemory

#: Exit status of a process the store refused because another process holds it.
REFUSED = 3


def main() -> None:
    backend, config, session_file, rounds = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    session = json.loads(open(session_file, encoding="utf-8").read())
    memory = LongTermMemory(backend=backend, backend_config=config)
    try:
        for _ in range(rounds):
            memory.add_session_to_memory_sync(session)
    except BackendUnavailableError as exc:
        print(f"refused: {exc}")
        sys.exit(REFUSED)
    finally:
        memory.close_sync()
    print("ok")


if __name__ == "__main__":
    main()
