"""The ``longterm`` commands that read, count, erase and check a store: demo, search, stats,
delete, doctor.

The seam: click commands the group adds (``longterm.cli``); each opens its memory with
``with_memory`` (``opening``) and prints through ``output``. Without ``--index``, a command
naming (app, user) works in the index of the store holding them (``locate.RULE``); ``stats``
covers every index of the store.

Why here and not in the facade: these are the operator's views (tables, JSON for scripts,
a confirmation before an erase); what they do is the facade's public API.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..entries import entry_text
from ..errors import BackendError, LongTermMemoryError
from ..locate import locate_index
from ..memory.searching import entry
from .filtering import filter_options, filters_of
from .opening import (
    JSONObject,
    factory,
    given_index,
    listed_indices,
    name_or_json,
    open_memory,
    require_store,
    root_options,
    store_where,
    with_memory,
)
from .output import console, fail, safe

if TYPE_CHECKING:
    from ..memory import LongTermMemory


@click.command()
@click.option(
    "--path",
    type=click.Path(),  # a directory is the store check's one line (opening.store_file_problem), not a usage error
    metavar="FILE",
    default=None,
    help="Keep the demo store here (default: a temporary file).",
)
@click.pass_context
def demo(ctx: click.Context, path: str | None) -> None:
    """Save two conversations, then recall from them in a new session (offline)."""
    from .. import demo as demo_mod

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
                console.print(f"   [yellow]{score:.2f}[/] {escape(entry_text(m))}  [dim]({when})[/]", highlight=False)

    async def go(store: str) -> None:
        overrides: JSONObject = {} if root_options(ctx)["backend"] not in (None, "local") else {"path": store}
        async with with_memory(ctx, **overrides) as memory:
            console.print(f"[bold]longterm demo[/] on backend [magenta]{escape(memory.backend_name)}[/]")
            await demo_mod.run(memory, emit)
            console.print(f"\n[dim]{escape(demo_mod.FACTS_HINT)}[/]")

    if path:
        asyncio.run(go(path))
    else:
        with tempfile.TemporaryDirectory(prefix="longterm-demo-") as tmp:
            asyncio.run(go(str(Path(tmp) / "memory.db")))


@click.command()
@click.argument("query")
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option("-k", "--top-k", default=5, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@filter_options
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    app_name: str,
    user_id: str,
    top_k: int,
    as_json: bool,
    filter_pairs: tuple[str, ...],
    filter_json: str | None,
) -> None:
    """Search one user's memories (in the index holding them, unless --index); --filter narrows
    them before the top-k cut."""
    filters = filters_of(filter_pairs, filter_json)

    async def go() -> None:
        async with with_memory(ctx, app_name, user_id, read_only=True) as memory:
            hits = await memory.search_hits(memory.scope(app_name, user_id), query, top_k, filters=filters)
        found = [entry(h, memory.backend_name) for h in hits]
        if as_json:  # ADK's entries, and beside each its memory's own metadata (the library's keys win in an entry's)
            dumped = [
                {**m.model_dump(mode="json", exclude_none=True), "metadata": h.record.metadata}
                for m, h in zip(found, hits, strict=True)
            ]
            click.echo(json.dumps(dumped, ensure_ascii=False, indent=2))
            return
        table = Table("score", "when", "author", "memory", "id", title=Text(safe(f"index {memory.index}")))
        for m in found:
            when = (m.timestamp or "")[:19]
            table.add_row(
                f"{m.custom_metadata['score']:.3f}",
                when,
                *(Text(safe(t)) for t in (m.author or "", entry_text(m), m.id or "")),
            )
        console.print(table if found else "[dim]no memories matched[/]")

    asyncio.run(go())


@click.command()
@click.option("--app", "app_name", default=None, help="Only this app.")
@click.option("--user", "user_id", default=None, help="Only this user.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (index, app, user, memories) instead of a table.")
@click.pass_context
def stats(ctx: click.Context, app_name: str | None, user_id: str | None, as_json: bool) -> None:
    """Memories per (index, app, user), over every index of the store (or the --index given)."""

    async def go() -> None:
        backend_name, indices = await listed_indices(ctx)
        rows: list[tuple[str, str, str, int]] = []
        for index in indices:
            async with with_memory(ctx, index=index) as memory:
                if app_name and user_id:  # counted: works where an engine cannot list its users
                    listed = [(app_name, user_id, await memory.count(app_name=app_name, user_id=user_id))]
                else:
                    listed = await memory.scopes()
            rows += [(index, a, u, n) for a, u, n in listed if app_name in (None, a) and user_id in (None, u) and n]
        if as_json:
            keys = ("index", "app", "user", "memories")
            click.echo(json.dumps([dict(zip(keys, r, strict=True)) for r in rows], ensure_ascii=False, indent=2))
            return
        click.echo(safe(f"store: {store_where(ctx)}"))  # one line, never wrapped: a path to copy (once read)
        table = Table("index", "app", "user", "memories", title=Text(safe(f"backend {backend_name}")))
        for index, app, user, n in rows:
            table.add_row(Text(safe(index)), Text(safe(app)), Text(safe(user)), str(n))
        console.print(table)
        held = len({r[0] for r in rows})
        console.print(f"total: {sum(r[3] for r in rows)} memories for {len(rows)} users in {held} indices")

    asyncio.run(go())


PURGE_HELP = (
    "After deleting, compact the store so the deleted words leave its files, where the engine can: "
    "local: SQLite secure delete and a full-text index merge; Redis: BGREWRITEAOF (the append-only "
    "file rewritten without them); OpenSearch: a force merge expunging deleted documents. A backend "
    "without a purge says so; nothing more can be done from here."
)


async def _purge(memory: LongTermMemory) -> str:
    """Run the engine's ``purge`` where it has one; the line saying what was done."""
    purge = getattr(memory.backend_instance, "purge", None)
    nothing = f"backend {memory.backend_name} has no purge: nothing more can be done from here."
    if purge is None:
        return nothing
    try:
        done = purge()
        if inspect.isawaitable(done):
            done = await done
    except BackendError as exc:
        if isinstance(exc.__cause__, NotImplementedError):  # the engine leaves the primitive out
            return nothing
        raise
    except NotImplementedError:
        return nothing
    return f"purged: {done}" if isinstance(done, str) and done else f"purged: backend {memory.backend_name} compacted"


@click.command()
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option("--id", "memory_id", default=None, help="Delete only this memory.")
@click.option("--session", "session_id", default=None, help="Delete only the memories of this session.")
@click.option(
    "--before",
    default=None,
    help="Only memories saved as of a time strictly earlier than this (ISO 8601 with a zone, or seconds).",
)
@filter_options
@click.option("--expired", is_flag=True, help="Only memories that expired (their words leave the store).")
@click.option("--dry-run", is_flag=True, help="Print how many memories would go; delete nothing.")
@click.option("--purge", is_flag=True, help=PURGE_HELP)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(
    ctx: click.Context,
    app_name: str,
    user_id: str,
    memory_id: str | None,
    session_id: str | None,
    before: str | None,
    filter_pairs: tuple[str, ...],
    filter_json: str | None,
    expired: bool,
    dry_run: bool,
    purge: bool,
    yes: bool,
) -> None:
    """Delete one memory, one session's memories, those before a time or passing a filter, or (none of
    these) every memory of a user in an app (in the index holding them, unless --index)."""
    filters = filters_of(filter_pairs, filter_json)
    if expired:
        if memory_id is not None or session_id is not None or before is not None or filters is not None:
            raise click.UsageError("pass --expired alone: it erases every memory of the user that expired.")
        _sweep(ctx, app_name, user_id, dry_run=dry_run, purge=purge)
        return
    narrowed = before is not None or filters is not None
    if memory_id is not None and session_id is not None:
        raise click.UsageError("pass --id or --session, not both.")
    if memory_id is not None and narrowed:
        raise click.UsageError("pass --id alone, or any of --session, --before and --filter.")
    require_store(ctx)  # an erase where no store is finds nothing: it creates none either
    index = asyncio.run(locate_index(factory(ctx), app_name, user_id, index=given_index(ctx)))
    if memory_id is not None:
        what = f"memory {memory_id!r}"
    elif session_id is not None and not narrowed:
        what = f"the memories of session {session_id!r} of user {user_id!r} in app {app_name!r}"
    elif narrowed:
        parts = [f"of session {session_id!r}"] if session_id is not None else []
        parts += [f"saved before {before}"] if before is not None else []
        parts += ["passing the filter"] if filters is not None else []
        what = f"the memories of user {user_id!r} in app {app_name!r} {' and '.join(parts)}"
    else:
        what = f"ALL memories of user {user_id!r} in app {app_name!r}"
    what += f" (index {index!r})"
    if dry_run:

        async def count() -> None:
            async with with_memory(ctx, index=index, read_only=True) as memory:
                if memory_id is None:
                    n = await memory.delete_memories(
                        app_name=app_name,
                        user_id=user_id,
                        session_id=session_id,
                        before=_when(before),
                        filters=filters,
                        dry_run=True,
                    )
                else:
                    n = sum(
                        [1 async for r in memory.iter_records(app_name=app_name, user_id=user_id) if r.id == memory_id]
                    )
            console.print(Text(safe(f"would delete {n} memories: {what}; nothing deleted (--dry-run)")))

        asyncio.run(count())
        return
    if not yes:
        try:
            confirmed = click.confirm(safe(f"Delete {what}?"), default=False)
        except click.Abort:  # no answer: stdin is not a terminal, or it ended
            fail(f"nothing deleted: no answer to the confirmation; pass --yes to delete {what} without asking.")
        if not confirmed:
            raise click.Abort()

    async def go() -> None:
        async with with_memory(ctx, index=index) as memory:
            if narrowed or (memory_id is None and session_id is None):
                n = await memory.delete_memories(
                    app_name=app_name, user_id=user_id, session_id=session_id, before=_when(before), filters=filters
                )
            else:
                n = await memory.delete_memory(
                    app_name=app_name, user_id=user_id, memory_id=memory_id, session_id=session_id
                )
            console.print(f"deleted {n} memories")
            if purge:
                console.print(Text(safe(await _purge(memory))))

    asyncio.run(go())


def _sweep(ctx: click.Context, app_name: str, user_id: str, *, dry_run: bool, purge: bool) -> None:
    """``delete --expired``: the user's expired memories erased (or counted, ``dry_run``)."""

    async def go() -> None:
        async with with_memory(ctx, app_name, user_id, read_only=True) as memory:  # no store: nothing expired
            n = await memory.sweep_expired(app_name=app_name, user_id=user_id, dry_run=dry_run)
            if dry_run:
                console.print(f"would delete {n} expired memories; nothing deleted (--dry-run)")
                return
            console.print(f"deleted {n} expired memories")
            if purge:
                console.print(Text(safe(await _purge(memory))))

    asyncio.run(go())


def _when(text: str | None) -> float | str | None:
    """``--before`` as typed: seconds since the epoch when it is a number, else ISO 8601 (checked by the facade)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return text


@click.command()
@click.option(
    "--embedder", default=None, help="The embedder the application uses: a name, or JSON inline or @file.json."
)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON (check, status, found, fix).")
@click.pass_context
def doctor(ctx: click.Context, embedder: str | None, as_json: bool) -> None:
    """Check the configuration, the backend and the store; exit 1 on a problem, each with what to do.

    Checks: the options and LONGTERM_* variables, the store file (local: SQLite quick_check),
    that the backend answers, the embedder the store was written with, the index, vectors still
    to embed, and the versions of each part. Without --index, the index the facade opens by
    default (default_app); the table names the indices holding memories.
    """
    from .. import doctor as doctor_mod

    overrides: JSONObject = {"embedder": name_or_json("--embedder", embedder)} if embedder else {}
    try:  # a configuration that does not parse is doctor's first finding, store or no store
        open_memory(ctx, **overrides).close_sync(flush=False)
    except LongTermMemoryError:
        pass
    else:
        require_store(ctx)
    if not as_json:
        click.echo(safe(f"store: {store_where(ctx)}"))
    rows = asyncio.run(doctor_mod.diagnose(lambda: open_memory(ctx, **overrides)))
    if as_json:
        keys = ("check", "status", "found", "fix")
        dumped = [dict(zip(keys, (r.name, r.status, r.detail, r.fix), strict=True)) for r in rows]
        click.echo(json.dumps(dumped, ensure_ascii=False, indent=2))
    else:
        style = {"ok": "green", "warn": "yellow", "fail": "bold red"}
        table = Table("check", "status", "found", "what to do", title="longterm doctor")
        for row in rows:
            status = Text(row.status, style=style[row.status])
            table.add_row(row.name, status, Text(safe(row.detail)), Text(safe(row.fix)))
        console.print(table)
    if doctor_mod.failed(rows):
        problems = [r.name for r in rows if r.status == "fail"]
        fail(f"doctor found a problem: {', '.join(problems)} (see the table for what to do)")
