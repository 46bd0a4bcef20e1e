"""BM25 term weights as sparse vectors, for engines that score sparse dot products.

The seam: ``document_vector(text)`` and ``query_vector(text)`` return
``(indices, values)``. With an IDF modifier on the engine side (Qdrant's
``Modifier.IDF``), their dot product is BM25: documents carry the saturated,
length-normalised term frequency, queries carry 1 per term, the engine multiplies by
IDF. Terms come from ``text.index_terms``/``query_terms`` (stemmed, CJK bigrams), hashed
to 32-bit indices (collisions only merge two rare terms' weights).
"""

from __future__ import annotations

import hashlib
from collections import Counter

from .text import index_terms, query_terms

K1 = 1.2
B = 0.75
#: Typical length (in terms) of one conversational memory; sets the length normalisation.
AVG_LEN = 24.0


def term_index(term: str) -> int:
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little")


def document_vector(text: str) -> tuple[list[int], list[float]]:
    terms = index_terms(text)
    if not terms:
        return [], []
    norm = K1 * (1 - B + B * len(terms) / AVG_LEN)
    weights: dict[int, float] = {}
    for term, tf in Counter(terms).items():
        i = term_index(term)
        weights[i] = weights.get(i, 0.0) + tf * (K1 + 1) / (tf + norm)
    return list(weights), list(weights.values())


def query_vector(text: str) -> tuple[list[int], list[float]]:
    indices = sorted({term_index(t) for t in query_terms(text)})
    return indices, [1.0] * len(indices)
