"""The memory a command works on: the store the root options name, opened, used, closed.

The seam: ``with_memory(ctx, app_name, user_id)`` (``async with``) opens a ``LongTermMemory``
on the index holding (app, user) by ``locate.RULE``, on ``index=`` when the command found it
already, or on the index given (else the facade's default) when it names no user; a
``LongTermMemoryError`` from opening, the block or closing leaves as the one ``error:`` line,
and the memory is closed on every path. ``open_memory`` and ``factory`` open without closing,
for what keeps a memory of its own (``doctor``, the MCP server, ``locate``'s probes);
``listed_indices`` names the indices a whole-store command covers. ``json_object`` reads a
JSON option given inline or as ``@file.json``. Before anything opens the store, ``check_store``
(in ``with_memory`` and ``factory``) validates the configuration as the engine reads it, before
any path it names is read, and refuses a local path that is a directory or no SQLite file;
``require_store`` refuses a store that does not exist to a command that needs what it holds.

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

from ..config import embedded_store
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


def with_uri(ctx: click.Context, uri: str | None, options: RootOptions) -> RootOptions:
    """The root ``options`` over the store ``--uri`` (or ``LONGTERM_URI``) names (``longterm.uri``):
    ``--config``'s keys and ``--index`` win over the URI's; a ``--backend`` typed on the command line
    wins over a URI from the environment and is refused beside a typed ``--uri``."""
    source = click.core.ParameterSource
    typed_backend = ctx.get_parameter_source("backend") == source.COMMANDLINE
    if uri is None or (typed_backend and ctx.get_parameter_source("uri") != source.COMMANDLINE):
        return options
    if typed_backend:
        raise click.UsageError("pass --uri or --backend, not both: the URI names the backend.")
    from ..uri import parse_uri

    args = parse_uri(uri)
    config = {**args["backend_config"], **options["config"]}
    return {"backend": args["backend"], "config": config, "index": options["index"] or args.get("index")}


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
    """Opens a memory on a named index of the store the options name (``locate``'s factory); the
    store is checked first (``check_store``), before any probe opens it."""
    check_store(ctx, **overrides)
    return lambda index: open_memory(ctx, index, **overrides)


def check_config(ctx: click.Context, **overrides: Any) -> None:
    """The options' ``backend_config`` as the engine reads it (a memory built, never opened): a key
    or value it refuses is its own ``ConfigurationError`` ("'path': Input should be a valid
    string"), raised before anything reads the path the configuration names."""
    open_memory(ctx, **overrides).close_sync(flush=False)


def _backend(ctx: click.Context) -> str:
    from ..memory.settings import default_backend

    return (root_options(ctx)["backend"] or default_backend()).strip().lower()


def store_path(ctx: click.Context, **overrides: Any) -> Path | None:
    """The file or directory of the embedded store the options name (None: a server), once the
    configuration is valid (``check_config``)."""
    check_config(ctx, **overrides)
    return embedded_store(_backend(ctx), {**root_options(ctx)["config"], **overrides})


def store_where(ctx: click.Context) -> str:
    """The store the options name, as ``stats`` and ``doctor`` print it first: its backend and
    location (a file or directory, or a server's address with no secret); a configuration the
    engine refuses says so (``doctor`` lists why)."""
    backend = root_options(ctx)["backend"] or _backend(ctx)
    try:
        path = store_path(ctx)
    except LongTermMemoryError:
        return f"{backend} (not opened: the configuration is invalid)"
    if path is not None:
        return f"{backend} at {path}"
    memory = open_memory(ctx)  # built, not opened: only its address is read
    where = str(getattr(memory.backend_instance, "where", "") or "?")
    memory.close_sync(flush=False)
    return f"{memory.backend_name} at {where}"


def require_store(ctx: click.Context) -> None:
    """The first step of a command that needs what a store holds (a read, an erase, an update): "no
    store at PATH" (exit 1) where the embedded store the options name does not exist, instead of
    creating an empty one to find nothing in it."""
    path = check_store(ctx)
    if path is not None and not path.exists():
        fail(
            f"no store at {path}: nothing was saved there yet. Run where the store is, or name it "
            """(--config '{"path": "..."}', LONGTERM_HOME)."""
        )


#: The first bytes of every SQLite database file (an empty file is one too: SQLite writes it).
SQLITE_HEADER = b"SQLite format 3\x00"


def store_file_problem(backend: str, config: Mapping[str, Any], option: str = "--config") -> str | None:
    """What is wrong with the local store file ``config`` names, before the engine opens it (None:
    nothing, or no local store): a directory, or a file that is no SQLite database (a transcript
    given as the store, a damaged file). The engine would warn about its rights (``chmod 600``)
    and fail with SQLite's words; the path is named once, with what to do (``option``: where the
    path was given)."""
    path = embedded_store(backend.strip().lower(), dict(config))
    if backend.strip().lower() != "local" or path is None:
        return None
    if path.is_dir():
        return f"{path} is a directory: a local store is one file; name a file in it, such as {path / 'memory.db'}."
    try:
        with path.open("rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except OSError:
        return None  # missing (made at the first save) or unreadable: the engine says which
    if head and head != SQLITE_HEADER:
        return (
            f"{path} is not a longterm store (not an SQLite database): name the store's file ({option} "
            """'{"path": "..."}'), or, if it is a damaged store, restore it from a backup or move it aside."""
        )
    return None


def check_store(ctx: click.Context, **overrides: Any) -> Path | None:
    """Every command's check before it opens the store: a valid configuration (``check_config``)
    and, for a local store, a path that is a store file or none yet (``store_file_problem``); the
    embedded store's path (None: a server). Once per command and overrides: ``with_memory``,
    ``require_store`` and ``factory`` each ask it, and each check builds a memory."""
    key = f"longterm.checked {sorted(overrides.items())!r}"
    if key in ctx.meta:
        checked: Path | None = ctx.meta[key]
        return checked
    path = store_path(ctx, **overrides)
    if path is not None:
        problem = store_file_problem(_backend(ctx), {**root_options(ctx)["config"], **overrides})
        if problem is not None:
            fail(problem)
    ctx.meta[key] = path
    return path


async def known_index(ctx: click.Context, memory: LongTermMemory) -> None:
    """An ``--index`` the store does not hold is an error naming the indices it holds."""
    given = given_index(ctx)
    if given is None:
        return
    held = await memory.indices()
    if given not in held:
        listed = ", ".join(repr(i) for i in held) or "none: it holds no memories yet"
        fail(f"index {given!r} is not in this store; its indices: {listed}.")


@asynccontextmanager
async def with_memory(
    ctx: click.Context,
    app_name: str | None = None,
    user_id: str | None = None,
    *,
    index: str | None = None,
    facts: Mapping[str, object] | None = None,
    read_only: bool = False,
    **overrides: Any,
) -> AsyncIterator[LongTermMemory]:
    """The memory a command works on (module docstring), closed when the block ends; the
    probes that find (app, user) are opened without ``facts``, so finding distils nothing.
    ``read_only``: a missing embedded store or an unknown ``--index`` is an error, not created."""
    if read_only:
        require_store(ctx)
    check_store(ctx, **overrides)
    try:
        if index is None and app_name is not None and user_id is not None:
            index = await locate_index(factory(ctx, **overrides), app_name, user_id, index=given_index(ctx))
        async with open_memory(ctx, index, facts=facts, **overrides) as memory:
            if read_only:
                await known_index(ctx, memory)
            yield memory
    except LongTermMemoryError as exc:
        fail(str(exc))


async def listed_indices(ctx: click.Context) -> tuple[str, list[str]]:
    """The backend's name and the indices a whole-store command covers: the one given, else
    every index of the store holding memories (``LongTermMemory.indices``)."""
    given = given_index(ctx)
    async with with_memory(ctx, read_only=True) as probe:
        return probe.backend_name, [given] if given else await probe.indices()
