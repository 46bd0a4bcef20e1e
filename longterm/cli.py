"""The ``longterm`` command: demo, import, search, stats, export, delete.

The seam: a thin click layer over ``LongTermMemory``; every command takes the same
``--backend``/``--config``/``--index`` options as the facade, so what works here works in
code. Errors of the ``LongTermMemoryError`` family (and unreadable input files) print one
clear line and exit 1; a traceback means a bug.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .errors import InvalidInputError, LongTermMemoryError

console = Console()


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


def _parse_config(value: str | None) -> dict[str, Any]:
    if not value:
        return {}
    text = Path(value[1:]).read_text() if value.startswith("@") else value
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON ({exc.msg}); pass a JSON object or @file.json") from None
    if not isinstance(cfg, dict):
        raise click.BadParameter("must be a JSON object")
    return cfg


def _run(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except LongTermMemoryError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--backend", envvar="LONGTERM_BACKEND", default=None, help="Backend name (default: local).")
@click.option("--config", "config", default=None, help="backend_config as JSON, or @file.json.")
@click.option("--index", default=None, help="Index / namespace inside the backend.")
@click.version_option(package_name="longterm")
@click.pass_context
def cli(ctx: click.Context, backend: str | None, config: str | None, index: str | None) -> None:
    """Long-term memory for AI agents."""
    ctx.obj = {"backend": backend, "config": _parse_config(config), "index": index}


@cli.command()
@click.option("--path", type=click.Path(dir_okay=False), default=None, help="Keep the demo store here (default: a temporary file).")
@click.pass_context
def demo(ctx: click.Context, path: str | None) -> None:
    """Save two conversations, then recall from them in a new session (offline)."""
    from . import demo as demo_mod

    def emit(kind: str, payload: Any) -> None:
        if kind == "saved":
            console.print(f"[green]saved[/] {payload.saved} of {payload.new_events} new events from {payload.session_id}")
        else:
            question, memories = payload
            console.print(f"\n[bold cyan]Q:[/] {question}")
            if not memories:
                console.print("   [dim](nothing recalled)[/]")
            for m in memories:
                text = " ".join(p.text for p in m.content.parts if getattr(p, "text", None))
                console.print(f"   [yellow]{m.custom_metadata['score']:.2f}[/] {text}  [dim]({m.timestamp[:10]})[/]", highlight=False)

    async def go(store: str) -> None:
        overrides = {} if ctx.obj["backend"] not in (None, "local") else {"path": store}
        memory = _memory(ctx, **overrides)
        console.print(f"[bold]longterm demo[/] on backend [magenta]{memory.backend_name}[/]")
        try:
            await demo_mod.run(memory, emit)
        finally:
            await memory.close()

    if path:
        _run(go(path))
    else:
        with tempfile.TemporaryDirectory(prefix="longterm-demo-") as tmp:
            _run(go(str(Path(tmp) / "memory.db")))


@cli.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--app", "app_name", default=None, help="app_name for files that name none.")
@click.option("--user", "user_id", default=None, help="user_id for files that name none.")
@click.option("--policy", default="default", show_default=True, help="Auto-save preset (default, all, custom) or a JSON policy.")
@click.pass_context
def import_(ctx: click.Context, files: tuple[str, ...], app_name: str | None, user_id: str | None, policy: str) -> None:
    """Import JSON/JSONL transcripts or ADK session dumps (incremental: re-import writes nothing new)."""
    from .transcripts import load_sessions

    pol: Any = json.loads(policy) if policy.strip().startswith("{") else policy

    async def go() -> None:
        sessions = []
        for f in files:
            sessions.extend(load_sessions(f, app_name=app_name, user_id=user_id))
        memory = _memory(ctx)
        saved = new = 0
        try:
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
                task = bar.add_task("importing sessions", total=len(sessions))
                for s in sessions:
                    result = await memory.add_session_to_memory(s, auto_save_memory_policy=pol)
                    saved += result.saved
                    new += result.new_events
                    bar.advance(task)
        finally:
            await memory.close()
        console.print(f"{len(sessions)} sessions, {new} new events, [green]{saved} memories saved[/]")

    _run(go())


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
            click.echo(json.dumps([m.model_dump(mode="json", exclude_none=True) for m in res.memories], ensure_ascii=False, indent=2))
            return
        table = Table("score", "when", "author", "memory", "id")
        for m in res.memories:
            text = " ".join(p.text for p in m.content.parts if getattr(p, "text", None))
            table.add_row(f"{m.custom_metadata['score']:.3f}", (m.timestamp or "")[:19], m.author or "", text, m.id)
        console.print(table if res.memories else "[dim]no memories matched[/]")

    _run(go())


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
                    raise InvalidInputError(f"backend {memory.backend_name!r} cannot list users; pass --app and --user.")
                rows = [r for r in await scopes() if app_name in (None, r[0]) and user_id in (None, r[1])]
        finally:
            await memory.close()
        table = Table("app", "user", "memories", title=f"backend {memory.backend_name}")
        for app, user, n in rows:
            table.add_row(app, user, str(n))
        console.print(table)
        console.print(f"total: {sum(r[2] for r in rows)} memories for {len(rows)} users")

    _run(go())


@cli.command()
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="File to write (default: stdout).")
@click.pass_context
def export(ctx: click.Context, app_name: str, user_id: str, output: str | None) -> None:
    """Export one user's memories as JSON Lines (one record per line)."""

    async def go() -> None:
        memory = _memory(ctx)
        out = open(output, "w", encoding="utf-8") if output else sys.stdout
        n = 0
        try:
            async for rec in memory.iter_records(app_name=app_name, user_id=user_id):
                out.write(rec.model_dump_json(exclude_none=True) + "\n")
                n += 1
        finally:
            await memory.close()
            if output:
                out.close()
        if output:
            console.print(f"exported {n} memories to {output}")

    _run(go())


@cli.command()
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option("--id", "memory_id", default=None, help="Delete only this memory (default: erase the user).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(ctx: click.Context, app_name: str, user_id: str, memory_id: str | None, yes: bool) -> None:
    """Delete one memory, or erase every memory of a user in an app."""
    what = f"memory {memory_id}" if memory_id else f"ALL memories of user {user_id!r} in app {app_name!r}"
    if not yes and not click.confirm(f"Delete {what}?", default=False):
        raise click.Abort()

    async def go() -> None:
        memory = _memory(ctx)
        try:
            n = await memory.delete_memory(app_name=app_name, user_id=user_id, memory_id=memory_id)
        finally:
            await memory.close()
        console.print(f"deleted {n} memories")

    _run(go())


@cli.command()
@click.option("--to-backend", required=True, help="Backend to copy into.")
@click.option("--to-config", default=None, help="Its backend_config as JSON, or @file.json.")
@click.option("--app", "app_name", default=None, help="Only this app (default: every app the source can list).")
@click.option("--user", "user_id", default=None, help="Only this user.")
@click.pass_context
def migrate(ctx: click.Context, to_backend: str, to_config: str | None, app_name: str | None, user_id: str | None) -> None:
    """Copy memories from this backend to another; ids are kept, so re-running writes nothing twice."""
    from .memory import LongTermMemory

    target_cfg = _parse_config(to_config)

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
                    raise InvalidInputError(f"backend {source.backend_name!r} cannot list users; pass --app and --user.")
                scopes = [(a, u) for a, u, _ in await lister() if app_name in (None, a) and user_id in (None, u)]
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
                task = bar.add_task(f"{source.backend_name} -> {target.backend_name}", total=len(scopes))
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
        console.print(f"copied {copied} memories of {len(scopes)} users to {to_backend}")

    _run(go())


def main() -> None:
    cli(prog_name="longterm")


if __name__ == "__main__":
    main()
