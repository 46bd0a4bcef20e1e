"""Each search-time recall signal alone, on the three dev sets, in one run.

    python bench/recall_parts.py [--zh PATH] [--zh-locomo DIR] [--locomo PATH]

The public API on the local backend (bench/locomo.py's ``default``: questions asked at the
time of the conversation's last turn), with the signals of ``retrieval/context.py`` switched
on one at a time over the same stores:

- ``neither``: no neighbour lends, no time window;
- ``context``: the best hits lend to their session neighbours (``LEND_NEXT``, ``LEND_PREVIOUS``);
- ``time``: hits inside a time the question names gain (``WINDOW_BOOST``);
- ``both``: the default.

Prints hit@5 / MRR@10 / session any@5 per set, and LoCoMo's temporal category apart;
asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import CONFIGS, DEFAULT_DATA, evaluate, load
from rich.console import Console
from rich.table import Table
from zh import ZH_DATA, ZH_LOCOMO, load_zh

from longterm.retrieval import context

PARTS = ("neither", "context", "time", "both")


@contextmanager
def only(part: str) -> Iterator[None]:
    saved = (context.LENDERS, context.WINDOW_BOOST)
    try:
        if part in {"neither", "time"}:
            context.LENDERS = 0
        if part in {"neither", "context"}:
            context.WINDOW_BOOST = 1.0
        yield
    finally:
        context.LENDERS, context.WINDOW_BOOST = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zh", type=Path, default=ZH_DATA)
    ap.add_argument("--zh-locomo", type=Path, default=ZH_LOCOMO)
    ap.add_argument("--locomo", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    sets = {"zh dev (all)": load_zh(args.zh), "zh LoCoMo": load(args.zh_locomo), "LoCoMo dev": load(args.locomo)}
    console = Console(width=180)
    table = Table(title="Search-time signals alone (public API, local): hit@5 / MRR@10 / s-any@5")
    table.add_column("signals")
    for name in sets:
        table.add_column(name, justify="right")
    table.add_column("LoCoMo temporal", justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        searchers = {}
        for i, (name, (sessions, _)) in enumerate(sets.items()):
            (Path(tmp) / str(i)).mkdir()
            searchers[name] = CONFIGS["default"](sessions, Path(tmp) / str(i))[0]
        for part in PARTS:
            cells, temporal = [], ""
            with only(part):
                for name, (_, questions) in sets.items():
                    scores = evaluate(searchers[name], questions)[0]
                    s = scores["all"]
                    cells.append(f"{s['hit@5']:.3f} / {s['MRR@10']:.3f} / {s['s-any@5']:.3f}")
                    if name == "LoCoMo dev":
                        t = scores[2]
                        temporal = f"{t['hit@5']:.3f} / {t['MRR@10']:.3f}"
            table.add_row(part, *cells, temporal)
            console.print(f"  {part}: " + ", ".join(cells) + f", temporal {temporal}")
    console.print(table)


if __name__ == "__main__":
    main()
