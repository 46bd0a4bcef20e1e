"""``longterm ui``: serve the inspector on http://127.0.0.1:8765/ (or ``--host``/``--port``).

The seam: ``ui``, a click command the ``longterm`` group adds (``cli.add_command(ui)``); it
takes the group's ``--backend``/``--config``/``--index`` from ``ctx.obj`` as every command
does (run alone, the defaults). ``--port 0`` picks a free port and prints it.

Why it refuses to start off loopback without a token file: the pages show every word every
user said; on 127.0.0.1 only this machine's users reach them, anywhere else a token must.
Why the socket is bound here, not by uvicorn: a busy port is an ``OSError`` the group prints
as one ``error:`` line, and the printed port is the one really bound.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from .._net import bind
from ..config import embedded_store
from ..errors import ConfigurationError, require

if TYPE_CHECKING:
    from ..memory import LongTermMemory

#: Addresses only this machine reaches.
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _options(ctx: click.Context) -> dict[str, Any]:
    """The group's options (``cli``'s ``ctx.obj``), or the defaults when run alone."""
    obj = ctx.find_root().obj
    if not isinstance(obj, dict):
        obj = {}
    return {"backend": obj.get("backend"), "config": dict(obj.get("config") or {}), "index": obj.get("index")}


def _factory(opts: dict[str, Any]) -> Callable[[str], LongTermMemory]:
    """Opens a memory on a named index of the store the options name (the CLI's ``_memory``)."""

    def open_(index: str) -> LongTermMemory:
        from ..memory import LongTermMemory

        cfg = dict(opts["config"])
        kwargs: dict[str, Any] = {"backend_config": cfg, "index": index}
        cfg["index"] = index
        if opts["backend"]:
            kwargs["backend"] = opts["backend"]
        return LongTermMemory(**kwargs)

    return open_


@click.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind; any but loopback needs --tokens."
)
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port (0: pick one).")
@click.option("--allow-erase", is_flag=True, help="Allow erasing memories, sessions and users (read-only without).")
@click.option(
    "--tokens",
    "tokens_file",
    envvar="LONGTERM_UI_TOKENS",
    type=click.Path(dir_okay=False),
    default=None,
    help='Token file (the MCP format, docs/mcp.md; "admin": true sees every user). Required off loopback.',
)
@click.pass_context
def ui(ctx: click.Context, host: str, port: int, allow_erase: bool, tokens_file: str | None) -> None:
    """Browse, search, explain and erase users' memories and facts in a web browser.

    Read-only unless --allow-erase. Bound to 127.0.0.1; with --host set to any other address it
    needs --tokens (or LONGTERM_UI_TOKENS), and each token sees only the user it names.
    """
    if host not in LOOPBACK and not tokens_file:
        click.echo(
            f"error: --host {host} is not a loopback address: pass --tokens FILE (or LONGTERM_UI_TOKENS) "
            "so that only token holders see memories, each only their own user's (see docs/ui.md).",
            err=True,
        )
        raise SystemExit(2)
    require("starlette", package="starlette", extra="ui", purpose="longterm ui")
    require("uvicorn", package="uvicorn", extra="ui", purpose="longterm ui")
    import uvicorn

    from .app import ui_app
    from .data import Inspector
    from .security import Access

    opts = _options(ctx)
    from ..memory.settings import default_backend

    store = embedded_store((opts["backend"] or default_backend()).strip().lower(), opts["config"])
    if store is not None and not store.exists():  # a read-only look creates nothing
        raise ConfigurationError(f"no store at {store}: nothing was saved there yet; run where the store is.")
    access = Access.load(tokens_file) if tokens_file else Access.open_local()
    inspector = Inspector(_factory(opts), index=opts["index"] or opts["config"].get("index") or None)
    app = ui_app(inspector, access, host=host, allow_erase=allow_erase)
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    mode = "erase allowed" if allow_erase else "read-only"
    print(f"longterm ui: serving on http://{shown}:{sock.getsockname()[1]}/ ({mode})", file=sys.stderr, flush=True)
    if host not in LOOPBACK:
        print(
            "longterm ui: not a loopback address; put TLS in front (the login cookie travels in every request)",
            file=sys.stderr,
            flush=True,
        )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    asyncio.run(server.serve(sockets=[sock]))
