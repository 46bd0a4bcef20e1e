"""``longterm mcp``: serve the memory to MCP clients over stdio or streamable HTTP.

The seam: a click command the group adds (``longterm.cli``). It checks the options, then
hands ``longterm.mcp.server`` a factory of memories on the store the root options name
(``opening.factory``) and the index given; the server finds each user's index by
``locate.RULE`` and keeps its memories open while it serves.

Why the scope is the server's and never a tool argument: over stdio one user (``--user``),
over HTTP the user the caller's bearer token names, so no caller can read another's memories.
"""

from __future__ import annotations

import asyncio

import click

from .opening import JSONObject, factory, given_index, name_or_json


@click.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: one user, for an assistant that starts this command; http: streamable HTTP, users by token.",
)
@click.option("--app", "app_name", envvar="LONGTERM_APP", required=True, help="app_name of every memory served.")
@click.option("--user", "user_id", envvar="LONGTERM_USER", default=None, help="The user served over stdio.")
@click.option(
    "--tokens",
    "tokens_file",
    envvar="LONGTERM_MCP_TOKENS",
    type=click.Path(dir_okay=False),
    default=None,
    help="Over HTTP: JSON file mapping bearer tokens to users (see docs/mcp.md).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Over HTTP: address to bind.")
@click.option(
    "--port", default=8766, show_default=True, type=click.IntRange(0, 65535), help="Over HTTP: port (ui's is 8765)."
)
@click.option("--embedder", default=None, help="Embedder for hybrid search: a name, or JSON inline or as @file.json.")
@click.pass_context
def mcp(
    ctx: click.Context,
    transport: str,
    app_name: str,
    user_id: str | None,
    tokens_file: str | None,
    host: str,
    port: int,
    embedder: str | None,
) -> None:
    """Serve the memory to MCP clients (assistants, editors, agents): search, save, delete, erase, list.

    The scope is the server's: over stdio --user (or LONGTERM_USER), over HTTP the user the
    caller's bearer token names in the --tokens file; never a tool argument. Each user is
    served from the index of the store holding their memories of --app, as every command finds
    it (see `longterm --help`): without --index, the one index holding them, else the index
    named after the app.
    """
    from ..errors import require
    from ..records import check_id

    require("mcp.server.mcpserver", package="mcp", extra="mcp", purpose="longterm mcp")
    from ..mcp.auth import Tokens
    from ..mcp.server import memories_for, serve_http, serve_stdio

    check_id("--app", app_name)
    overrides: JSONObject = {"embedder": name_or_json("--embedder", embedder)} if embedder else {}
    open_index, given = factory(ctx, **overrides), given_index(ctx)
    typed = click.core.ParameterSource.COMMANDLINE
    if transport == "stdio":
        if ctx.get_parameter_source("tokens_file") == typed:
            raise click.UsageError("--tokens is for --transport http; over stdio the user is --user.")
        if not user_id:
            raise click.UsageError("over stdio, name the user whose memories are served: --user or LONGTERM_USER.")
        check_id("--user", user_id)
        user: str = user_id

        async def stdio() -> None:
            memories = await memories_for(open_index, app_name=app_name, users=[user], index=given)
            await serve_stdio(memories[user], app_name=app_name, user_id=user)

        asyncio.run(stdio())
        return
    if ctx.get_parameter_source("user_id") == typed:
        raise click.UsageError("over HTTP each caller's token names its user (--tokens); drop --user.")
    if tokens_file is None:
        raise click.UsageError("over HTTP, pass --tokens FILE (or LONGTERM_MCP_TOKENS): it maps tokens to users.")
    tokens = Tokens.load(tokens_file)

    async def http() -> None:
        memories = await memories_for(open_index, app_name=app_name, users=tokens.users, index=given)
        await serve_http(memories, app_name=app_name, tokens=tokens, host=host, port=port)

    asyncio.run(http())
