"""``longterm mcp --transport http``: callers are users by their bearer token, never by what
they send. No token or an unknown one is a 401; alice's token never reaches bob's memories
(not by tool arguments, not with alice's session id); every tool round-trips; hostile
arguments and a client that disconnects mid-call leave the server serving."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import httpx
import pytest

from tests.mcp.conftest import TOKEN_A, TOKEN_B, HttpServer, command, http, local, ok, refused, server_env, texts

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@contextmanager
def raw_session(url: str, token: str) -> Iterator[tuple[httpx.Client, dict[str, str]]]:
    """An initialized MCP session over plain HTTP: the client and the headers of its requests."""
    headers = HEADERS | {"Authorization": f"Bearer {token}"}
    with httpx.Client(timeout=30) as client:
        opened = client.post(url, json=INIT, headers=headers)
        assert opened.status_code == 200, opened.text
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        yield client, headers


def tool_call(tool: str, arguments: dict) -> str:
    """A tools/call request as ASCII JSON: a lone surrogate travels as a ``\\ud800`` escape
    (the SDK's own client refuses to send one)."""
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return json.dumps(body, ensure_ascii=True)


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer  x", "Bearer wrong-token-0123456789", f"Basic {TOKEN_A}", f"Bearer {TOKEN_A}x"],
)
def test_a_missing_or_unknown_token_is_401(http_server: HttpServer, authorization: str | None) -> None:
    headers = dict(HEADERS) | ({"Authorization": authorization} if authorization is not None else {})
    response = httpx.post(http_server.url, json=INIT, headers=headers, timeout=10)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert http_server.alive()


async def test_every_tool_round_trips(http_server: HttpServer) -> None:
    async with http(http_server.url, TOKEN_A) as client:
        saved = await ok(client, "save_memory", {"text": "Alice plays the cello on Sundays", "metadata": {"k": 1}})
        [hit] = (await ok(client, "search_memory", {"query": "cello"}))["memories"]
        assert hit["id"] == saved["id"] and hit["metadata"]["k"] == 1 and hit["score"] is not None
        listing = await ok(client, "list_memories", {"limit": 100})
        assert saved["id"] in {m["id"] for m in listing["memories"]}
        assert (await ok(client, "erase_session", {"session_id": "no-such-session"}))["deleted"] == 0
        assert (await ok(client, "delete_memory", {"memory_id": saved["id"]}))["deleted"] == 1
        assert texts(await ok(client, "search_memory", {"query": "cello"})) == []


async def test_alices_token_never_reaches_bobs_memories(http_server: HttpServer) -> None:
    async with http(http_server.url, TOKEN_B) as bob:
        bobs = await ok(bob, "save_memory", {"text": "Bob's locker code is 4711"})
    async with http(http_server.url, TOKEN_A) as alice:
        assert texts(await ok(alice, "search_memory", {"query": "locker code 4711"})) == []
        sneaky = await alice.call_tool("search_memory", {"query": "locker code", "user_id": "bob", "user": "bob"})
        assert "4711" not in json.dumps(sneaky.model_dump(mode="json"))
        assert "4711" not in json.dumps(await ok(alice, "list_memories", {"limit": 100}))
        await refused(alice, "delete_memory", {"memory_id": bobs["id"]})
        assert (await ok(alice, "erase_session", {"session_id": "_direct"}))["deleted"] == 0
    async with http(http_server.url, TOKEN_B) as bob:
        assert texts(await ok(bob, "search_memory", {"query": "locker code 4711"})) == ["Bob's locker code is 4711"]


def test_a_session_opened_by_bob_does_not_serve_alices_token(http_server: HttpServer) -> None:
    with httpx.Client(timeout=10) as client:
        opened = client.post(http_server.url, json=INIT, headers=HEADERS | {"Authorization": f"Bearer {TOKEN_B}"})
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "list_memories", "arguments": {"limit": 100}}
        headers = HEADERS | {"Authorization": f"Bearer {TOKEN_A}", "Mcp-Session-Id": session}
        stolen = client.post(http_server.url, json=call, headers=headers)
        assert stolen.status_code >= 400
        assert "locker" not in stolen.text


async def test_hostile_arguments_and_a_client_gone_mid_call_leave_the_server_serving(
    http_server: HttpServer,
) -> None:
    async with http(http_server.url, TOKEN_A) as client:
        assert "4000" in await refused(client, "search_memory", {"query": "q" * 10_000_000})
        await refused(client, "delete_memory", {"memory_id": "\x00"})
        await refused(client, "save_memory", {"text": "t" * 5_000_000})
        await refused(client, "search_memory", {"query": "x", "top_k": -3})

    # A lone surrogate is not JSON the SDK accepts: the message is refused whole (tools.py
    # refuses such ids too, see test_tools.py, for a transport that lets them through).
    for tool, arguments in [("delete_memory", {"memory_id": "\ud800"}), ("search_memory", {"query": "\ud83d"})]:
        with raw_session(http_server.url, TOKEN_A) as (client, headers):
            answer = client.post(http_server.url, content=tool_call(tool, arguments), headers=headers)
            assert answer.status_code == 400 and answer.json()["error"]["code"] == -32700

    # Clients that go away while their call is in flight: the answers have nowhere to go.
    with raw_session(http_server.url, TOKEN_A) as (client, headers):
        for _ in range(3):
            slow = tool_call("search_memory", {"query": "slow " * 2_000_000})
            with client.stream("POST", http_server.url, content=slow, headers=headers) as response:
                assert response.status_code == 200  # the call has started; leaving closes the connection
    with anyio.move_on_after(0.5):
        async with http(http_server.url, TOKEN_A) as client:
            await client.call_tool("search_memory", {"query": "slow " * 2_000_000})

    assert http_server.alive()
    async with http(http_server.url, TOKEN_A) as client:
        await ok(client, "save_memory", {"text": "Still serving after a client vanished"})
        assert texts(await ok(client, "search_memory", {"query": "still serving"})) == [
            "Still serving after a client vanished"
        ]


def _start(tmp_path, port: int) -> subprocess.Popen:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"user": "alice", "token": TOKEN_A}]}))
    args = ("--app", "app", "--transport", "http", "--port", str(port), "--tokens", str(tokens))
    return subprocess.Popen(
        command(*args, backend_args=local(tmp_path / "m.db")),
        env=server_env(tmp_path / "home"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_port_0_serves_on_the_port_it_prints(tmp_path) -> None:
    proc = _start(tmp_path, 0)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
        assert match and match.group(1) != "0", line
        with raw_session(match.group(0), TOKEN_A) as (client, headers):
            listed = client.post(
                match.group(0), json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers
            )
            assert "search_memory" in listed.text
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_busy_port_is_one_error_line(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = _start(tmp_path, taken.getsockname()[1])
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [err.strip().splitlines()[-1]], err
    assert "Traceback" not in err and "in use" in err.lower(), err


@pytest.mark.parametrize(
    "token", ["jetón-0123456789abcdef", "token with spaces 0123", " padded-0123456789abcd", "short"]
)
def test_a_token_no_http_header_can_carry_is_refused_when_the_file_loads(tmp_path, token: str) -> None:
    from longterm import ConfigurationError
    from longterm.mcp.auth import Tokens

    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": [{"user": "alice", "token": token}]}))
    with pytest.raises(ConfigurationError, match="visible ASCII"):
        Tokens.load(str(path))


async def test_each_token_reaches_its_user_in_the_index_that_holds_them(tmp_path) -> None:
    """alice was saved by ``LongTermMemory(app_name="app")`` (index ``app``), bob by
    ``LongTermMemory(index="default_app")`` (an index named on purpose): one server finds both,
    each in their own index, as ``longterm search`` does, and what bob saves lands beside his memories."""
    from longterm import LongTermMemory
    from tests.conftest import make_session

    store = tmp_path / "memory.db"
    bob = ({"index": "default_app"}, "bob", "Bob rows")
    for where, user, text in (({"app_name": "app"}, "alice", "Alice's cat is called Miso"), bob):
        memory = LongTermMemory(backend="local", backend_config={"path": str(store)}, **where)
        await memory.add_session_to_memory(make_session("s1", app="app", user=user, turns=[("user", text)]))
        await memory.close()
    server = HttpServer(tmp_path, backend_args=local(store))
    try:
        async with http(server.url, TOKEN_A) as alice:
            assert texts(await ok(alice, "search_memory", {"query": "cat Miso"})) == ["Alice's cat is called Miso"]
        async with http(server.url, TOKEN_B) as bob:
            assert texts(await ok(bob, "search_memory", {"query": "rows"})) == ["Bob rows"]
            await ok(bob, "save_memory", {"text": "Bob likes rivers"})
    finally:
        server.stop()
    memory = LongTermMemory(backend="local", backend_config={"path": str(store)})  # bob's index: default_app
    assert await memory.count(app_name="app", user_id="bob") == 2
    assert await memory.indices() == ["app", "default_app"]
    await memory.close()
