"""A hit's neighbours on qdrant-edge: a few points each side of each anchor, in session order.

The seam: ``EdgeWindows``, a base of ``QdrantEdgeBackend``, implements ``core.neighbours``'
``_session_positions`` on a store whose every point carries its time in its payload
(``timestamp``, range-indexed; ``common.PACKED_FIELDS``), as ``windows_ready`` finds at open.
For each anchor it asks, in one batch, for the times of the anchor's session ordered by time:
the points at or before the anchor's time, latest first, and those at or after it, earliest
first, each ``SPARE`` more than the window needs. It puts them in session order (by time, then
event id: read from the record only among points of one time) and keeps the anchor and the
``before`` and ``after`` points next to it, whose records it then reads in one call (the keys
are the records; an anchor's own point is read in ``_records_at``, when another anchor wants it).

Why: the whole-session read (``common._session_rows``) parsed every record of each hit's
session; at 100k records, five hits in sessions of 100 turns, that was 17 ms of a search whose
full-text query took 0.5 ms (``bench/qdrant_embedded.py``). Why no ``event_id`` in the payload
too: qdrant-edge converts a payload key by key (~15-30 us a write), and ties are rare.

Why the check: Qdrant orders by time alone and a read stops at its limit, so points of one
time may be cut at a read's far end. A window is kept only where what it takes lies strictly
inside what its reads saw whole (or a read came back short: it saw all there is); otherwise,
and for an anchor not found as it was given (erased, moved in time, another scope's), the
anchor's session is read whole as before, which answers every case exactly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from typing_extensions import override

from ...core.neighbours import Positions, SessionReads, Sessions
from ...records import MemoryRecord, Scope
from .common import point_id, to_record

#: Points each ordered read takes beyond the anchor and its window: a tie at the window's far
#: end is seen to be one (and then the session is read whole).
SPARE = 2
TIME = "timestamp"
#: (field, schema type name) of the indexes the windows stand on, beside the scope's.
WINDOW_INDEXES = (("session_id", "Keyword"), (TIME, "Float"))


def windows_ready(e: Any, shard: Any) -> bool:
    """Whether ``shard`` can answer windows: ``TIME`` range-indexed, ``session_id`` indexed, and
    no point without ``TIME`` (a store written before it was kept, or by such a release since:
    its sessions are read whole)."""
    schema = shard.info().payload_schema
    if any(field not in schema for field, _ in WINDOW_INDEXES):
        return False
    lacking = e.Filter(must=[e.IsEmptyCondition(TIME)])
    return int(shard.count(e.CountRequest(exact=True, filter=lacking))) == 0


#: A point kept: (its place in its session, its record's id, the key ``_records_at`` reads it by:
#: the record, or for an anchor's own point its point id, read only when another anchor wants it).
Row = tuple[tuple[float, str], str, object]
#: The points an anchor's window takes, in session order: (place, point id); the anchor's own among them.
Window = list[tuple[tuple[float, str], Any]]


class Side(NamedTuple):
    """One ordered read around an anchor: the ``n`` points before it (``before``) or after it."""

    before: bool
    n: int

    @property
    def limit(self) -> int:
        return self.n + 1 + SPARE


class EdgeWindows(SessionReads):
    """``_session_positions`` by ordered reads around each anchor (see the module docstring)."""

    if TYPE_CHECKING:  # ``QdrantEdgeBackend``'s, which this is a base of
        _e: Any
        _shard: Any

        def _filter(
            self,
            scope: Scope,
            ids: Sequence[str] | None = None,
            session_id: str | None = None,
            sessions: Sequence[str] | None = None,
            also: Sequence[Any] = (),
        ) -> Any: ...

        def _session_rows(self, scope: Scope, session_ids: Sequence[str]) -> Sessions: ...

    windowed: bool = False
    """Set at open: the store answers windows (``windows_ready``); else sessions are read whole."""

    @override
    def _session_positions(self, scope: Scope, anchors: Sequence[MemoryRecord], before: int, after: int) -> Positions:
        if not anchors:
            return {}
        if not self.windowed:
            return super()._session_positions(scope, anchors, before, after)
        e = self._e
        sides = [side for side in (Side(True, before), Side(False, after)) if side.n]
        requests = [  # the points' times only: the records are read for the points kept
            e.QueryRequest(
                limit=side.limit,
                query=e.OrderBy(TIME, e.Direction.Desc if side.before else e.Direction.Asc, a.timestamp),
                filter=self._filter(scope, session_id=a.session_id),
                with_payload=[TIME],
            )
            for a in anchors
            for side in sides
        ]
        answers = iter(self._shard.query_batch(e.QueryBatchRequest(requests)))
        records: dict[Any, MemoryRecord] = {}  # by point id
        read = self._read_into(records)
        windows = [_window(a, [(side, list(next(answers))) for side in sides], before, after, read) for a in anchors]
        owns = {_own(a): a.id for a in anchors}  # an anchor's own point is read only if another wants it
        read(pid for w in windows for _, pid in w or () if str(pid) not in owns)
        kept: dict[str, dict[Any, Row]] = {}  # by session, by point id
        whole: list[str] = []
        for a, window in zip(anchors, windows, strict=True):
            if window is None or any(pid not in records and str(pid) not in owns for _, pid in window):
                whole.append(a.session_id)  # (or a point erased since its time was read)
                continue
            rows = kept.setdefault(a.session_id, {})
            for place, pid in window:
                if pid in records:
                    rows[pid] = (place, records[pid].id, records[pid])
                else:
                    rows.setdefault(pid, (place, owns[str(pid)], pid))
        positions = {
            sid: [(rid, key) for _, rid, key in sorted(rows.values(), key=_first)] for sid, rows in kept.items()
        }
        if whole:  # these sessions' every record (which holds every window of them)
            sessions = self._session_rows(scope, list(dict.fromkeys(whole)))
            positions.update({sid: [(r.id, r) for r in sessions.get(sid, [])] for sid in whole})
        return positions

    @override
    def _records_at(self, scope: Scope, keys: Sequence[object]) -> list[MemoryRecord | None]:
        """The records kept; an anchor's own point (its point id) read now, when another anchor wants it."""
        records: dict[Any, MemoryRecord] = {}
        self._read_into(records)(k for k in keys if not isinstance(k, MemoryRecord))
        return [k if isinstance(k, MemoryRecord) else records.get(k) for k in keys]

    def _read_into(self, records: dict[Any, MemoryRecord]) -> Callable[[Iterable[Any]], dict[Any, MemoryRecord]]:
        """A reader of points' records by point id (one call for all), into ``records``."""

        def read(pids: Iterable[Any]) -> dict[Any, MemoryRecord]:
            wanted = list(dict.fromkeys(pid for pid in pids if pid not in records))
            if wanted:
                got = self._shard.retrieve(wanted, with_payload=True, with_vector=False)
                records.update((p.id, to_record(p.payload)) for p in got)
            return records

        return read


def _own(anchor: MemoryRecord) -> str:
    return point_id(anchor.id)


def _first(row: Row) -> tuple[float, str]:
    return row[0]


def _window(
    anchor: MemoryRecord,
    reads: list[tuple[Side, list[Any]]],
    before: int,
    after: int,
    read: Callable[[Iterable[Any]], dict[Any, MemoryRecord]],
) -> Window | None:
    """From the ordered reads around ``anchor`` (points with their times), the anchor's point and
    its ``before`` and ``after`` neighbours' in session order; None when the reads cannot say them
    exactly (see the module docstring). ``read`` reads records, of points of one time only."""
    seen = {p.id: p for _, points in reads for p in points}
    wanted = _own(anchor)
    own = next((p for p in seen.values() if str(p.id) == wanted), None)
    if own is None or own.payload[TIME] != anchor.timestamp:
        return None
    ties = Counter(p.payload[TIME] for p in seen.values())
    tied = read(p.id for p in seen.values() if ties[p.payload[TIME]] > 1) if len(ties) < len(seen) else {}

    def place(p: Any) -> tuple[float, str]:
        """Session order: by time, then event id (which only points of one time need)."""
        at = p.payload[TIME]
        record = tied.get(p.id) if ties[at] > 1 else None
        return at, record.event_id if record is not None else ""

    order = sorted(seen.values(), key=place)
    at = next(i for i, p in enumerate(order) if p is own)
    taken = {True: order[max(0, at - before) : at], False: order[at + 1 : at + 1 + after]}
    for side, points in reads:
        if len(points) < side.limit:  # the read came back short: it saw all there is on that side
            continue
        part, times = taken[side.before], [p.payload[TIME] for p in points]
        # the read's far end: more points of that time may lie beyond it, so none of it is taken
        inside = (
            all(p.payload[TIME] > min(times) for p in part)
            if side.before
            else all(p.payload[TIME] < max(times) for p in part)
        )
        if len(part) < side.n or not inside:
            return None
    return [(place(p), p.id) for p in (*taken[True], own, *taken[False])]
