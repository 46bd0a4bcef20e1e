"""A writer for the contract suite's two-writers test: save one session, many times.

The seam: ``write(backend, config, session, rounds)`` opens its own ``LongTermMemory`` and
saves ``session`` ``rounds`` times. The suite runs it as a separate process::

    python -m longterm.testing._writer NAME MODULE:CLASS CONFIG_JSON SESSION_FILE ROUNDS

(``MODULE:CLASS`` is registered under ``NAME`` first, so a backend registered at run time
in the test process is found in the writer too), or in a thread for a store that lives in
one process's memory. Exit status ``REFUSED`` (with ``refused: <reason>`` on stdout) means
the store refused this writer because another process holds it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from longterm import BackendUnavailableError, LongTermMemory
from longterm.core import registry

#: Exit status of a process the store refused because another process holds it.
REFUSED = 3


def write(backend: str, config: dict[str, Any], session: dict[str, Any], rounds: int) -> None:
    memory = LongTermMemory(backend=backend, backend_config=config)
    try:
        for _ in range(rounds):
            memory.add_session_to_memory_sync(session)
    finally:
        memory.close_sync()


def main() -> None:
    name, target, config, session_file, rounds = sys.argv[1:6]
    registry.register(name, target, replace=True)
    session = json.loads(Path(session_file).read_text(encoding="utf-8"))
    try:
        write(name, json.loads(config), session, int(rounds))
    except BackendUnavailableError as exc:
        print(f"refused: {exc}")
        sys.exit(REFUSED)
    print("ok")


if __name__ == "__main__":
    main()
