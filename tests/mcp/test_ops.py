"""``/metrics`` and ``/healthz`` of ``longterm mcp --transport http``: the save and search series
after a save and a search over MCP, labels without app, user or ids; health 200, 503 with Redis
stopped, 200 again once it is back; both open on loopback and behind a token elsewhere."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from longterm import LongTermMemory
from longterm.mcp.auth import Tokens, digest
from longterm.mcp.server import http_app
from tests.mcp.conftest import TOKEN_A, HttpServer, http, local, ok
from tests.services.redis_server import RedisServer


def base(server: HttpServer) -> str:
    return server.url.removesuffix("/mcp")


async def test_metrics_hold_the_save_and_search_series(http_server: HttpServer) -> None:
    async with http(http_server.url, TOKEN_A) as client:
        await ok(client, "save_memory", {"text": "Alice keeps her kayak at Zanderbrook pier"})
        await ok(client, "search_memory", {"query": "kayak"})
    scraped = httpx.get(f"{base(http_server)}/metrics", timeout=10)
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    saves = re.search(r'^longterm_saves_total\{[^}]*backend="local"[^}]*outcome="ok"[^}]*\} (\S+)$', text, re.M)
    assert saves and float(saves.group(1)) >= 1, text
    searches = re.search(r'^longterm_search_duration_seconds_count\{[^}]*backend="local"[^}]*\} (\S+)$', text, re.M)
    assert searches and float(searches.group(1)) >= 1, text
    assert 'outcome="kept"' in text
    for secret in ("alice", "bob", "Zanderbrook", "kayak", "_direct"):
        assert secret not in text


def test_health_is_200_then_503_with_redis_stopped(tmp_path: Path) -> None:
    redis = RedisServer()
    (tmp_path / "redis").mkdir()
    redis.start(tmp_path / "redis")
    config = json.dumps({"url": redis.url, "prefix": "ops:", "socket_timeout": 2})
    server = HttpServer(tmp_path, backend_args=("--backend", "redis", "--config", config))
    try:
        health = f"{base(server)}/healthz"
        up = httpx.get(health, timeout=10)
        assert up.status_code == 200 and up.json()["status"] == "ok"
        redis.stop()
        started = time.monotonic()
        down = httpx.get(health, timeout=15)
        assert down.status_code == 503 and down.json()["status"] == "unavailable", down.text
        assert "redis" in down.json()["problems"][0] and time.monotonic() - started < 8
        redis.restart()
        deadline = time.monotonic() + 20
        while (again := httpx.get(health, timeout=15)).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert again.status_code == 200
        assert server.alive()
    finally:
        server.stop()
        redis.stop()
    lines = server.stderr()
    assert lines.count("a store is unreachable") == 1 and lines.count("every store answers again") == 1


@pytest.mark.parametrize("path", ["/metrics", "/healthz"])
def test_a_token_is_needed_off_loopback_only(tmp_path: Path, path: str) -> None:
    tokens = Tokens({digest(TOKEN_A): "alice"})
    for host, needs_token in (("0.0.0.0", True), ("127.0.0.1", False)):
        memory = LongTermMemory(backend_config={"path": str(tmp_path / f"{host}.db")})
        with TestClient(http_app(memory, app_name="app", tokens=tokens, host=host)) as client:
            bare = client.get(path)
            assert bare.status_code == (401 if needs_token else 200), bare.text
            wrong = client.get(path, headers={"Authorization": "Bearer not-a-token-of-the-file"})
            assert wrong.status_code == (401 if needs_token else 200)
            good = client.get(path, headers={"Authorization": f"Bearer {TOKEN_A}"})
            assert good.status_code == 200


def test_metrics_hold_every_counter_at_zero_before_any_traffic(tmp_path: Path) -> None:
    """A scraper sees the series from the server's start (it saw an empty body until the first
    save or search, so no rate and no alert could be written on them)."""
    server = HttpServer(tmp_path, backend_args=local(tmp_path / "memory.db"))
    try:
        text = httpx.get(f"{base(server)}/metrics", timeout=10).text
    finally:
        server.stop()
    for outcome in ("ok", "error"):
        assert re.search(rf'^longterm_saves_total\{{[^}}]*outcome="{outcome}"[^}}]*\}} 0\.0$', text, re.M), text
    for outcome in ("kept", "dropped", "refused"):
        assert re.search(rf'^longterm_events_total\{{[^}}]*outcome="{outcome}"[^}}]*\}} 0\.0$', text, re.M), text
    assert re.search(r'^longterm_erased_total\{[^}]*backend="local"[^}]*\} 0\.0$', text, re.M), text
