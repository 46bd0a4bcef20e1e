"""The ``longterm`` command: demo, import, search, stats, export, delete, migrate, reembed, mcp,
doctor, facts, ui.

The seam: ``cli``, the click group (``main()`` runs it as ``longterm``, the console script;
``python -m longterm.cli`` runs it too). Every command takes the same ``--backend``/
``--config``/``--index`` options as the facade, so what works here works in code; without
``--index``, a command naming (app, user) uses the index of the store holding them
(``longterm.locate``, the rule the MCP server follows too); ``stats`` and ``migrate`` cover
every index of the store. Where things are: ``opening`` (``with_memory``, the one way a
command opens and closes its memory), ``output`` (what is printed, the one-line errors),
``commands``, ``transfer``, ``reembed``, ``serving`` and ``facts`` (the commands, by job); ``longterm ui``
comes from ``longterm.ui.cli``.

Why every failure is one line: an operator reads ``error: <what failed, what to do>`` on
stderr and exit status 1, never a traceback (``output.errors_as_one_line``, which the group
runs every command under).
"""

from __future__ import annotations

import click
from typing_extensions import override

from ..locate import RULE
from ..ui.cli import ui  # click only; Starlette is imported when `longterm ui` runs
from .commands import delete, demo, doctor, search, stats
from .facts import facts
from .opening import check_store, json_object, with_uri
from .output import errors_as_one_line, log_in_one_line
from .reembed import reembed
from .serving import mcp
from .transfer import export, import_, migrate, update


class Commands(click.Group):
    """The ``longterm`` group: its own options are read before or after the command's name
    (``longterm search ... --index travel`` as ``longterm --index travel search ...``), and
    whatever a command raises leaves as one ``error:`` line."""

    @override
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoisted(self, args))

    @override
    def invoke(self, ctx: click.Context) -> object:
        with errors_as_one_line():
            return super().invoke(ctx)


def hoisted(group: click.Group, args: list[str]) -> list[str]:
    """``args`` with the group's own value options (``--index X``, ``--config=...``) that stand after
    the command's name moved before it, unless that command (or one of its subcommands) takes an
    option of the same name; nothing after ``--`` moves."""
    names = {n for p in group.params if isinstance(p, click.Option) and not p.is_flag for n in p.opts}
    at = next((i for i, a in enumerate(args) if a in group.commands), None)
    if at is None:
        return args
    command = group.commands[args[at]]
    names -= _option_names(command)
    front, rest, moved = list(args[:at]), [], []
    tail = args[at:]
    i = 0
    while i < len(tail):
        arg = tail[i]
        if arg == "--":
            rest += tail[i:]
            break
        name = arg.split("=", 1)[0]
        if name in names and i > 0:
            if "=" in arg:
                moved.append(arg)
                i += 1
                continue
            if i + 1 < len(tail):
                moved += [arg, tail[i + 1]]
                i += 2
                continue
        rest.append(arg)
        i += 1
    return front + moved + rest


def _option_names(command: click.Command) -> set[str]:
    found = {n for p in command.params for n in getattr(p, "opts", ())}
    for sub in getattr(command, "commands", {}).values():
        found |= _option_names(sub)
    return found


@click.group(
    cls=Commands,
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
@click.option(
    "--uri",
    envvar="LONGTERM_URI",
    default=None,
    help="The store as one URI: longterm:///path/to/memory.db, longterm+redis://host:port/0, ... "
    "(--backend typed here, --config's keys and --index win over it).",
)
@click.version_option(package_name="longterm")
@click.pass_context
def cli(ctx: click.Context, backend: str | None, config: str | None, index: str | None, uri: str | None) -> None:
    if ctx.invoked_subcommand != "mcp":  # the server's stderr is a log: tracebacks of our bugs stay in it
        log_in_one_line()
    ctx.obj = with_uri(ctx, uri, {"backend": backend, "config": json_object("--config", config), "index": index})
    if ctx.invoked_subcommand == "ui":  # it reads the store's path itself (longterm.ui.cli): checked here first
        check_store(ctx)


for _command in (demo, import_, search, stats, export, delete, update, migrate, reembed, mcp, doctor, facts, ui):
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="longterm")


__all__ = ["cli", "main"]
