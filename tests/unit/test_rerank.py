"""The reranker hook (retrieval/rerank.py): a scripted callable, an async one, a local HTTP fake of
the common ``/rerank`` shape; a failing, slow or wrong reranker degrades to the fused order within
its timeout, and says so; the calibrated score never changes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory
from longterm.errors import ConfigurationError
from longterm.records import Hit, MemoryRecord, record_id
from longterm.retrieval.rerank import Reranker, reranked, resolve_reranker

TEXTS = [
    "We booked the hotel in Kyoto for May",
    "The Kyoto hotel has a garden",
    "Osaka castle after the Kyoto hotel",
    "Kyoto hotel breakfast is at seven",
    "a Kyoto hotel near the station",
    "I paid the Kyoto hotel deposit",
]
QUERY = "Kyoto hotel"


def osaka_first(query: str, texts: list[str]) -> list[float]:
    """Scripted: the turn naming Osaka is the most relevant, then by length (longest first)."""
    return [10.0 if "Osaka" in t else len(t) / 100 for t in texts]


def memory(tmp_path: Path, **kw: Any) -> LongTermMemory:
    m = LongTermMemory(app_name="t", backend_config={"path": str(tmp_path / "m.db")}, **kw)
    for i, text in enumerate(
        TEXTS
    ):  # a session each: no neighbour lends (retrieval.context), the order is the reranker's
        m.add_sync([text], user_id="u", session_id=f"s{i}")
    return m


def texts(m: LongTermMemory, **kw: Any) -> list[Any]:
    return m.search_sync(QUERY, user_id="u", **kw)


def test_a_callable_orders_the_first_hits_and_the_score_stays_calibrated(tmp_path: Path) -> None:
    with memory(tmp_path) as m:
        plain = {x.text: x.score for x in texts(m, top_k=6)}
        m.reranker = osaka_first
        out = texts(m, top_k=6)
    assert out[0].text.startswith("Osaka") and out[0].arms["rerank"] == 10.0
    assert [x.text for x in out[1:]] == sorted((x.text for x in out[1:]), key=len, reverse=True)
    assert {x.text: x.score for x in out} == plain  # the reranker moves the order, never the score
    assert all("fulltext" in x.arms and "rerank" in x.arms for x in out)


def test_the_reranker_sees_rerank_top_n_hits_and_at_least_top_k(tmp_path: Path) -> None:
    seen: list[int] = []

    def count(query: str, texts: list[str]) -> list[float]:
        seen.append(len(texts))
        return osaka_first(query, texts)

    with memory(tmp_path, reranker=count, rerank_top_n=6) as m:
        assert texts(m, top_k=1)[0].text.startswith("Osaka")  # fetched 6 to return 1
        m.rerank_top_n = 2
        texts(m, top_k=4)
    assert seen == [6, 4]


def test_an_async_callable_and_an_object_with_an_async_call(tmp_path: Path) -> None:
    async def scores(query: str, texts: list[str]) -> list[float]:
        await asyncio.sleep(0)
        return osaka_first(query, texts)

    class Model:
        async def __call__(self, query: str, texts: list[str]) -> list[float]:
            return osaka_first(query, texts)

    with memory(tmp_path, reranker=scores) as m:
        assert texts(m)[0].text.startswith("Osaka")
        m.reranker = Model()
        assert texts(m)[0].text.startswith("Osaka")


class FakeRerank(BaseHTTPRequestHandler):
    """``POST /rerank`` as Cohere, Jina and vLLM answer it; ``/tei`` as TEI (a bare list, ``score``);
    ``/slow`` answers after 3 s; ``/broken`` with a 500."""

    seen: list[tuple[str, dict[str, Any], str]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.path, body, self.headers.get("Authorization", "")))
        scores = osaka_first(body["query"], body["documents"])
        if self.path == "/slow":
            time.sleep(3)
        if self.path == "/broken":
            self.send_response(500)
            self.end_headers()
            return
        ranked = sorted(range(len(scores)), key=lambda i: -scores[i])[: body["top_n"]]
        if self.path == "/tei":
            answer: Any = [{"index": i, "score": scores[i]} for i in ranked]
        else:
            answer = {"results": [{"index": i, "relevance_score": scores[i]} for i in ranked]}
        data = json.dumps(answer).encode()
        if self.path == "/slow":
            return  # the client is gone
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except BrokenPipeError:  # /slow: the client gave up waiting, as it should
            pass

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeRerank)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_an_http_endpoint_by_url_and_by_dict(tmp_path: Path, server: str) -> None:
    FakeRerank.seen.clear()
    with memory(tmp_path, reranker=f"{server}/rerank") as m:
        assert texts(m)[0].text.startswith("Osaka")
        m.reranker = {"url": f"{server}/tei", "model": "bge-reranker-v2-m3", "api_key": "k"}
        best = texts(m)[0]
    assert best.text.startswith("Osaka") and best.arms["rerank"] == 10.0
    (path, body, auth), (path2, body2, auth2) = FakeRerank.seen
    assert path == "/rerank" and body["query"] == QUERY and body["top_n"] == len(body["documents"]) == 6
    assert "model" not in body and auth == ""
    assert path2 == "/tei" and body2["model"] == "bge-reranker-v2-m3" and auth2 == "Bearer k"


def fails(query: str, texts: list[str]) -> list[float]:
    raise RuntimeError("model not loaded")


def slow(query: str, texts: list[str]) -> list[float]:
    time.sleep(3)
    return osaka_first(query, texts)


def wrong(query: str, texts: list[str]) -> list[float]:
    return [1.0]


def nan(query: str, texts: list[str]) -> list[float]:
    return [float("nan")] * len(texts)


@pytest.mark.parametrize("how", ["fails", "slow", "wrong", "nan", "http-slow", "http-500", "http-refused"])
def test_a_failing_or_late_reranker_keeps_the_fused_order_within_its_timeout(
    tmp_path: Path, server: str, how: str
) -> None:
    dead = "http://127.0.0.1:9/rerank"  # the discard port: nothing listens
    spec = {
        "fails": fails,
        "slow": slow,
        "wrong": wrong,
        "nan": nan,
        "http-slow": f"{server}/slow",
        "http-500": f"{server}/broken",
        "http-refused": dead,
    }[how]
    with memory(tmp_path, timeout=0.5) as m:
        plain = texts(m, top_k=6)
        m.reranker = spec
        started = time.monotonic()
        out = texts(m, top_k=6)
        took = time.monotonic() - started
    assert took < 2.0  # the reranker's timeout is the memory's 0.5 s
    assert [(x.text, x.score) for x in out] == [(x.text, x.score) for x in plain]
    assert all(x.arms.get("rerank_failed") == 1.0 and "rerank" not in x.arms for x in out)


def test_the_failure_is_said_in_each_hit_metadata(tmp_path: Path) -> None:
    with memory(tmp_path, reranker=fails) as m:
        res = m.search_memory_sync(app_name="t", user_id="u", query=QUERY)
    meta = res.memories[0].custom_metadata
    assert meta["arms"]["rerank_failed"] == 1.0 and "model not loaded" in meta["degraded"]


def test_min_score_keeps_the_same_memories_with_a_reranker(tmp_path: Path) -> None:
    with memory(tmp_path) as m:
        plain = {x.text for x in texts(m, top_k=6, min_score=0.9)}
        m.reranker = osaka_first
        assert {x.text for x in texts(m, top_k=6, min_score=0.9)} == plain


def rec(i: int, text: str) -> MemoryRecord:
    return MemoryRecord(
        id=record_id("a", "u", "s", str(i)), app_name="a", user_id="u", session_id="s", event_id=str(i), text=text
    )


async def test_only_the_first_n_are_reranked_and_the_rest_follow_them() -> None:
    hits = [Hit(record=rec(i, t), score=s) for i, (t, s) in enumerate([("a", 0.9), ("b", 0.5), ("c", 0.8)])]
    out, order = await reranked(Reranker(lambda q, t: [0.0, 1.0]), "q", hits, 2)
    assert [h.record.text for h in out] == ["b", "a", "c"] and [h.score for h in out] == [0.5, 0.9, 0.8]
    assert order is not None and [order[h.record.id] for h in out] == [0.9, 0.5, 0.5]
    assert "rerank" not in out[2].arms
    same, none = await reranked(None, "q", hits, 2)
    assert same == hits and none is None


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="reranker"):
        LongTermMemory(reranker=42)
    with pytest.raises(ConfigurationError, match="http"):
        LongTermMemory(reranker="ftp://example.org/rerank")
    with pytest.raises(ConfigurationError, match="url"):
        LongTermMemory(reranker={"model": "m"})
    with pytest.raises(ConfigurationError, match="rerank_top_n"):
        LongTermMemory(rerank_top_n=0)
    with pytest.raises(ConfigurationError, match="timeout"):
        resolve_reranker(osaka_first, timeout=-1)
    assert resolve_reranker(osaka_first, timeout=2).timeout == 2.0  # type: ignore[union-attr]
    assert resolve_reranker({"url": "http://127.0.0.1:1/rerank", "timeout": 4}, timeout=2).timeout == 4.0  # type: ignore[union-attr]
