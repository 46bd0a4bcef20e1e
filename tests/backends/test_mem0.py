"""mem0: infer=True against a scripted OpenAI-compatible chat endpoint on 127.0.0.1 (it
stands in for the LLM, not for mem0); platform mode at the HTTP boundary only."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from longterm import InvalidInputError, LongTermMemory
from longterm.backends.mem0 import scope_user
from longterm.records import Scope
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

    def do_GET(self):  # noqa: N802
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")

    def do_DELETE(self):  # noqa: N802
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


def _chat(facts):
    def reply(body, path):
        return 200, {
            "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": json.dumps({"memory": [{"text": f} for f in facts]})}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }  # fmt: skip

    return reply


async def test_infer_true_stores_the_extracted_facts(tmp_path: Path, http_server: str):
    _Handler.routes[("POST", "/v1/chat/completions")] = _chat(["Allergic to peanuts", "Lives in Lisbon"])
    cfg = {"path": str(tmp_path / "m"), "infer": True, "config": {"llm": {"provider": "openai", "config": {
        "model": "scripted", "api_key": "test-key", "openai_base_url": f"{http_server}/v1"}}}}
    memory = LongTermMemory(backend="mem0", backend_config=cfg)
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
    memory = LongTermMemory(backend="mem0", backend_config={"path": str(tmp_path / "m"), "max_record_bytes": 100})
    with pytest.raises(InvalidInputError, match="over the mem0 backend's limit of 100"):
        await memory.add_session_to_memory(make_session(turns=[("user", "x" * 200)]))
    await memory.close()


def test_scope_digest_hides_special_ids():
    a = scope_user(Scope(app_name="app", user_id="*"))
    assert a.startswith("lt-") and "*" not in a
    assert a != scope_user(Scope(app_name="other", user_id="*"))


async def test_platform_mode_requests(tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch):
    store: list[dict] = []
    _Handler.routes[("GET", "/v1/ping/")] = lambda b, p: (200, {"status": "ok", "user_email": "t@example.com", "org_id": "o", "project_id": "p"})

    def add(body, path):
        store.append({"id": f"m{len(store)}", "memory": body["messages"][0]["content"], "metadata": body.get("metadata"), "user_id": body.get("user_id")})
        return 200, {"results": [{"id": store[-1]["id"], "memory": store[-1]["memory"], "event": "ADD"}]}

    def listing(body, path):
        flt = body.get("filters") or {}
        return 200, {"results": [m for m in store if m["user_id"] == flt.get("user_id")]}

    def search(body, path):
        flt = body.get("filters") or {}
        return 200, {"results": [{**m, "score": 0.9} for m in store if m["user_id"] == flt.get("user_id")]}

    _Handler.routes[("POST", "/v3/memories/add/")] = add
    _Handler.routes[("POST", "/v3/memories/search/")] = search
    _Handler.routes[("POST", "/v3/memories/")] = listing
    monkeypatch.setenv("LONGTERM_MEM0_API_KEY", "platform-key")
    memory = LongTermMemory(backend="mem0", backend_config={"host": http_server})
    await memory.add_session_to_memory(make_session(turns=[("user", "I play the oboe")]))
    adds = [x for x in _Handler.seen if x[1] == "/v3/memories/add/"]
    assert adds and adds[0][3].get("Authorization") == "Token platform-key"
    assert adds[0][2]["user_id"] == scope_user(Scope(app_name="app", user_id="u1"))
    assert adds[0][2]["metadata"]["record_id"]
    res = await memory.search_memory(app_name="app", user_id="u1", query="instrument")
    assert res.memories[0].content.parts[0].text == "I play the oboe"
    await memory.close()
