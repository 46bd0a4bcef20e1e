"""A search and its hits' neighbours read in one call on the engine's thread, against two calls.

    python bench/search_hops.py DIR [--rounds 2]

DIR is a store ``bench/million.py --keep DIR`` built (or any local store of ``million.py``'s
users). Asks ``million.py``'s questions of classes (a)-(c) through ``search_memory``, each
question twice in a row in alternating order: once as a search runs now (``search_lending``:
the full-text query and the lenders' neighbours in one call on the engine's reader) and once
as before it (the engine's ``search_lending`` hidden, so the facade reads the neighbours in a
second call), on the same store in the same process. The two-call form is the baseline. Prints
p50 / p99 per class and over all, in ms, and their ratio. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import million
from _common import USERS, pct
from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory
from longterm.backends.local import LocalBackend

MODES = ("two calls (before)", "one call (now)")


async def main(where: Path, rounds: int) -> None:
    end = json.loads((where / "million.json").read_text())["end"]
    memory = LongTermMemory(backend="local", backend_config={"path": str(where / "ours.db")})
    items = [(c, q) for c, q in million.question_mix(300, 1) if not c.startswith("d")]
    lending = LocalBackend.search_lending
    lat: dict[str, dict[str, list[float]]] = {}

    async def ask(mode: str, i: int, q: str) -> float:
        LocalBackend.search_lending = lending if mode == MODES[1] else None  # type: ignore[assignment,method-assign]
        t = time.perf_counter()
        await memory.search_memory(app_name="bench", user_id=f"user-{i % USERS}", query=q, now=end)
        return time.perf_counter() - t

    try:
        for i, (_, q) in enumerate(items[:60]):  # warm-up, not counted
            await ask(MODES[i % 2], i, q)
        for r in range(rounds):
            for i, (cls, q) in enumerate(items):
                for k in range(2):
                    mode = MODES[(i + k + r) % 2]
                    took = await ask(mode, i, q)
                    for key in (cls, "all a-c"):
                        lat.setdefault(key, {}).setdefault(mode, []).append(took)
    finally:
        LocalBackend.search_lending = lending  # type: ignore[method-assign]
        await memory.close()
    table = Table(title=f"search_memory at {where}, {len(items)} questions x {rounds}, interleaved (ms)")
    for col in ("class", "two calls p50", "p99", "one call p50", "p99", "p50 ratio", "p99 ratio"):
        table.add_column(col, justify="right")
    for key, by in lat.items():
        before, now = by[MODES[0]], by[MODES[1]]
        b50, b99, n50, n99 = pct(before, 0.5), pct(before, 0.99), pct(now, 0.5), pct(now, 0.99)
        row = (f"{b50:.2f}", f"{b99:.2f}", f"{n50:.2f}", f"{n99:.2f}", f"{n50 / b50:.2f}", f"{n99 / b99:.2f}")
        table.add_row(key, *row)
    Console().print(table)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("where", type=Path, metavar="DIR")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    asyncio.run(main(a.where, a.rounds))
