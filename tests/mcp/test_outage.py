"""A backend outage mid-session: ``longterm mcp`` on a real Redis Stack (private, on its own
port) keeps its stdio session while Redis is killed: every tool call is a tool error that
says what failed, none hangs, and once Redis is back (restarted empty) the same session
saves and finds memories again."""

from __future__ import annotations

import json
from pathlib import Path

from tests.mcp.conftest import ok, refused, stdio, texts
from tests.services.redis_server import RedisServer


async def test_a_redis_outage_gives_tool_errors_then_the_server_recovers(tmp_path: Path) -> None:
    redis = RedisServer()
    redis.start(tmp_path)
    try:
        config = {"url": redis.url, "socket_timeout": 1}
        backend = ("--backend", "redis", "--config", json.dumps(config))
        async with stdio(tmp_path, "--app", "app", "--user", "alice", backend_args=backend) as client:
            await ok(client, "save_memory", {"text": "The user's bike is a blue Gazelle"})
            assert texts(await ok(client, "search_memory", {"query": "bike"})) == ["The user's bike is a blue Gazelle"]

            redis.kill()
            for tool, arguments in [
                ("search_memory", {"query": "bike"}),
                ("save_memory", {"text": "Saved while Redis was down"}),
                ("list_memories", {}),
                ("erase_session", {"session_id": "_direct"}),
            ]:
                message = await refused(client, tool, arguments)
                assert "redis" in message.lower(), message

            redis.restart()  # empty: nothing was persisted
            assert texts(await ok(client, "search_memory", {"query": "bike"})) == []
            await ok(client, "save_memory", {"text": "Saved after Redis came back"})
            assert texts(await ok(client, "search_memory", {"query": "came back"})) == ["Saved after Redis came back"]
    finally:
        redis.stop()
