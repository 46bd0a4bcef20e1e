"""Cost of an erase of many ids on the local store (by date, by filter, the expiry sweep).

    python bench/erase_by_ids.py [--sizes 4000 8000 16000]

Such an erase names the ids it takes; ids are not indexed in the local store (the scope and time
are), so each delete statement reads the scope's records once. One statement per id made an erase
of n ids cost n reads of n records (16,000 by date: 20.9 s); one per 500 ids costs n / 500. Each
size: one user with that many memories, erased by date (every one of them, by ids), against the
erase of the whole user (one statement) in the same run, on a fresh store each. Prints a table,
asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory


def erased_in(path: Path, n: int, by_date: bool) -> float:
    with LongTermMemory(app_name="bench", backend_config={"path": str(path)}) as memory:
        memory.add_sync([f"memo {i} about thing {i % 53}" for i in range(n)], user_id="u", session_id="s")
        started = time.perf_counter()
        gone = (
            memory.delete_all_sync(user_id="u", before=time.time() + 60)
            if by_date
            else memory.delete_all_sync(user_id="u")
        )
        took = time.perf_counter() - started
        assert gone == n, (gone, n)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4_000, 8_000, 16_000])
    args = parser.parse_args()
    table = Table(title="local: erase of every memory of one user, by date (ids) and whole")
    for column in ("memories", "by date (s)", "whole user (s)", "by date / whole"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            by_date = erased_in(Path(tmp) / f"d{n}.db", n, True)
            whole = erased_in(Path(tmp) / f"w{n}.db", n, False)
            table.add_row(f"{n:,}", f"{by_date:.2f}", f"{whole:.2f}", f"{by_date / whole:.1f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
