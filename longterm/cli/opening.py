"""The memory a command works on: the store the root options name, opened, used, closed.

The seam: ``with_memory(ctx, app_name, user_id)`` (``async with``) opens a ``LongTermMemory``
on the index holding (app, user) by ``locate.RULE``, on ``index=`` when the command found it
already, or on the index given (else the facade's default) when it names no user; a
``LongTermMemoryError`` from opening, the block or closing leaves as the one ``error:`` line,
and the memory is closed on every path. ``open_memory`` and ``factory`` open without closing,
for what keeps a memory of its own (``doctor``, the MCP server, ``locate``'s probes);
``listed_indices`` names the indices a whole-store command covers. ``json_object`` reads a
JSON option given inline or as ``@file.json``.

Why one helper: every command takes the root's ``--backend``/``--config``/``--index`` (a
subcommand group's own ``ctx.obj`` included, so they are read from the root context), and
every command must close what it opened, even when it fails.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

import click

from ..errors import ConfigurationError, LongTermMemoryError
from ..locate import MemoryFactory, locate_index
from .output import fail

if TYPE_CHECKING:
    from ..memory import LongTermMemory

#: A JSON object as an option gives it (``--config``, ``--policy``, ``--embedder``).
JSONObject = dict[str, Any]


class RootOptions(TypedDict):
    """The ``longterm`` group's options, its ``ctx.obj``."""

    backend: str | None
    config: JSONObject
    index: str | None


def json_object(option: str, value: str | None) -> JSONObject:
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


def name_or_json(option: str, value: str) -> str | JSONObject:
    """A name as it is, or (starting with ``{`` or ``@``) a JSON object (``json_object``)."""
    return json_object(option, value) if value[:1] in ("{", "@") else value


def root_options(ctx: click.Context) -> RootOptions:
    """The ``longterm`` group's options, from any command or subcommand under it (the defaults
    for a command run alone, outside the group)."""
    obj = ctx.find_root().obj
    if isinstance(obj, dict) and "config" in obj:
        return cast(RootOptions, obj)  # the group's callback set it
    return {"backend": None, "config": {}, "index": None}


def given_index(ctx: click.Context) -> str | None:
    """The index the user named: ``--index``, else ``index`` in ``--config``; None when neither."""
    opts = root_options(ctx)
    return opts["index"] or opts["config"].get("index") or None


def open_memory(
    ctx: click.Context, index: str | None = None, *, facts: Mapping[str, object] | None = None, **overrides: Any
) -> LongTermMemory:
    """A memory on ``index`` of the store the options name (default: the index given, else the
    facade's own default); ``overrides`` go into its ``backend_config``, ``facts`` to the facade."""
    from ..memory import LongTermMemory

    opts = root_options(ctx)
    cfg = dict(opts["config"])
    cfg.update(overrides)
    kwargs: dict[str, Any] = {"backend_config": cfg}
    if opts["backend"]:
        kwargs["backend"] = opts["backend"]
    index = index or given_index(ctx)
    if index:
        kwargs["index"] = cfg["index"] = index
    if facts is not None:
        kwargs["facts"] = dict(facts)
    return LongTermMemory(**kwargs)


def factory(ctx: click.Context, **overrides: Any) -> MemoryFactory:
    """Opens a memory on a named index of the store the options name (``locate``'s factory)."""
    return lambda index: open_memory(ctx, index, **overrides)


@asynccontextmanager
async def with_memory(
    ctx: click.Context,
    app_name: str | None = None,
    user_id: str | None = None,
    *,
    index: str | None = None,
    facts: Mapping[str, object] | None = None,
    **overrides: Any,
) -> AsyncIterator[LongTermMemory]:
    """The memory a command works on (module docstring), closed when the block ends; the
    probes that find (app, user) are opened without ``facts``, so finding distils nothing."""
    try:
        if index is None and app_name is not None and user_id is not None:
            index = await locate_index(factory(ctx, **overrides), app_name, user_id, index=given_index(ctx))
        async with open_memory(ctx, index, facts=facts, **overrides) as memory:
            yield memory
    except LongTermMemoryError as exc:
        fail(str(exc))


async def listed_indices(ctx: click.Context) -> tuple[str, list[str]]:
    """The backend's name and the indices a whole-store command covers: the one given, else
    every index of the store holding memories (``LongTermMemory.indices``)."""
    given = given_index(ctx)
    async with with_memory(ctx) as probe:
        return probe.backend_name, [given] if given else await probe.indices()
