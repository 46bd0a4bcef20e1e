"""Each Chinese query rule of ``retrieval/text.py`` alone, on both Chinese dev sets, in one run.

    python bench/zh_rules.py [--zh PATH] [--zh-locomo DIR] [--variants ...]

The public API on the local backend (bench/locomo.py's ``default``), with the question side
of Chinese text changed one rule at a time (memories are indexed the same way in every
variant: bigrams and unigrams):

- ``as-is``: today's rules;
- ``no-cut``: the question is not cut at function words, question words or memory verbs
  (bigrams made across them; BM25's weights alone decide what counts);
- ``no-verb-cut``: the cut keeps function and question words but not the memory verbs
  (说过, 提到, 记得, 告诉, 推荐, 建议: the content of many real questions);
- ``no-advice-cut``: the cut keeps all but 推荐 and 建议 (a recommendation is content: "你上次推荐的
  那本书叫什么");
- ``all-unigrams``: every character of the question looked up, the hundred most common too;
- ``no-unigrams``: no single character looked up alone;
- ``no-verb-cut+all-unigrams``: the two together;
- ``plain``: no cut and every character (bigrams + unigrams, nothing hand-listed), the
  principled baseline the rules must beat.

Prints hit@5 / MRR@10 / session any@5 per variant and set; asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import CONFIGS, evaluate, load
from rich.console import Console
from rich.table import Table
from zh import ZH_DATA, ZH_LOCOMO, load_zh

from longterm.retrieval import text

_NOTHING = re.compile(r"(?!x)x")
_VERBS = {"说过", "你说", "我说", "说的", "提到", "提过", "记得", "告诉", "推荐", "建议"}


@contextmanager
def variant(name: str) -> Iterator[None]:
    saved = (text._ZH_STOP, text._ZH_COMMON)
    try:
        if name in {"no-cut", "plain"}:
            text._ZH_STOP = _NOTHING
        if name in {"no-verb-cut", "no-verb-cut+all-unigrams"}:
            words = sorted(text.ZH_STOPWORDS - _VERBS, key=len, reverse=True)
            text._ZH_STOP = re.compile("|".join(words))
        if name == "no-advice-cut":
            words = sorted(text.ZH_STOPWORDS - {"推荐", "建议"}, key=len, reverse=True)
            text._ZH_STOP = re.compile("|".join(words))
        if name in {"all-unigrams", "plain", "no-verb-cut+all-unigrams"}:
            text._ZH_COMMON = frozenset()
        if name == "no-unigrams":
            text._ZH_COMMON = frozenset(chr(c) for c in range(0x3400, 0xA000))
        yield
    finally:
        text._ZH_STOP, text._ZH_COMMON = saved


VARIANTS = (
    "as-is",
    "no-cut",
    "no-verb-cut",
    "no-advice-cut",
    "all-unigrams",
    "no-unigrams",
    "plain",
    "no-verb-cut+all-unigrams",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zh", type=Path, default=ZH_DATA)
    ap.add_argument("--zh-locomo", type=Path, default=ZH_LOCOMO)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    args = ap.parse_args()
    sets = {"zh dev (all)": load_zh(args.zh), "zh LoCoMo": load(args.zh_locomo)}
    console = Console(width=160)
    table = Table(title="Chinese query rules alone (public API, local): hit@5 / MRR@10 / s-any@5")
    table.add_column("variant")
    for name in sets:
        table.add_column(name, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        searchers = {}
        for i, (name, (sessions, _)) in enumerate(sets.items()):
            (Path(tmp) / str(i)).mkdir()
            searchers[name] = CONFIGS["default"](sessions, Path(tmp) / str(i))[0]
        for v in args.variants:
            cells = []
            with variant(v):
                for name, (_, questions) in sets.items():
                    s = evaluate(searchers[name], questions)[0]["all"]
                    cells.append(f"{s['hit@5']:.3f} / {s['MRR@10']:.3f} / {s['s-any@5']:.3f}")
            table.add_row(v, *cells)
            console.print(f"  {v}: " + ", ".join(cells))
    console.print(table)


if __name__ == "__main__":
    main()
