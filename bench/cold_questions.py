"""The same questions asked again: which slow answers are the store's, and which a cold cache's.

    python bench/cold_questions.py DIR [--passes 3]

DIR is a store ``bench/million.py --keep DIR`` built. Asks ``million.py``'s question mix (300 of
each class and the long inputs) ``--passes`` times in one process, dated at the build's end as
there, and prints the slowest answers with the same question's time in every pass and the
garbage collections during it, then p50 / p99 / max per pass. The first pass is the baseline of
the others: a question slow only in the first pass read pages the OS no longer had cached; one
slow in every pass is the store's own cost. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import million
from _common import USERS, pct
from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory


async def main(where: Path, passes: int) -> None:
    meta = json.loads((where / "million.json").read_text())
    memory = LongTermMemory(backend="local", backend_config={"path": str(where / "ours.db")})
    items = million.question_mix(300, 5)
    collections: list[int] = []
    gc.callbacks.append(lambda phase, _info: collections.append(1) if phase == "start" else None)
    took: dict[tuple[int, int], tuple[float, int]] = {}
    try:
        for p in range(passes):
            for i, (_, q) in enumerate(items):
                t, before = time.perf_counter(), len(collections)
                await memory.search_memory(app_name="bench", user_id=f"user-{i % USERS}", query=q, now=meta["end"])
                took[(p, i)] = (time.perf_counter() - t, len(collections) - before)
    finally:
        await memory.close()
    slow = Table(title="the slowest answers, and the same question in every pass (ms)")
    for col in ("pass", "question", "class", "ms", "every pass", "collections"):
        slow.add_column(col, justify="right")
    for (p, i), (s, g) in sorted(took.items(), key=lambda kv: -kv[1][0])[:12]:
        every = ", ".join(f"{took[(k, i)][0] * 1000:.1f}" for k in range(passes))
        slow.add_row(str(p + 1), str(i), items[i][0], f"{s * 1000:.1f}", every, str(g))
    per = Table(title=f"{len(items)} questions a pass")
    for col in ("pass", "p50 ms", "p99 ms", "max ms"):
        per.add_column(col, justify="right")
    for p in range(passes):
        lat = [took[(p, i)][0] for i in range(len(items))]
        per.add_row(str(p + 1), f"{pct(lat, 0.5):.2f}", f"{pct(lat, 0.99):.2f}", f"{max(lat) * 1000:.1f}")
    console = Console()
    console.print(slow)
    console.print(per)


def _args() -> Any:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("where", type=Path, metavar="DIR")
    ap.add_argument("--passes", type=int, default=3)
    return ap.parse_args()


if __name__ == "__main__":
    a = _args()
    asyncio.run(main(a.where, a.passes))
