"""Reading facts: a user's facts, profile and a fact's history, from the store as it is.

The seam: ``facts(backend, scope, current=..., as_of=...)``, ``profile(backend, scope,
limit)`` and ``history(backend, scope, fact_id)``, each reading the user's records through
the backend contract's ``scan``.

Why from the store and on the caller's loop: a read never waits for the worker or a model,
and sees every process's facts, not a cache of this one's.
"""

from __future__ import annotations

from typing import Any

from ..core.backend import Backend
from ..records import Scope
from .model import Fact, same_subject, trail


async def facts(backend: Backend, scope: Scope, *, current: bool = True, as_of: float | None = None) -> list[Fact]:
    """The user's facts, oldest first: the current ones, those valid at ``as_of``, or
    (``current=False``) all of them, superseded included."""
    out = []
    async for rec in backend.scan(scope):
        fact = Fact.of(rec)
        if fact is None:
            continue
        if as_of is not None:
            if fact.valid_from <= as_of and (fact.valid_until is None or as_of < fact.valid_until):
                out.append(fact)
        elif fact.current or not current:
            out.append(fact)
    return sorted(out, key=lambda f: (f.valid_from, f.id))


async def profile(backend: Backend, scope: Scope, limit: int) -> str:
    """The current facts as a compact list of at most ``limit`` characters: the user's own
    first, then others'."""
    found = sorted(await facts(backend, scope), key=lambda f: (not same_subject(f.subject, "user"), f.valid_from))
    lines, size = [], 0
    for f in found:
        line = f"- {f.text}"
        if size + len(line) + 1 > limit:
            continue  # one long fact does not hide the shorter ones after it
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


async def history(backend: Backend, scope: Scope, fact_id: str) -> list[dict[str, Any]]:
    """The trail of ``fact_id``: the facts it replaced, itself, and what replaced it, oldest first."""
    every = {f.id: f for f in await facts(backend, scope, current=False)}
    return [f.as_dict() for f in trail(every, fact_id)]
