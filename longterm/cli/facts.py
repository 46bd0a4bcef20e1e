"""``longterm facts``: the fact layer from the command line (profile, list, history, distill,
consolidate, rebuild).

The seam: ``facts``, a click group the ``longterm`` command adds. It takes the root's
``--backend``/``--config``/``--index`` and the model from ``--base-url``/``--model``/
``--api-key`` or ``LONGTERM_FACTS_*``; every subcommand runs one job on a memory with facts on,
opened by ``with_memory`` on the index holding (app, user) (the probes that find it run
without facts: finding distils nothing) and closed after. Errors leave as the root's one
``error:`` line.

Why ``distill`` mutes the fact layer's warnings: each failed batch logs one, and the command
says in its own single line how many records still wait and why (``memory.facts_error``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

import click

from ..errors import ConfigurationError
from ..facts import ModelError
from .opening import require_store, with_memory
from .output import muted

if TYPE_CHECKING:
    from ..memory import LongTermMemory

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., None])


def _user(fn: F) -> F:
    """``--app`` and ``--user``: whose facts."""
    fn = click.option("--user", "user_id", required=True)(fn)
    return click.option("--app", "app_name", required=True)(fn)


def _run(ctx: click.Context, app_name: str, user_id: str, job: Callable[[LongTermMemory], Awaitable[T]]) -> T:
    """``job(memory)`` on the index of the store that holds (app, user) (``locate``'s rule)."""
    model: dict[str, str | None] = ctx.find_object(dict) or {}
    if not (model.get("base_url") and model.get("model")):
        raise ConfigurationError(
            "longterm facts needs the fact model: pass --base-url and --model (or set LONGTERM_FACTS_BASE_URL "
            "and LONGTERM_FACTS_MODEL)."
        )
    require_store(ctx)  # no store holds no facts: none is made to say so

    async def go() -> T:
        async with with_memory(ctx, app_name, user_id, facts=model) as memory:
            return await job(memory)

    return asyncio.run(go())


def _echo_json(value: object) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


@click.group()
@click.option("--base-url", envvar="LONGTERM_FACTS_BASE_URL", default=None, help="OpenAI-compatible API base URL.")
@click.option("--model", envvar="LONGTERM_FACTS_MODEL", default=None, help="Chat model name.")
@click.option("--api-key", envvar="LONGTERM_FACTS_API_KEY", default=None, help="API key (better: the variable).")
@click.pass_context
def facts(ctx: click.Context, base_url: str | None, model: str | None, api_key: str | None) -> None:
    """Facts distilled from saved conversations: read, tidy, rebuild."""
    ctx.obj = {"base_url": base_url, "model": model, "api_key": api_key}


@facts.command()
@_user
@click.pass_context
def profile(ctx: click.Context, app_name: str, user_id: str) -> None:
    """Print the user's current profile (what an agent preloads)."""
    text = _run(ctx, app_name, user_id, lambda m: m.get_user_profile(user_id, app_name=app_name))
    click.echo(text or "(no facts)")


@facts.command("list")
@_user
@click.option("--all", "everything", is_flag=True, help="Superseded facts too.")
@click.option("--as-of", default=None, help="Facts true at this ISO 8601 time.")
@click.pass_context
def list_(ctx: click.Context, app_name: str, user_id: str, everything: bool, as_of: str | None) -> None:
    """Print the user's facts as JSON, oldest first."""
    try:
        when = datetime.fromisoformat(as_of).timestamp() if as_of else None
    except ValueError:
        raise click.BadParameter(f"{as_of!r} is not an ISO 8601 time", param_hint="--as-of") from None
    _echo_json(
        _run(
            ctx,
            app_name,
            user_id,
            lambda m: m.list_facts(app_name=app_name, user_id=user_id, include_superseded=everything, as_of=when),
        )
    )


@facts.command()
@click.argument("fact_id")
@_user
@click.pass_context
def history(ctx: click.Context, fact_id: str, app_name: str, user_id: str) -> None:
    """Print a fact's trail as JSON: what it replaced, itself, what replaced it."""
    _echo_json(
        _run(ctx, app_name, user_id, lambda m: m.fact_history(app_name=app_name, user_id=user_id, fact_id=fact_id))
    )


@facts.command()
@_user
@click.pass_context
def distill(ctx: click.Context, app_name: str, user_id: str) -> None:
    """Distil the user's evidence that is not distilled yet (after a stop or an outage).

    Exits 1 with one error line while records still wait (the model is down or failing)."""

    async def job(memory: LongTermMemory) -> tuple[int, str | None]:
        left = await memory.distill_facts(app_name=app_name, user_id=user_id)
        return left, memory.facts_error

    with muted("longterm.facts"):  # its warning of each failed batch: the reason goes in the line
        left, why = _run(ctx, app_name, user_id, job)
    if left:
        records, wait = ("1 record", "waits") if left == 1 else (f"{left} records", "wait")
        raise ModelError(
            f"{records} of user {user_id!r} in app {app_name!r} still {wait} to be distilled: "
            f"{(why or 'the fact model failed').rstrip('.')}. Nothing is lost: check the model (--base-url, "
            "--model, --api-key) and run `longterm facts distill` again (a later save retries too)."
        )
    click.echo("all evidence distilled")


@facts.command()
@_user
@click.pass_context
def consolidate(ctx: click.Context, app_name: str, user_id: str) -> None:
    """Merge duplicate facts and resolve contradictions (nothing is destroyed)."""
    result = _run(ctx, app_name, user_id, lambda m: m.consolidate_facts(app_name=app_name, user_id=user_id))
    click.echo(f"current facts: {result['before']} before, {result['after']} after")


@facts.command()
@_user
@click.option("--with-model", default=None, help="Another model for this rebuild.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def rebuild(ctx: click.Context, app_name: str, user_id: str, with_model: str | None, yes: bool) -> None:
    """Replace the user's facts with facts distilled afresh from all their evidence."""
    if not yes and not click.confirm(f"Replace every fact of user {user_id!r} in app {app_name!r}?", default=False):
        raise click.Abort()
    overrides = {"model": with_model} if with_model else {}
    result = _run(ctx, app_name, user_id, lambda m: m.rebuild_facts(app_name=app_name, user_id=user_id, **overrides))
    click.echo(f"{result['events']} events read; facts: {result['before']} before, {result['after']} after")
