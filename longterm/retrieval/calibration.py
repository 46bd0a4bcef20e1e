"""Scores with one meaning on every backend: the core's calibration of a search's hits.

The seam: ``calibrate(query, hits, weights)`` gives each hit a ``score`` in [0, 1], higher
is better, computed the same way whatever engine found it, and keeps the engine's own
score as ``extra["raw_score"]``. The engine's order is kept: it ranks with what only the
engine knows (how rare each word is in the store, its BM25, fusion); the score says how
well the hit answers, on a scale that carries from one store to another.

The score is the weighted sum of two arms, each in [0, 1]:
- **words**: the share of the question's content words (``text.query_terms``: stemmed,
  function words dropped, CJK as bigrams and characters) that the memory contains;
- **meaning** (when the store has vectors): the cosine of query and memory from the
  vector arm, clipped to [0, 1].
With both arms the weights are the store's fusion weights (0.7 words, 0.3 meaning by
default); with words only, the words' share alone.

So 1.0 is a memory holding every content word of the question; 0.5 half of them (or all
of them and nothing of their meaning); a question about nothing stored scores 0 on words,
and under 0.2 in total with a typical small embedder. Thresholds (``min_score``) carry
over between backends. Why not the engine's own score: BM25 is unbounded and differs by
engine (FTS5, Lucene, RediSearch score the same hit 1.5, 3.2 and 29.2), and min-max within
one result list makes every top hit 1.0 whatever it says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..records import Hit
from .text import index_terms, query_terms

#: Arms whose raw score is a similarity in [0, 1] already (mem0's search, vectors only).
SIMILARITY_ARMS = ("mem0",)


def word_share(terms: Sequence[str], text: str) -> float:
    """The share of ``terms`` (a question's, ``query_terms``) that ``text`` contains."""
    if not terms:
        return 0.0
    have = set(index_terms(text))
    return sum(1 for t in terms if t in have) / len(terms)


def calibrate(query: str, hits: Sequence[Hit], weights: Mapping[str, float] | None = None) -> list[Hit]:
    """``hits`` in the same order, each scored on the one scale (module docstring).

    ``weights``: ``{"fulltext": w, "vector": v}`` when the store searches vectors too, else
    None. A hit of a degraded search (its vector arm failed) is scored by words alone, as a
    store without vectors; one the vector arm did not return has a similarity of 0 there.
    """
    if not hits:
        return []
    terms = query_terms(query)
    w_text, w_vec = 1.0, 0.0
    if weights is not None:
        a, b = max(0.0, float(weights.get("fulltext", 0.0))), max(0.0, float(weights.get("vector", 0.0)))
        if a + b > 0:
            w_text, w_vec = a / (a + b), b / (a + b)
    out = []
    for h in hits:
        similar = [h.arms[a] for a in SIMILARITY_ARMS if a in h.arms]
        if similar and len(h.arms) == 1:  # an engine whose one arm is a similarity (mem0)
            score = float(similar[0])
        elif w_vec == 0.0 or h.extra.get("degraded"):
            score = word_share(terms, h.record.text)
        else:
            cos = min(1.0, max(0.0, float(h.arms.get("vector", 0.0))))
            score = w_text * word_share(terms, h.record.text) + w_vec * cos
        extra = {**h.extra, "raw_score": h.score}
        out.append(h.model_copy(update={"score": round(min(1.0, max(0.0, score)), 6), "extra": extra}))
    return out
