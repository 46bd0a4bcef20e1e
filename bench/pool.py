"""What a search at the product's ``top_k`` returns, against the pool of hits it ranks.

    python bench/pool.py [--pools 5 10 20 50] [--top-k 5]

bench/locomo.py asks ``top_k=200`` (for its session-level metrics), so the engine fetches 200
hits and the core ranks all of them (calibrated score, context, time); a user asking the default
``top_k=5`` gets the core's ranking of the engine's first 5 only. This runs the default
configuration on the three dev sets at ``--top-k``, with the engine asked for ``max(top_k, pool)``
hits (``memory.searching.fetch_size``), next to plain FTS5 and the 200-deep ranking, each
against the first pool with a paired bootstrap (bench/_stats.py). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo
from _stats import said
from fusion import per_question, row, sets
from rich.console import Console

from longterm.memory import searching

_fetch = searching.fetch_size
POOL = {"n": 0}


def fetch_size(k, rescoring, facts_on):  # the bench's hook: at least the pool
    return max(_fetch(k, rescoring, facts_on), POOL["n"])


searching.fetch_size = fetch_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pools", nargs="+", type=int, default=[5, 10, 20, 50])
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--sets", nargs="+", default=["LoCoMo dev", "zh dev", "zh LoCoMo"])
    args = ap.parse_args()
    console = Console(width=200)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (sessions, questions) in sets(args.sets).items():
            console.print(f"[bold]{name}[/]: {len(questions)} questions, top_k={args.top_k}")
            console.print(
                f"  plain FTS5 (floor)   {row(per_question(locomo.fts5_baseline(sessions, locomo._bigrams), questions))}"
            )
            locomo.SESSION_DEPTH = 200
            search = locomo.longterm_searcher(sessions, Path(tmp), name)[0]
            deep = per_question(search, questions)
            locomo.SESSION_DEPTH = args.top_k
            first = None
            for pool in args.pools:
                POOL["n"] = pool
                started = time.perf_counter()
                m = per_question(search, questions)
                ms = (time.perf_counter() - started) / len(questions) * 1000
                vs = f"vs pool {args.pools[0]} {said(first['hit@5'], m['hit@5'])}" if first else ""
                console.print(f"  pool {pool:<4}            {row(m)}   {vs} ({ms:.1f} ms/q)")
                first = first or m
            console.print(
                f"  top_k 200 (the bench) {row(deep)}   vs pool {args.pools[0]} {said(first['hit@5'], deep['hit@5'])}"
            )


if __name__ == "__main__":
    asyncio.set_event_loop(asyncio.new_event_loop())
    main()
