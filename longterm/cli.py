"""The ``longterm`` command: demo, import, search, stats, export, delete, migrate, mcp.

The seam: a thin click layer over ``LongTermMemory``; every command takes the same
``--backend``/``--config``/``--index`` options as the facade, so what works here works in
code.

Why every failure is one line: an operator reads ``error: <what failed, what to do>`` on
stderr and exit status 1, never a traceback. ``LongTermMemoryError`` and ``OSError`` say
it themselves; anything else is our bug and says ``internal error: ... (please report)``.
Click's own usage errors keep click's message and exit status. Values that come from the
user or the store (ids, memory text, paths) are printed as plain text, never as markup.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .errors import ConfigurationError, InvalidInputError, LongTermMemoryError

console = Console()
err_console = Console(stderr=True, soft_wrap=True, highlight=False)  # soft_wrap: one line, however long


#: Control characters (but tab and newline) shown escaped: stored text or an id holding ESC
#: sequences must not drive the terminal that prints it.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}


def _safe(text: str) -> str:
    """``text`` fit for a terminal: control characters and lone surrogates shown escaped."""
    return text.translate(_CONTROLS).encode("utf-8", "backslashreplace").decode("utf-8")


def _fail(message: str) -> NoReturn:
    """Print ``error: message`` as one line on stderr and exit 1."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", _safe(" ".join(message.split()))))
    raise SystemExit(1)


def _os_error(exc: OSError) -> str:
    if exc.strerror and exc.filename is not None:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc) or type(exc).__name__


class _Commands(click.Group):
    """The ``longterm`` group: whatever a command raises leaves as one ``error:`` line."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click prints these itself
        except LongTermMemoryError as exc:
            _fail(str(exc))
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise  # output piped into `head`: click leaves quietly
            _fail(_os_error(exc))
        except Exception as exc:
            _fail(f"internal error: {type(exc).__name__}: {exc} (please report)")


def _json_object(option: str, value: str | None) -> dict[str, Any]:
    """The JSON object given to ``option`` inline or as ``@file.json``; ``{}`` when none."""
    if not value:
        return {}
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"{option}: cannot read {value[1:]}: {exc.strerror or exc}.") from None
        except UnicodeDecodeError as exc:
            raise ConfigurationError(f"{option}: cannot read {value[1:]}: not UTF-8 ({exc.reason}).") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{option} is not JSON ({exc}); pass a JSON object or @file.json.") from None
    except RecursionError:
        where = value[1:] if value.startswith("@") else "the value"
        raise ConfigurationError(
            f"{option}: {where} is JSON nested too deeply to read; pass a JSON object of settings."
        ) from None
    if not isinstance(obj, dict):
        raise ConfigurationError(f"{option} must be a JSON object, not {type(obj).__name__}.")
    return obj


def _memory(ctx: click.Context, **overrides: Any):
    from .memory import LongTermMemory

    opts = ctx.obj
    cfg = dict(opts["config"])
    cfg.update(overrides)
    kwargs: dict[str, Any] = {"backend_config": cfg}
    if opts["backend"]:
        kwargs["backend"] = opts["backend"]
    if opts["index"]:
        kwargs["index"] = opts["index"]
    return LongTermMemory(**kwargs)


def _text(memory: Any) -> str:
    return " ".join(p.text for p in memory.content.parts if getattr(p, "text", None))


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--backend", envvar="LONGTERM_BACKEND", default=None, help="Backend name (default: local).")
@click.option("--config", "config", default=None, help="backend_config as JSON, or @file.json.")
@click.option("--index", default=None, help="Index / namespace inside the backend.")
@click.version_option(package_name="longterm")
@click.pass_context
def cli(ctx: click.Context, backend: str | None, config: str | None, index: str | None) -> None:
    """Long-term memory for AI agents."""
    ctx.obj = {"backend": backend, "config": _json_object("--config", config), "index": index}


@cli.command()
@click.option(
    "--path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Keep the demo store here (default: a temporary file).",
)
@click.pass_context
def demo(ctx: click.Context, path: str | None) -> None:
    """Save two conversations, then recall from them in a new session (offline)."""
    from . import demo as demo_mod

    def emit(kind: str, payload: Any) -> None:
        if kind == "saved":
            console.print(
                f"[green]saved[/] {payload.saved} of {payload.new_events} new events from {escape(payload.session_id)}"
            )
        else:
            question, memories = payload
            console.print(f"\n[bold cyan]Q:[/] {escape(question)}")
            if not memories:
                console.print("   [dim](nothing recalled)[/]")
            for m in memories:
                score, when = m.custom_metadata["score"], m.timestamp[:10]
                console.print(f"   [yellow]{score:.2f}[/] {escape(_text(m))}  [dim]({when})[/]", highlight=False)

    async def go(store: str) -> None:
        overrides = {} if ctx.obj["backend"] not in (None, "local") else {"path": store}
        memory = _memory(ctx, **overrides)
        console.print(f"[bold]longterm demo[/] on backend [magenta]{escape(memory.backend_name)}[/]")
        try:
            await demo_mod.run(memory, emit)
            console.print(f"\n[dim]{escape(demo_mod.FACTS_HINT)}[/]")
        finally:
            await memory.close()

    if path:
        asyncio.run(go(path))
    else:
        with tempfile.TemporaryDirectory(prefix="longterm-demo-") as tmp:
            asyncio.run(go(str(Path(tmp) / "memory.db")))


@cli.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--app", "app_name", default=None, help="app_name for files that name none.")
@click.option("--user", "user_id", default=None, help="user_id for files that name none.")
@click.option(
    "--policy",
    default="default",
    show_default=True,
    help="Auto-save preset (default, all, custom), or a JSON policy inline or as @file.json.",
)
@click.pass_context
def import_(ctx: click.Context, files: tuple[str, ...], app_name: str | None, user_id: str | None, policy: str) -> None:
    """Import JSON/JSONL transcripts, ADK session dumps or files of `longterm export`.

    Incremental: re-import writes nothing new. Messages are grouped into sessions by their
    session_id (or conversation_id, thread_id) field; a message without a time gets the
    import time, in file order. A file `longterm export` wrote is restored as it is (same
    ids, texts, times): a backup restored into the store it came from duplicates nothing.
    Every file is read and checked before anything is written.
    """
    from .transcripts import load_file

    pol: Any = _json_object("--policy", policy.strip()) if policy.strip()[:1] in ("{", "@") else policy

    async def go() -> None:
        sessions: list[dict[str, Any]] = []
        records: list[Any] = []
        for f in files:
            loaded = load_file(f, app_name=app_name, user_id=user_id)
            sessions.extend(loaded.sessions)
            records.extend(loaded.records)
        memory = _memory(ctx)
        saved = new = 0
        columns = TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
        try:
            with Progress(*columns, console=console) as bar:
                if sessions or not records:
                    task = bar.add_task("importing sessions", total=len(sessions))
                    for s in sessions:
                        result = await memory.add_session_to_memory(s, auto_save_memory_policy=pol)
                        saved += result.saved
                        new += result.new_events
                        bar.advance(task)
                if records:
                    task = bar.add_task("restoring exported memories", total=len(records))
                    for i in range(0, len(records), 500):
                        await memory.upsert_records(records[i : i + 500])
                        bar.advance(task, len(records[i : i + 500]))
        finally:
            await memory.close()
        if sessions or not records:
            console.print(f"{len(sessions)} sessions, {new} new events, [green]{saved} memories saved[/]")
        if records:
            console.print(f"[green]{len(records)} exported memories restored[/] (as exported: same ids)")

    asyncio.run(go())


@cli.command()
@click.argument("query")
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option("-k", "--top-k", default=5, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def search(ctx: click.Context, query: str, app_name: str, user_id: str, top_k: int, as_json: bool) -> None:
    """Search one user's memories."""

    async def go() -> None:
        memory = _memory(ctx)
        try:
            res = await memory.search_memory(app_name=app_name, user_id=user_id, query=query, top_k=top_k)
        finally:
            await memory.close()
        if as_json:
            dumped = [m.model_dump(mode="json", exclude_none=True) for m in res.memories]
            click.echo(json.dumps(dumped, ensure_ascii=False, indent=2))
            return
        table = Table("score", "when", "author", "memory", "id")
        for m in res.memories:
            when = (m.timestamp or "")[:19]
            table.add_row(
                f"{m.custom_metadata['score']:.3f}", when, *(Text(_safe(t)) for t in (m.author or "", _text(m), m.id))
            )
        console.print(table if res.memories else "[dim]no memories matched[/]")

    asyncio.run(go())


@cli.command()
@click.option("--app", "app_name", default=None)
@click.option("--user", "user_id", default=None)
@click.pass_context
def stats(ctx: click.Context, app_name: str | None, user_id: str | None) -> None:
    """Memories per (app, user)."""

    async def go() -> None:
        memory = _memory(ctx)
        try:
            if app_name and user_id:
                rows = [(app_name, user_id, await memory.count(app_name=app_name, user_id=user_id))]
            else:
                scopes = getattr(memory.backend_instance, "scopes", None)
                if scopes is None:
                    raise InvalidInputError(
                        f"backend {memory.backend_name!r} cannot list users; pass --app and --user."
                    )
                rows = [r for r in await scopes() if app_name in (None, r[0]) and user_id in (None, r[1])]
        finally:
            await memory.close()
        table = Table("app", "user", "memories", title=Text(f"backend {memory.backend_name}"))
        for app, user, n in rows:
            table.add_row(Text(_safe(app)), Text(_safe(user)), str(n))
        console.print(table)
        console.print(f"total: {sum(r[2] for r in rows)} memories for {len(rows)} users")

    asyncio.run(go())


@cli.command()
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="File to write (default: stdout).")
@click.pass_context
def export(ctx: click.Context, app_name: str, user_id: str, output: str | None) -> None:
    """Export one user's memories as JSON Lines (one record per line)."""

    async def go() -> None:
        memory = _memory(ctx)
        n = 0
        try:
            with open(output, "w", encoding="utf-8") if output else contextlib.nullcontext(sys.stdout) as out:
                async for rec in memory.iter_records(app_name=app_name, user_id=user_id):
                    out.write(rec.model_dump_json(exclude_none=True) + "\n")
                    n += 1
        finally:
            await memory.close()
        if output:
            console.print(f"exported {n} memories to {escape(output)}")

    asyncio.run(go())


@cli.command()
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option("--id", "memory_id", default=None, help="Delete only this memory.")
@click.option("--session", "session_id", default=None, help="Delete only the memories of this session.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(
    ctx: click.Context, app_name: str, user_id: str, memory_id: str | None, session_id: str | None, yes: bool
) -> None:
    """Delete one memory, one session's memories, or (neither) every memory of a user in an app."""
    if memory_id is not None and session_id is not None:
        raise click.UsageError("pass --id or --session, not both.")
    if memory_id is not None:
        what = f"memory {memory_id!r}"
    elif session_id is not None:
        what = f"the memories of session {session_id!r} of user {user_id!r} in app {app_name!r}"
    else:
        what = f"ALL memories of user {user_id!r} in app {app_name!r}"
    if not yes:
        try:
            confirmed = click.confirm(f"Delete {what}?", default=False)
        except click.Abort:  # no answer: stdin is not a terminal, or it ended
            _fail(f"nothing deleted: no answer to the confirmation; pass --yes to delete {what} without asking.")
        if not confirmed:
            raise click.Abort()

    async def go() -> None:
        memory = _memory(ctx)
        try:
            n = await memory.delete_memory(
                app_name=app_name, user_id=user_id, memory_id=memory_id, session_id=session_id
            )
        finally:
            await memory.close()
        console.print(f"deleted {n} memories")

    asyncio.run(go())


@cli.command()
@click.option("--to-backend", required=True, help="Backend to copy into.")
@click.option("--to-config", default=None, help="Its backend_config as JSON, or @file.json.")
@click.option("--app", "app_name", default=None, help="Only this app (default: every app the source can list).")
@click.option("--user", "user_id", default=None, help="Only this user.")
@click.pass_context
def migrate(
    ctx: click.Context, to_backend: str, to_config: str | None, app_name: str | None, user_id: str | None
) -> None:
    """Copy memories from this backend to another; ids are kept, so re-running writes nothing twice."""
    from .memory import LongTermMemory

    target_cfg = _json_object("--to-config", to_config)

    async def go() -> None:
        source = _memory(ctx)
        target = LongTermMemory(backend=to_backend, backend_config=target_cfg, index=source.index)
        copied = 0
        try:
            if app_name and user_id:
                scopes = [(app_name, user_id)]
            else:
                lister = getattr(source.backend_instance, "scopes", None)
                if lister is None:
                    raise InvalidInputError(
                        f"backend {source.backend_name!r} cannot list users; pass --app and --user."
                    )
                scopes = [(a, u) for a, u, _ in await lister() if app_name in (None, a) and user_id in (None, u)]
            columns = TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
            with Progress(*columns, console=console) as bar:
                task = bar.add_task(escape(f"{source.backend_name} -> {target.backend_name}"), total=len(scopes))
                for app, user in scopes:
                    batch = []
                    async for rec in source.iter_records(app_name=app, user_id=user):
                        batch.append(rec)
                        if len(batch) == 500:
                            await target.upsert_records(batch)
                            copied, batch = copied + len(batch), []
                    await target.upsert_records(batch)
                    copied += len(batch)
                    bar.advance(task)
        finally:
            await source.close()
            await target.close()
        console.print(f"copied {copied} memories of {len(scopes)} users to {escape(to_backend)}")

    asyncio.run(go())


@cli.command()
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
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Over HTTP: port.")
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
    caller's bearer token names in the --tokens file; never a tool argument.
    """
    from .errors import require
    from .records import check_id

    require("mcp.server.mcpserver", package="mcp", extra="mcp", purpose="longterm mcp")
    from .mcp.auth import Tokens
    from .mcp.server import serve_http, serve_stdio

    check_id("--app", app_name)
    overrides: dict[str, Any] = {}
    if embedder:
        overrides["embedder"] = _json_object("--embedder", embedder) if embedder[:1] in ("{", "@") else embedder
    typed = click.core.ParameterSource.COMMANDLINE
    if transport == "stdio":
        if ctx.get_parameter_source("tokens_file") == typed:
            raise click.UsageError("--tokens is for --transport http; over stdio the user is --user.")
        if not user_id:
            raise click.UsageError("over stdio, name the user whose memories are served: --user or LONGTERM_USER.")
        check_id("--user", user_id)
        asyncio.run(serve_stdio(_memory(ctx, **overrides), app_name=app_name, user_id=user_id))
        return
    if ctx.get_parameter_source("user_id") == typed:
        raise click.UsageError("over HTTP each caller's token names its user (--tokens); drop --user.")
    if tokens_file is None:
        raise click.UsageError("over HTTP, pass --tokens FILE (or LONGTERM_MCP_TOKENS): it maps tokens to users.")
    tokens = Tokens.load(tokens_file)
    asyncio.run(serve_http(_memory(ctx, **overrides), app_name=app_name, tokens=tokens, host=host, port=port))


from .facts.cli import facts as _facts  # noqa: E402

cli.add_command(_facts)


def main() -> None:
    cli(prog_name="longterm")


if __name__ == "__main__":
    main()
