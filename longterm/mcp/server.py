"""``longterm mcp``: the memory tools served over stdio or streamable HTTP.

The seam: ``serve_stdio(memory, app_name=, user_id=)`` serves one user's tools on this
process's stdin/stdout (an assistant starts it as a subprocess); ``serve_http(memories,
app_name=, tokens=, host=, port=)`` serves every user a token file names, on
``http://host:port/mcp``, 127.0.0.1 unless told otherwise, with ``/metrics`` (Prometheus
text) and ``/healthz`` beside it (``ops``). ``memories_for(memory_factory,
app_name=, users=)`` opens each user's memory on the index of the store holding that user's
memories (``longterm.locate``: the rule every CLI command follows), so the server finds what
the application and ``longterm search`` find.

Why one MCP server per user over HTTP: the gate in front checks the caller's bearer token
on every request (401 when it is missing or unknown) and hands the request to the server
built for that token's user. Each user's server has its own tools, bound in code to that
user, and its own sessions, so neither a tool argument nor another user's session id can
reach a memory that is not the caller's. Users on one index share one ``LongTermMemory`` (one
store connection); nothing on the HTTP side is bound to a user but the server it reaches.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._net import bind
from ..locate import MemoryFactory, locate_indices
from ..records import bound_depth, repair_tree
from . import ops
from .auth import Tokens
from .tools import build_server

if TYPE_CHECKING:
    from ..ports import MemoryPort

#: Levels a JSON-RPC message over stdio keeps (its envelope takes 4): deeper arguments arrive as
#: their JSON text and get a tool error, where pydantic (200 levels) made the SDK drop the line.
MESSAGE_DEPTH = 64
#: Path of the MCP endpoint over HTTP.
ENDPOINT = "/mcp"
#: Addresses that only this machine reaches.
LOOPBACK = ops.LOOPBACK
#: Largest HTTP request body (bytes): far above any tool's limits, so that a 10 MB query
#: reaches the tool and is refused with a tool error that says why, not a bare HTTP 413.
MAX_BODY_BYTES = 16 * 1024 * 1024


def _repaired(line: str) -> str:
    """One stdin line as text the SDK reads: lone surrogates (``"\\ud800"``, valid JSON) replaced and
    nesting bounded, so a hostile argument reaches the tool and gets a tool error. Left as it is
    when it is no JSON: the SDK reports that."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return line
    return json.dumps(bound_depth(repair_tree(message), MESSAGE_DEPTH), ensure_ascii=False) + "\n"


class _RepairedStdin:
    """This process's stdin as the SDK's stdio transport iterates it, each line ``_repaired``.

    Why: the SDK validates each line with pydantic, which refuses a lone surrogate or a message
    nested past 200 levels, and drops such a line with a debug log: the client then waits for
    an answer that never comes (over HTTP the same request gets a 400)."""

    def __init__(self) -> None:
        self._lines = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            yield _repaired(line)


async def memories_for(
    memory_factory: MemoryFactory, *, app_name: str, users: Sequence[str], index: str | None = None
) -> dict[str, MemoryPort]:
    """Each user's memory, on the index holding their memories of ``app_name`` (``index`` when
    given; ``locate.RULE``); users on one index share one memory. Raises, opening nothing, when
    several indices hold one user."""
    located = await locate_indices(memory_factory, [(app_name, u) for u in users], index=index)
    opened: dict[str, MemoryPort] = {}
    for name in dict.fromkeys(located.values()):
        opened[name] = memory_factory(name)
    return {u: opened[located[(app_name, u)]] for u in users}


async def serve_stdio(memory: MemoryPort, *, app_name: str, user_id: str) -> None:
    """Serve ``user_id``'s memory tools on stdin/stdout until the client closes them."""
    server = build_server(memory, app_name=app_name, user_id=user_id)
    try:
        async with stdio_server(stdin=_RepairedStdin()) as (read, write):  # type: ignore[arg-type]
            # What MCPServer.run_stdio_async does, with our stdin (mcp 2.x, pinned below 3): the SDK
            # runs an MCPServer on given streams only through its low-level server, which it keeps
            # private (run_stdio_async takes no streams; middleware sees a line after it was dropped).
            lowlevel = server._lowlevel_server
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
    finally:
        await memory.close()


class _Gate:
    """The ASGI endpoint: the caller's token chooses the user's server, or the answer is 401."""

    def __init__(self, tokens: Tokens, servers: dict[str, MCPServer]) -> None:
        self.tokens, self.servers = tokens, servers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        user = self.tokens.user(headers.get("authorization"))
        if user is None:
            refusal = JSONResponse(
                {"error": "invalid_token", "error_description": "send Authorization: Bearer <your token>"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="longterm", error="invalid_token"'},
            )
            await refusal(scope, receive, send)
            return
        await self.servers[user].session_manager.handle_request(scope, receive, send)


def _one_each(memories: MemoryPort | Mapping[str, MemoryPort], users: Sequence[str]) -> dict[str, MemoryPort]:
    if isinstance(memories, Mapping):
        return {u: memories[u] for u in users}
    return dict.fromkeys(users, memories)


def http_app(
    memories: MemoryPort | Mapping[str, MemoryPort],
    *,
    app_name: str,
    tokens: Tokens,
    host: str = "127.0.0.1",
) -> Starlette:
    """The ASGI app of ``serve_http``: one MCP server per user the token file names, on that
    user's memory (``memories``: one for all, or one per user, as ``memories_for`` gives), and
    ``/metrics`` and ``/healthz`` (``ops``: open on loopback, behind a token elsewhere)."""
    per_user = _one_each(memories, tokens.users)
    servers = {u: build_server(per_user[u], app_name=app_name, user_id=u) for u in tokens.users}
    for server in servers.values():
        server.streamable_http_app(host=host, max_request_body_size=MAX_BODY_BYTES)  # makes its session manager

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            async with contextlib.AsyncExitStack() as stack:
                for server in servers.values():
                    await stack.enter_async_context(server.session_manager.run())
                yield
        finally:
            for memory in {id(m): m for m in per_user.values()}.values():
                await memory.close()

    operations = ops.routes(per_user, app_name=app_name, tokens=tokens, host=host)
    return Starlette(routes=[Route(ENDPOINT, endpoint=_Gate(tokens, servers)), *operations], lifespan=lifespan)


async def serve_http(
    memories: MemoryPort | Mapping[str, MemoryPort],
    *,
    app_name: str,
    tokens: Tokens,
    host: str = "127.0.0.1",
    port: int = 8766,
) -> None:
    """Serve the memory tools on ``http://host:port/mcp`` until interrupted."""
    import uvicorn

    app = http_app(memories, app_name=app_name, tokens=tokens, host=host)
    # Bound here, not by uvicorn: a busy port is an OSError the CLI reports in one line, and
    # ``--port 0`` prints the port the system chose.
    sock = bind(host, port)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(f"longterm mcp: serving {len(tokens.users)} users on http://{host}:{port}{ENDPOINT}", file=sys.stderr)
    if host not in LOOPBACK:
        print(
            "longterm mcp: not a loopback address; put TLS in front (tokens travel in every request)", file=sys.stderr
        )
    await server.serve(sockets=[sock])
