"""The ``longterm`` command: demo, import, search, stats, export, delete, migrate, mcp, doctor.

The seam: a thin click layer over ``LongTermMemory``; every command takes the same
``--backend``/``--config``/``--index`` options as the facade, so what works here works in
code. Without ``--index``, a command naming (app, user) uses the index of the store holding
them (``longterm.locate``, the rule the MCP server follows too); ``stats`` and ``migrate``
cover every index of the store.

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
import inspect
import json
import logging
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .errors import BackendError, ConfigurationError, LongTermMemoryError
from .locate import RULE, MemoryFactory, locate_index, locate_indices

if TYPE_CHECKING:
    from .memory import LongTermMemory

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


class _OneLineLog(logging.Handler):
    """The library's warnings as the command prints them: ``warning: <message>``, one line on
    stderr, control characters escaped (Python's fallback printed the raw message, a path or
    an id holding ESC sequences included, and a logged exception's traceback)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                message += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
            level = "warning" if record.levelno < logging.ERROR else "error"
            err_console.print(Text.assemble((f"{level}:", "yellow"), " ", _safe(" ".join(message.split()))))
        except Exception:
            self.handleError(record)


def _log_in_one_line() -> None:
    """Route the ``longterm`` loggers' warnings through ``_OneLineLog`` (once per process)."""
    root = logging.getLogger("longterm")
    if not any(isinstance(h, _OneLineLog) for h in root.handlers):
        root.addHandler(_OneLineLog(logging.WARNING))


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


def _given_index(ctx: click.Context) -> str | None:
    """The index the user named: ``--index``, else ``index`` in ``--config``; None when neither."""
    opts = ctx.obj
    return opts["index"] or opts["config"].get("index") or None


def _memory(ctx: click.Context, index: str | None = None, **overrides: Any) -> LongTermMemory:
    """A memory on ``index`` of the store the options name (default: the index given, else the
    facade's own default)."""
    from .memory import LongTermMemory

    opts = ctx.obj
    cfg = dict(opts["config"])
    cfg.update(overrides)
    kwargs: dict[str, Any] = {"backend_config": cfg}
    if opts["backend"]:
        kwargs["backend"] = opts["backend"]
    index = index or _given_index(ctx)
    if index:
        kwargs["index"] = cfg["index"] = index
    return LongTermMemory(**kwargs)


def _factory(ctx: click.Context, **overrides: Any) -> MemoryFactory:
    """Opens a memory on a named index of the store the options name (``locate``'s factory)."""
    return lambda index: _memory(ctx, index=index, **overrides)


async def _located(ctx: click.Context, app_name: str, user_id: str, **overrides: Any) -> LongTermMemory:
    """A memory on the index holding (app, user), by ``locate.RULE``."""
    index = await locate_index(_factory(ctx, **overrides), app_name, user_id, index=_given_index(ctx))
    return _memory(ctx, index=index, **overrides)


async def _listed_indices(ctx: click.Context) -> tuple[str, list[str]]:
    """The backend's name and the indices a whole-store command covers: the one given, else
    every index of the store holding memories (``LongTermMemory.indices``)."""
    given = _given_index(ctx)
    probe = _memory(ctx)
    try:
        return probe.backend_name, [given] if given else await probe.indices()
    finally:
        await probe.close()


def _text(memory: Any) -> str:
    return " ".join(p.text for p in memory.content.parts if getattr(p, "text", None))


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        f"Long-term memory for AI agents.\n\n{RULE}\n\n"
        "Without --index, stats lists every index of the store and migrate copies every index, "
        "each under its own name."
    ),
)
@click.option("--backend", envvar="LONGTERM_BACKEND", default=None, help="Backend name (default: local).")
@click.option("--config", "config", default=None, help="backend_config as JSON, or @file.json.")
@click.option(
    "--index",
    default=None,
    help="Index / namespace inside the backend (default: the index holding the user; see above).",
)
@click.version_option(package_name="longterm")
@click.pass_context
def cli(ctx: click.Context, backend: str | None, config: str | None, index: str | None) -> None:
    if ctx.invoked_subcommand != "mcp":  # the server's stderr is a log: tracebacks of our bugs stay in it
        _log_in_one_line()
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

    Where: without --index, each (app, user) goes to the index of the store that already holds
    it, else to the index named after its app, where LongTermMemory(app_name=APP) reads.
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
        pairs = [(s["app_name"], s["user_id"]) for s in sessions] + [(r.app_name, r.user_id) for r in records]
        located = await locate_indices(_factory(ctx), pairs, index=_given_index(ctx))
        indices = sorted(set(located.values()))
        saved = new = 0
        columns = TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
        with Progress(*columns, console=console) as bar:
            s_task = bar.add_task("importing sessions", total=len(sessions)) if sessions or not records else None
            r_task = bar.add_task("restoring exported memories", total=len(records)) if records else None
            for index in indices:
                memory = _memory(ctx, index=index)
                try:
                    for s in sessions:
                        if located[(s["app_name"], s["user_id"])] == index:
                            result = await memory.add_session_to_memory(s, auto_save_memory_policy=pol)
                            saved += result.saved
                            new += result.new_events
                            bar.advance(s_task)  # type: ignore[arg-type]  # set whenever there are sessions
                    mine = [r for r in records if located[(r.app_name, r.user_id)] == index]
                    for i in range(0, len(mine), 500):
                        await memory.upsert_records(mine[i : i + 500])
                        bar.advance(r_task, len(mine[i : i + 500]))  # type: ignore[arg-type]
                finally:
                    await memory.close()
        where = f" into {_indices_phrase(indices)}" if indices else ""
        if sessions or not records:
            console.print(f"{len(sessions)} sessions, {new} new events, [green]{saved} memories saved[/]{where}")
        if records:
            console.print(f"[green]{len(records)} exported memories restored[/] (as exported: same ids){where}")

    asyncio.run(go())


def _indices_phrase(indices: list[str]) -> str:
    """``index 'a'`` / ``indices 'a', 'b'``, escaped for rich markup and the terminal."""
    names = ", ".join(map(repr, indices))
    return escape(_safe(f"index {names}" if len(indices) == 1 else f"indices {names}"))


@cli.command()
@click.argument("query")
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option("-k", "--top-k", default=5, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def search(ctx: click.Context, query: str, app_name: str, user_id: str, top_k: int, as_json: bool) -> None:
    """Search one user's memories (in the index holding them, unless --index)."""

    async def go() -> None:
        memory = await _located(ctx, app_name, user_id)
        try:
            res = await memory.search_memory(app_name=app_name, user_id=user_id, query=query, top_k=top_k)
        finally:
            await memory.close()
        if as_json:
            dumped = [m.model_dump(mode="json", exclude_none=True) for m in res.memories]
            click.echo(json.dumps(dumped, ensure_ascii=False, indent=2))
            return
        table = Table("score", "when", "author", "memory", "id", title=Text(_safe(f"index {memory.index}")))
        for m in res.memories:
            when = (m.timestamp or "")[:19]
            table.add_row(
                f"{m.custom_metadata['score']:.3f}",
                when,
                *(Text(_safe(t)) for t in (m.author or "", _text(m), m.id or "")),
            )
        console.print(table if res.memories else "[dim]no memories matched[/]")

    asyncio.run(go())


@cli.command()
@click.option("--app", "app_name", default=None, help="Only this app.")
@click.option("--user", "user_id", default=None, help="Only this user.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (index, app, user, memories) instead of a table.")
@click.pass_context
def stats(ctx: click.Context, app_name: str | None, user_id: str | None, as_json: bool) -> None:
    """Memories per (index, app, user), over every index of the store (or the --index given)."""

    async def go() -> None:
        backend_name, indices = await _listed_indices(ctx)
        rows: list[tuple[str, str, str, int]] = []
        for index in indices:
            memory = _memory(ctx, index=index)
            try:
                if app_name and user_id:  # counted: works where an engine cannot list its users
                    listed = [(app_name, user_id, await memory.count(app_name=app_name, user_id=user_id))]
                else:
                    listed = await memory.scopes()
            finally:
                await memory.close()
            rows += [(index, a, u, n) for a, u, n in listed if app_name in (None, a) and user_id in (None, u) and n]
        if as_json:
            keys = ("index", "app", "user", "memories")
            click.echo(json.dumps([dict(zip(keys, r, strict=True)) for r in rows], ensure_ascii=False, indent=2))
            return
        table = Table("index", "app", "user", "memories", title=Text(_safe(f"backend {backend_name}")))
        for index, app, user, n in rows:
            table.add_row(Text(_safe(index)), Text(_safe(app)), Text(_safe(user)), str(n))
        console.print(table)
        held = len({r[0] for r in rows})
        console.print(f"total: {sum(r[3] for r in rows)} memories for {len(rows)} users in {held} indices")

    asyncio.run(go())


def _private_file(path: str) -> Any:
    """``path`` opened for writing as a file only its owner can read (0600), whatever the umask,
    and made so when it existed with wider rights: an export holds every word a user said."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # not a FIFO or a terminal: those keep their rights
            os.fchmod(fd, 0o600)
        return os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


@cli.command()
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="File to write, readable by its owner only (0600) (default: stdout).",
)
@click.pass_context
def export(ctx: click.Context, app_name: str, user_id: str, output: str | None) -> None:
    """Export one user's memories as JSON Lines (one record per line)."""

    async def go() -> None:
        memory = await _located(ctx, app_name, user_id)
        n = 0
        try:
            with _private_file(output) if output else contextlib.nullcontext(sys.stdout) as out:
                async for rec in memory.iter_records(app_name=app_name, user_id=user_id):
                    out.write(rec.model_dump_json(exclude_none=True) + "\n")
                    n += 1
        finally:
            await memory.close()
        if output:
            console.print(f"exported {n} memories to {escape(_safe(output))}")

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


@cli.command()
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option("--id", "memory_id", default=None, help="Delete only this memory.")
@click.option("--session", "session_id", default=None, help="Delete only the memories of this session.")
@click.option("--purge", is_flag=True, help=PURGE_HELP)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(
    ctx: click.Context,
    app_name: str,
    user_id: str,
    memory_id: str | None,
    session_id: str | None,
    purge: bool,
    yes: bool,
) -> None:
    """Delete one memory, one session's memories, or (neither) every memory of a user in an app
    (in the index holding them, unless --index)."""
    if memory_id is not None and session_id is not None:
        raise click.UsageError("pass --id or --session, not both.")
    index = asyncio.run(locate_index(_factory(ctx), app_name, user_id, index=_given_index(ctx)))
    if memory_id is not None:
        what = f"memory {memory_id!r}"
    elif session_id is not None:
        what = f"the memories of session {session_id!r} of user {user_id!r} in app {app_name!r}"
    else:
        what = f"ALL memories of user {user_id!r} in app {app_name!r}"
    what += f" (index {index!r})"
    if not yes:
        try:
            confirmed = click.confirm(_safe(f"Delete {what}?"), default=False)
        except click.Abort:  # no answer: stdin is not a terminal, or it ended
            _fail(f"nothing deleted: no answer to the confirmation; pass --yes to delete {what} without asking.")
        if not confirmed:
            raise click.Abort()

    async def go() -> None:
        memory = _memory(ctx, index=index)
        try:
            n = await memory.delete_memory(
                app_name=app_name, user_id=user_id, memory_id=memory_id, session_id=session_id
            )
            console.print(f"deleted {n} memories")
            if purge:
                console.print(Text(_safe(await _purge(memory))))
        finally:
            await memory.close()

    asyncio.run(go())


@cli.command()
@click.option("--to-backend", required=True, help="Backend to copy into.")
@click.option("--to-config", default=None, help="Its backend_config as JSON, or @file.json.")
@click.option("--app", "app_name", default=None, help="Only this app (default: every app of every index).")
@click.option("--user", "user_id", default=None, help="Only this user.")
@click.pass_context
def migrate(
    ctx: click.Context, to_backend: str, to_config: str | None, app_name: str | None, user_id: str | None
) -> None:
    """Copy memories from this store to another backend; ids are kept, so re-running writes nothing twice.

    Without --index, every index of the store is copied, each into the index of the same name
    on the target (what `longterm stats` lists is what arrives); with --index, that index only.
    With --app and --user, that user only, from the index holding them.
    """
    from .memory import LongTermMemory

    target_cfg = _json_object("--to-config", to_config)

    async def go() -> tuple[int, int, list[str]]:
        if app_name and user_id:
            index = await locate_index(_factory(ctx), app_name, user_id, index=_given_index(ctx))
            plan: dict[str, list[tuple[str, str]] | None] = {index: [(app_name, user_id)]}
        else:
            plan = dict.fromkeys((await _listed_indices(ctx))[1])
        if target_cfg.get("index") and len(plan) > 1:
            raise ConfigurationError(
                f"--to-config names index {target_cfg['index']!r}, but the source has {len(plan)} indices "
                f"({', '.join(map(repr, plan))}); pass --index to copy one of them into it."
            )
        copied = users = 0
        columns = TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
        with Progress(*columns, console=console) as bar:
            for index, scopes in plan.items():
                source = _memory(ctx, index=index)
                target = LongTermMemory(backend=to_backend, backend_config=target_cfg, index=index)
                try:
                    if scopes is None:
                        scopes = [(a, u) for a, u, _ in await source.scopes() if app_name in (None, a)]
                        scopes = [(a, u) for a, u in scopes if user_id in (None, u)]
                    label = f"{index}: {source.backend_name} -> {target.backend_name}"
                    task = bar.add_task(escape(_safe(label)), total=len(scopes))
                    for app, user in scopes:
                        copied += await _copy(source, target, app, user)
                        users += 1
                        bar.advance(task)
                finally:
                    await source.close()
                    await target.close()
        return copied, users, list(plan)

    copied, users, indices = asyncio.run(go())
    where = f" from {_indices_phrase(indices)}" if indices else ""
    console.print(f"copied {copied} memories of {users} users{where} to {escape(_safe(to_backend))}")


async def _copy(source: LongTermMemory, target: LongTermMemory, app: str, user: str) -> int:
    """Copy (app, user)'s records from ``source`` to ``target`` in batches; how many."""
    copied, batch = 0, []
    async for rec in source.iter_records(app_name=app, user_id=user):
        batch.append(rec)
        if len(batch) == 500:
            await target.upsert_records(batch)
            copied, batch = copied + len(batch), []
    await target.upsert_records(batch)
    return copied + len(batch)


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
    caller's bearer token names in the --tokens file; never a tool argument. Each user is
    served from the index of the store holding their memories of --app, as every command finds
    it (see `longterm --help`): without --index, the one index holding them, else the index
    named after the app.
    """
    from .errors import require
    from .records import check_id

    require("mcp.server.mcpserver", package="mcp", extra="mcp", purpose="longterm mcp")
    from .mcp.auth import Tokens
    from .mcp.server import memories_for, serve_http, serve_stdio

    check_id("--app", app_name)
    overrides: dict[str, Any] = {}
    if embedder:
        overrides["embedder"] = _json_object("--embedder", embedder) if embedder[:1] in ("{", "@") else embedder
    factory, given = _factory(ctx, **overrides), _given_index(ctx)
    typed = click.core.ParameterSource.COMMANDLINE
    if transport == "stdio":
        if ctx.get_parameter_source("tokens_file") == typed:
            raise click.UsageError("--tokens is for --transport http; over stdio the user is --user.")
        if not user_id:
            raise click.UsageError("over stdio, name the user whose memories are served: --user or LONGTERM_USER.")
        check_id("--user", user_id)
        user: str = user_id

        async def stdio() -> None:
            memories = await memories_for(factory, app_name=app_name, users=[user], index=given)
            await serve_stdio(memories[user], app_name=app_name, user_id=user)

        asyncio.run(stdio())
        return
    if ctx.get_parameter_source("user_id") == typed:
        raise click.UsageError("over HTTP each caller's token names its user (--tokens); drop --user.")
    if tokens_file is None:
        raise click.UsageError("over HTTP, pass --tokens FILE (or LONGTERM_MCP_TOKENS): it maps tokens to users.")
    tokens = Tokens.load(tokens_file)

    async def http() -> None:
        memories = await memories_for(factory, app_name=app_name, users=tokens.users, index=given)
        await serve_http(memories, app_name=app_name, tokens=tokens, host=host, port=port)

    asyncio.run(http())


@cli.command()
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
    from . import doctor as doctor_mod

    overrides: dict[str, Any] = {}
    if embedder:
        overrides["embedder"] = _json_object("--embedder", embedder) if embedder[:1] in ("{", "@") else embedder
    rows = asyncio.run(doctor_mod.diagnose(lambda: _memory(ctx, **overrides)))
    if as_json:
        keys = ("check", "status", "found", "fix")
        dumped = [dict(zip(keys, (r.name, r.status, r.detail, r.fix), strict=True)) for r in rows]
        click.echo(json.dumps(dumped, ensure_ascii=False, indent=2))
    else:
        style = {"ok": "green", "warn": "yellow", "fail": "bold red"}
        table = Table("check", "status", "found", "what to do", title="longterm doctor")
        for row in rows:
            status = Text(row.status, style=style[row.status])
            table.add_row(row.name, status, Text(_safe(row.detail)), Text(_safe(row.fix)))
        console.print(table)
    if doctor_mod.failed(rows):
        problems = [r.name for r in rows if r.status == "fail"]
        _fail(f"doctor found a problem: {', '.join(problems)} (see the table for what to do)")


from .facts.cli import facts as _facts  # noqa: E402
from .ui.cli import ui as _ui  # noqa: E402  (click only; Starlette is imported when `longterm ui` runs)

cli.add_command(_facts)
cli.add_command(_ui)


def main() -> None:
    cli(prog_name="longterm")


if __name__ == "__main__":
    main()
