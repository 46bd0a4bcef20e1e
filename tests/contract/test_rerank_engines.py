"""The reranker hook end to end on local and Redis: a scripted callable orders a search's first hits,
the calibrated score stays the engine-independent one, and a failing reranker leaves the fused
order, saying so (retrieval/rerank.py; tests/unit/test_rerank.py has the rest)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from longterm import LongTermMemory

#: Each holds a different share of the question's words, so the fused order has no ties: with
#: ties it was the engine's (Redis once gave two orders for one question in one run).
TEXTS = ["Kyoto hotel breakfast at seven", "the Kyoto hotel is booked", "Osaka after the hotel"]
QUERY = "Kyoto hotel breakfast"


def osaka_first(query: str, texts: list[str]) -> list[float]:
    return [1.0 if "Osaka" in t else 0.0 for t in texts]


def broken(query: str, texts: list[str]) -> list[float]:
    raise RuntimeError("reranker down")


@pytest.mark.parametrize("provider_id", ["local", "redis"])
async def test_a_reranker_orders_the_hits_and_keeps_the_score(open_memory: Callable[..., LongTermMemory]) -> None:
    m = open_memory(app_name="rr")
    for i, text in enumerate(TEXTS):
        await m.add([text], user_id="u", session_id=f"s{i}")
    plain = await m.search(QUERY, user_id="u", top_k=3)
    m.reranker = osaka_first
    ranked = await m.search(QUERY, user_id="u", top_k=3)
    assert ranked[0].text.startswith("Osaka") and ranked[0].arms["rerank"] == 1.0
    assert {x.text: x.score for x in ranked} == {x.text: x.score for x in plain}
    m.reranker = broken
    kept = await m.search(QUERY, user_id="u", top_k=3)
    assert [x.text for x in kept] == [x.text for x in plain]
    assert all(x.arms.get("rerank_failed") == 1.0 for x in kept)
