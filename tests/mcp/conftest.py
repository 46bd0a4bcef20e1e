"""``longterm mcp`` as a user runs it: a subprocess, driven by the MCP SDK's own client.

``stdio(...)`` starts the command with the SDK's stdio transport (its stderr goes to a file
the test can read); ``HttpServer`` starts ``--transport http`` on a free 127.0.0.1 port
and ``http(url, token)`` connects the SDK's streamable HTTP client with a bearer token.
Every call is bounded (``CALL_SECONDS``): a server that hangs fails the test. ``PipeLines``
(``tests.pipes``) reads a subprocess's answers line by line, each within a deadline, when a test
speaks raw JSON-RPC to the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from longterm.mcp.auth import digest
from tests.services.redis_server import free_port

#: How long any one tool call may take before the test fails as a hang.
CALL_SECONDS = 30
TOKEN_A = "token-of-alice-0123456789"
TOKEN_B = "token-of-bob-9876543210xx"


def server_env(home: Path) -> dict[str, str]:
    """The server's environment: its own LONGTERM_HOME, no LONGTERM_* from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")}
    return {**env, "LONGTERM_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def command(*args: str, backend_args: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "longterm.cli", *backend_args, "mcp", *args]


def local(path: Path) -> tuple[str, ...]:
    """Global options for a local store at ``path``."""
    return ("--backend", "local", "--config", json.dumps({"path": str(path)}))


@asynccontextmanager
async def stdio(tmp: Path, *args: str, backend_args: tuple[str, ...] = ()) -> AsyncIterator[Client]:
    """A client of ``longterm [backend_args] mcp [args]`` over stdio."""
    cmd = command(*args, backend_args=backend_args)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=server_env(tmp / "home"), cwd=str(tmp))
    with open(tmp / "server-stderr.log", "a", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


@asynccontextmanager
async def http(url: str, token: str) -> AsyncIterator[Client]:
    """A client of the HTTP server at ``url``, sending ``token`` as its bearer token."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as transport,
        Client(streamable_http_client(url, http_client=transport)) as client,
    ):
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
    with anyio.fail_after(CALL_SECONDS):
        return await client.call_tool(tool, arguments or {})


async def ok(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """The structured result of a tool call that must succeed."""
    result = await call(client, tool, arguments)
    assert not result.is_error, f"{tool} failed: {result.content[0].text}"
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> str:
    """The message of a tool call that must end as a tool error (not an internal one)."""
    result = await call(client, tool, arguments)
    assert result.is_error, f"{tool} should have failed, returned {result.structured_content}"
    message = result.content[0].text
    assert "internal error" not in message, message
    return message


def texts(result: dict[str, Any]) -> list[str]:
    return [m["text"] for m in result["memories"]]


class HttpServer:
    """``longterm mcp --transport http`` on a free port; the token file holds alice's token and
    the digest of bob's."""

    def __init__(self, tmp: Path, *, backend_args: tuple[str, ...]) -> None:
        self.tmp, self.port = tmp, free_port()
        tokens = tmp / "tokens.json"
        tokens.write_text(
            json.dumps(
                {"tokens": [{"user": "alice", "token": TOKEN_A}, {"user": "bob", "token_sha256": digest(TOKEN_B)}]}
            )
        )
        args = ("--app", "app", "--transport", "http", "--port", str(self.port), "--tokens", str(tokens))
        self.log = open(tmp / "server-stderr.log", "wb")  # noqa: SIM115  (closed in stop)
        self.proc = subprocess.Popen(
            command(*args, backend_args=backend_args),
            env=server_env(tmp / "home"),
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"server exited: {self.stderr()}"
            try:
                httpx.get(self.url, timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError(f"longterm mcp did not answer on {self.url} within 60 s: {self.stderr()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stderr(self) -> str:
        return (self.tmp / "server-stderr.log").read_text(errors="replace")[-3000:]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    tmp = tmp_path_factory.mktemp("mcp-http")
    server = HttpServer(tmp, backend_args=local(tmp / "memory.db"))
    yield server
    server.stop()
