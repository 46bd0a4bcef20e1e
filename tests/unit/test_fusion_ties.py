"""Fusion's order among equal scores: by id, whatever order the arms listed them in.

A Redis KNN or BM25 reply lists equal scores in no fixed order, so a cut at top_k among ties
must not follow it: the same store and query give the same hits read in one call or two.
"""

from __future__ import annotations

import pytest

from longterm.retrieval.fusion import fuse


@pytest.mark.parametrize("method", ["convex", "rrf"])
def test_equal_scores_come_out_in_one_order_whatever_order_the_arms_gave(method: str) -> None:
    text = [("c", 2.0), ("a", 1.0), ("b", 1.0)]
    near = [("x", 0.9), ("z", 0.5), ("y", 0.5)]
    flipped_text = [("c", 2.0), ("b", 1.0), ("a", 1.0)]
    flipped_near = [("x", 0.9), ("y", 0.5), ("z", 0.5)]
    if method == "rrf":  # ranks differ when the order does, so only give ties rrf sees as ties
        text, flipped_text = [("a", 1.0)], [("a", 1.0)]
        near, flipped_near = [("b", 1.0)], [("b", 1.0)]
        one = fuse(method, {"fulltext": text, "vector": near})
        two = fuse(method, {"vector": near, "fulltext": text})
    else:
        one = fuse(method, {"fulltext": text, "vector": near})
        two = fuse(method, {"fulltext": flipped_text, "vector": flipped_near})
    assert [i for i, _, _ in one] == [i for i, _, _ in two]
    if method == "convex":
        assert [i for i, _, _ in one][:3] == ["c", "x", "a"]  # c 0.7, x 0.3, then a and b tie at 0
