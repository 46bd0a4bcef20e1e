"""Reciprocal Rank Fusion: merging ranked lists from different search arms.

The seam: each arm (full text, vectors, ...) returns ids best first; ``rrf`` returns one
list best first with a fused score. RRF needs no score calibration between arms, which
is why every hybrid backend uses it; ``weights`` let a weak arm count for less.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: The constant from Cormack et al. (2009); damps the head of each list.
RRF_K = 60


def rrf(
    rankings: Mapping[str, Sequence[str]],
    *,
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[str, float, dict[str, int]]]:
    """Fuse ``{arm: [id, ...]}`` into ``[(id, score, {arm: rank}), ...]`` best first."""
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for arm, ids in rankings.items():
        w = 1.0 if weights is None else weights.get(arm, 1.0)
        for rank, id_ in enumerate(ids, start=1):
            scores[id_] = scores.get(id_, 0.0) + w / (k + rank)
            ranks.setdefault(id_, {})[arm] = rank
    order = sorted(scores, key=lambda i: (-scores[i], min(ranks[i].values())))
    return [(i, scores[i], ranks[i]) for i in order]
