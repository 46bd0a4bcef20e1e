"""Sweeping in the background: what a memory saved with an expiry is erased soon after it expires.

The seam: ``Sweeps(portal, sweep, clock)``; a save that wrote memories expiring at ``at`` calls
``due(scope, at)`` (from any thread), and a timer on the memory's own loop sweeps that scope
(``sweep(scope)``: ``correcting.Corrector.sweep``) once the clock passed ``at``; ``cancel()`` at
close drops what is pending. A sweep that fails is logged and left to the next one (``longterm
delete --expired`` sweeps on demand).

Why only a tidy-up: reads never return what expired from its moment on, sweep or no sweep (every
read is made at a moment: ``core.where.living``); the sweep takes the words out of the store's
files, with an erase's guarantees. Why only what this process saved: another process sweeps what
it saved, and ``delete --expired`` what no running process holds.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable

from .._sync import SyncPortal
from ..records import Scope

log = logging.getLogger(__name__)

#: Seconds after a memory's moment its sweep starts (a save and its expiry racing each other settle first).
GRACE = 0.05
#: Most seconds a sweep runs after its moment (what a scope's moments are rounded up by, at most).
LATEST = 600.0
#: Longest a timer waits before it looks again (the clock a test injects may have moved meanwhile).
LONGEST = 3_600.0


class Sweeps:
    """The memory's pending sweeps, by scope (see the module docstring)."""

    def __init__(
        self, portal: Callable[[], SyncPortal], sweep: Callable[[Scope], Awaitable[int]], clock: Callable[[], float]
    ) -> None:
        self._portal, self._sweep, self._clock = portal, sweep, clock
        self._timers: dict[Scope, tuple[float, asyncio.TimerHandle]] = {}
        self._moments: dict[Scope, set[float]] = {}
        """Each scope's moments still to sweep at (``_moment``), the timer's the earliest."""
        self._closed = False

    def due(self, scope: Scope, at: float) -> None:
        """Memories of ``scope`` expire at ``at``: sweep them then (any thread)."""
        if not self._closed:
            self._portal().post(self._arm, scope, at)

    def _moment(self, at: float) -> float:
        """``at`` rounded up to a hundredth of the time left until it (0.1 s to ``LATEST``): a sweep then
        covers the saves of that stretch, so a user saving all day holds a few hundred moments, not one each."""
        step = min(LATEST, max(0.1, (at - self._clock()) / 100))
        return math.ceil(at / step) * step

    def _arm(self, scope: Scope, at: float) -> None:
        """On the memory's loop: ``at`` kept among the scope's moments (``_schedule`` times the earliest)."""
        if not self._closed:
            self._moments.setdefault(scope, set()).add(self._moment(at))
            self._schedule(scope)

    def _schedule(self, scope: Scope) -> None:
        """A timer for ``scope`` at its earliest moment, unless one is set for that or earlier."""
        first = min(self._moments[scope])
        held = self._timers.get(scope)
        if held is not None and held[0] <= first:
            return
        if held is not None:
            held[1].cancel()
        delay = min(LONGEST, max(0.0, first - self._clock()) + GRACE)
        loop = asyncio.get_running_loop()
        self._timers[scope] = (first, loop.call_later(delay, self._fire, scope, first))

    def _fire(self, scope: Scope, at: float) -> None:
        self._timers.pop(scope, None)
        if self._closed:
            return
        now = self._clock()
        if now < at:  # the clock has not reached it yet (a long wait, or a clock a test holds)
            self._schedule(scope)
            return
        later = {m for m in self._moments.pop(scope, set()) if m > now}
        asyncio.ensure_future(self._run(scope))
        if later:  # what later saves let expire after this moment: swept at its own
            self._moments[scope] = later
            self._schedule(scope)

    async def _run(self, scope: Scope) -> None:
        try:
            await self._sweep(scope)
        except Exception as exc:  # a tidy-up: reads are right without it; the next sweep tries again
            why = f"{type(exc).__name__}: {exc}"
            log.warning("sweeping expired memories failed (%s); `longterm delete --expired` sweeps them", why)

    def cancel(self) -> None:
        """At close: no sweep starts any more (the timers still held fire as no-ops, or stop with the loop)."""
        self._closed = True
        self._moments.clear()
