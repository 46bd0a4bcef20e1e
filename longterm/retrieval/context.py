"""Context as a signal that cannot outlive its source: a hit lends part of its score to its
session neighbours, read from the store at search time; and time named in a question.

The seam: ``rerank(hits, lenders, around, window)`` takes the hits (best first), the best of
them as ``lenders`` with each one's neighbours (``around[i]``: the turns just before and after
``lenders[i]``, as the engine's ``neighbours`` read them now) and the question's time window
(``retrieval.when``), and returns the hits re-scored: the turn after a lender gains
``LEND_NEXT`` of its score, the turn before ``LEND_PREVIOUS`` (a neighbour that was no hit
becomes one when it shares a term with the question), and a hit inside the window
``WINDOW_BOOST`` times its score. ``fold(hits)`` keeps one of each near-identical text.

Why at search time: the answer to a question often holds none of its words ("what did
Caroline say when Melanie asked about the race?" - "she said it went great"), the turn before
it does. Indexing each turn with its neighbour's words finds it too, but keeps the words of an
erased turn inside its neighbour's record; a neighbour read from the store at search time is
gone once erased, so nothing of it can be found through another record. Why these numbers:
on the three dev sets (bench/zh.py, bench/locomo.py) the region 0.1-0.3 (next) and 0-0.1
(previous) over the first 3-10 hits gains on all three; the middle of it is taken.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence

from ..records import Hit, MemoryRecord
from .text import index_terms, query_terms
from .when import TimeWindow

#: Share of a hit's score the turn after it gains (the answer to a question).
LEND_NEXT = 0.2
#: Share of a hit's score the turn before it gains (the question an answer answers).
LEND_PREVIOUS = 0.1
#: How many of the best hits lend to their neighbours.
LENDERS = 5
#: A hit inside the question's time window has its score multiplied by this (at most 1).
WINDOW_BOOST = 1.5

Around = tuple[list[MemoryRecord], list[MemoryRecord]]


def shares_a_term(query: str) -> Callable[[MemoryRecord], bool]:
    """Whether a record holds at least one of ``query``'s terms (as full text looks them up). The
    terms are taken at the first call: most searches ask about no neighbour that is not a hit."""
    terms: set[str] | None = None

    def shares(record: MemoryRecord) -> bool:
        nonlocal terms
        if terms is None:
            terms = set(query_terms(query))
        return not terms.isdisjoint(index_terms(record.text))

    return shares


def rerank(
    hits: Sequence[Hit],
    lenders: Sequence[Hit] = (),
    around: Sequence[Around] = (),
    window: TimeWindow | None = None,
    *,
    relevant: Callable[[MemoryRecord], bool] = lambda record: True,
    order: Mapping[str, float] | None = None,
) -> list[Hit]:
    """``hits`` re-scored, best first: what each of ``lenders`` (some of the hits) lends its
    neighbours (``around``, one entry a lender), then ``WINDOW_BOOST`` for those inside
    ``window``. A neighbour that is no hit yet becomes one only if ``relevant`` (it shares a
    term with the question: ``shares_a_term``), so a search never returns a turn for its
    neighbour's words alone. Ranked by the sums; each reported score capped at 1 (``extra`` says
    what was added: ``lent``, the neighbours' share, and ``when``, the words that named the
    window; ``arms`` keep what found the hit). Ties keep the order they had. ``order``: the value
    each hit is ranked by when it is not its score (a reranker's order, ``retrieval.rerank``):
    lent and boosted the same way, it decides the order while the scores stay as they were."""
    value = {h.record.id: h.score for h in hits}
    by = value if order is None else {h.record.id: order.get(h.record.id, h.score) for h in hits}
    rank = dict(by)
    out = {h.record.id: h for h in hits}
    lent: dict[str, float] = {}
    for hit, (before, after) in zip(lenders, around, strict=True):
        for record, share in (
            (after[0] if after else None, LEND_NEXT),
            (before[-1] if before else None, LEND_PREVIOUS),
        ):
            if record is None or hit.score <= 0:
                continue
            if record.id not in out:  # not fetched: a hit through its context, if it is about the question
                if not relevant(record):
                    continue
                out[record.id] = Hit(record=record, score=0.0)
                value[record.id] = rank[record.id] = 0.0
            lent[record.id] = lent.get(record.id, 0.0) + share * hit.score
            rank[record.id] += share * by[hit.record.id]
    for rid, amount in lent.items():
        value[rid] += amount
    inside = {rid for rid, h in out.items() if window is not None and window.holds(h.record.timestamp)}
    for rid in inside:
        value[rid] *= WINDOW_BOOST
        rank[rid] *= WINDOW_BOOST
    if not lent and not inside:
        return list(hits)
    key = value if order is None else rank
    ranked = sorted(out, key=lambda rid: -key[rid])
    result = []
    for rid in ranked:
        h = out[rid]
        extra = dict(h.extra)
        if rid in lent:
            extra["lent"] = lent[rid]  # what its neighbours lent (``arms`` keep what found it)
        if rid in inside:
            extra["when"] = window.said if window is not None else ""
        result.append(h.model_copy(update={"score": min(1.0, value[rid]), "extra": extra}))
    return result


_SPACE = re.compile(r"\W+")


def _key(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def fold(hits: Sequence[Hit]) -> list[Hit]:
    """One hit of each text (compared casefolded, punctuation and spacing ignored): the best;
    ``extra["folded"]`` counts the others."""
    kept: dict[str, Hit] = {}
    for h in hits:
        key = _key(h.record.text) or h.record.id
        first = kept.get(key)
        if first is None:
            kept[key] = h
        else:
            kept[key] = first.model_copy(update={"extra": {**first.extra, "folded": first.extra.get("folded", 0) + 1}})
    return list(kept.values())
