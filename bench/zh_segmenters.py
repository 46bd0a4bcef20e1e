"""Chinese word segmentation for full-text search, measured on the Chinese dev sets.

    python bench/zh_segmenters.py [--zh PATH] [--zh-locomo DIR] [--locomo PATH]

Each method prepares both sides (memories and questions) for plain SQLite FTS5 (bm25,
unicode61, the question's terms OR-joined, one table, filtered to the asking user), so
only the segmentation differs:

- ``bigram``: overlapping CJK bigrams (the plain fix);
- ``bigram+uni``: bigrams and every character on both sides;
- ``jieba``: jieba's search mode (``cut_for_search``; jieba 0.42, unmaintained since 2020);
- ``rjieba``: jieba-rs through rjieba (maintained), ``cut`` plus ``cut_for_search``;
- ``icu``: ICU's word break iterator (icu4py), the maintained dictionary segmenter;
- each segmenter ``+bi``: its words plus the bigrams (a word the dictionary lacks is still found).

A method whose package is missing is reported as such. Prints a table; asserts nothing.
English LoCoMo is run with ``bigram`` only, as the same-run reference that segmentation
leaves English alone.
"""

from __future__ import annotations

import argparse
import re
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import DEFAULT_DATA, evaluate, fts5_baseline, load
from rich.console import Console
from rich.table import Table
from zh import ZH_DATA, ZH_LOCOMO, load_zh

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def _by_runs(words: Callable[[str], list[str]]) -> Callable[[str], str]:
    """Apply ``words`` to each CJK run; other text is left to FTS5's tokenizer."""

    def prepare(text: str) -> str:
        return _HAN.sub(lambda m: " " + " ".join(w for w in words(m[0]) if w.strip()) + " ", _norm(text))

    return prepare


def _plus_bigrams(words: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    return lambda run: [*words(run), *_bigrams(run)]


def methods() -> dict[str, Callable[[str], str] | str]:
    out: dict[str, Callable[[str], str] | str] = {
        "bigram": _by_runs(_bigrams),
        "bigram+uni": _by_runs(lambda r: [*_bigrams(r), *(list(r) if len(r) > 1 else [])]),
    }
    try:
        import jieba

        jieba.setLogLevel(60)
        out["jieba"] = _by_runs(lambda r: list(jieba.cut_for_search(r)))
        out["jieba+bi"] = _by_runs(_plus_bigrams(lambda r: list(jieba.cut_for_search(r))))
    except ImportError:
        out["jieba"] = "pip install jieba"
    try:
        import rjieba

        out["rjieba"] = _by_runs(lambda r: list(dict.fromkeys([*rjieba.cut(r), *rjieba.cut_for_search(r)])))
        out["rjieba+bi"] = _by_runs(_plus_bigrams(lambda r: [*rjieba.cut(r), *rjieba.cut_for_search(r)]))
    except ImportError:
        out["rjieba"] = "pip install rjieba"
    try:
        from icu4py.breakers import WordBreaker

        out["icu"] = _by_runs(lambda r: list(WordBreaker(r, "zh")))
        out["icu+bi"] = _by_runs(_plus_bigrams(lambda r: list(WordBreaker(r, "zh"))))
    except ImportError:
        out["icu"] = "pip install icu4py"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zh", type=Path, default=ZH_DATA)
    ap.add_argument("--zh-locomo", type=Path, default=ZH_LOCOMO)
    ap.add_argument("--locomo", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    sets = {"zh dev (all)": load_zh(args.zh), "zh LoCoMo": load(args.zh_locomo)}
    console = Console(width=160)
    table = Table(title="Chinese segmentation under plain FTS5 bm25: hit@5 / MRR@10 / s-any@5")
    table.add_column("method")
    for name in sets:
        table.add_column(name, justify="right")
    for name, prepare in methods().items():
        if isinstance(prepare, str):
            table.add_row(name, *(f"missing: {prepare}" for _ in sets))
            continue
        cells = []
        for sessions, questions in sets.values():
            scores, _ = evaluate(fts5_baseline(sessions, prepare), questions)
            s = scores["all"]
            cells.append(f"{s['hit@5']:.3f} / {s['MRR@10']:.3f} / {s['s-any@5']:.3f}")
        table.add_row(name, *cells)
        console.print(f"  {name}: " + ", ".join(cells))
    console.print(table)


if __name__ == "__main__":
    main()
