"""A hit's neighbours read by time: the few records of its session just before and after it.

The seam: ``TimeWindows``, a base an engine puts before ``Engine``, implements
``core.neighbours``' ``_session_positions`` over one primitive, ``_time_windows(scope, asks)``:
for each ``Ask`` (a session, a time, a side, a limit) the session's records at or before that
time, latest first (or at or after it, earliest first), at most ``limit``, all asks answered in
one round trip where the client allows (Redis a pipeline, OpenSearch one ``_msearch``, Qdrant a
batch). For each anchor the core asks for ``before + 1 + SPARE`` records on one side and
``after + 1 + SPARE`` on the other, puts what came back in session order (by time, then event
id), and keeps the anchor and its ``before`` and ``after`` neighbours.

Why: records hold no position, so an engine without one read a hit's whole session to find
its neighbours (``_session_rows``): a search for a user whose memories are one 10,000-event
session cost 285-342 ms on Redis, against ~7 ms for the same events in sessions of 50. A read
by time costs what the question asks for, whatever the session holds.

Why the check (as qdrant-edge's ``backends/qdrant/windows``): a read ordered by time stops at its
limit, so records of one time may be cut at its far end, and their order is by event id. A
window is kept only where what it takes lies strictly inside what its reads saw (or a read came
back short: it saw all there is on that side); otherwise, and for an anchor not found as it was
given (erased, or moved in time since), the anchor's session is read whole (``_session_rows``),
which answers every case exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..records import MemoryRecord, Scope
from .neighbours import Positions, SessionReads, Sessions

#: Records each read takes beyond the anchor and its window: a tie at the window's far end is
#: seen to be one (and then the session is read whole).
SPARE = 2


class Ask(NamedTuple):
    """One read of ``_time_windows``: ``session_id``'s records at or before ``at`` (``before``),
    latest first, or at or after it, earliest first; at most ``limit``."""

    session_id: str
    at: float
    before: bool
    limit: int


def _place(r: MemoryRecord) -> tuple[float, str]:
    return r.timestamp, r.event_id


def window(
    anchor: MemoryRecord, reads: Sequence[tuple[Ask, list[MemoryRecord]]], before: int, after: int
) -> list[MemoryRecord] | None:
    """From the reads around ``anchor``, the anchor and its ``before`` and ``after`` neighbours in
    session order; None when the reads cannot say them exactly (see the module docstring)."""
    seen = {r.id: r for _, records in reads for r in records}
    own = seen.get(anchor.id)
    if own is None or own.timestamp != anchor.timestamp or own.session_id != anchor.session_id:
        return None
    order = sorted(seen.values(), key=_place)
    at = next(i for i, r in enumerate(order) if r.id == anchor.id)
    taken = {True: order[max(0, at - before) : at], False: order[at + 1 : at + 1 + after]}
    for ask, records in reads:
        if len(records) < ask.limit:  # short: it saw all there is on that side
            continue
        part, times = taken[ask.before], [r.timestamp for r in records]
        edge = min(times) if ask.before else max(times)
        inside = all((r.timestamp > edge) if ask.before else (r.timestamp < edge) for r in part)
        if len(part) < (before if ask.before else after) or not inside:
            return None
    return [*taken[True], own, *taken[False]]


class TimeWindows(SessionReads):
    """``_session_positions`` by reads ordered by time around each anchor (see the module docstring)."""

    def _time_windows(self, scope: Scope, asks: Sequence[Ask]) -> list[list[MemoryRecord]]:
        """For each of ``asks``, the scope's records of its session on its side of its time, nearest
        first, at most its limit (the anchor's own included: its time is on both sides)."""
        raise NotImplementedError

    def _session_positions(self, scope: Scope, anchors: Sequence[MemoryRecord], before: int, after: int) -> Positions:
        if not anchors:
            return {}
        sides = [(b, n) for b, n in ((True, before), (False, after)) if n]
        asks = [Ask(a.session_id, a.timestamp, b, n + 1 + SPARE) for a in anchors for b, n in sides]
        answers = iter(self._time_windows(scope, asks))
        kept: dict[str, dict[str, MemoryRecord]] = {}
        whole: list[str] = []
        ask_of = iter(asks)
        for a in anchors:
            reads = [(next(ask_of), list(next(answers))) for _ in sides]
            got = window(a, reads, before, after)
            if got is None:
                whole.append(a.session_id)
            else:
                kept.setdefault(a.session_id, {}).update((r.id, r) for r in got)
        positions: Positions = {
            sid: [(r.id, r) for r in sorted(rows.values(), key=_place)] for sid, rows in kept.items()
        }
        if whole:  # these sessions' every record (which holds every window of them)
            sessions: Sessions = self._session_rows(scope, list(dict.fromkeys(whole)))
            positions.update({sid: [(r.id, r) for r in sessions.get(sid, [])] for sid in whole})
        return positions
