"""``core.windows``: neighbours read by time answer exactly what the whole session answers.

The seam: a ``TimeWindows`` engine over a list of records (``_time_windows`` sorts and cuts it as
an engine's ordered query would) against ``core.neighbours``' default, which reads each anchor's
session whole. Sessions with many records of one time (ties at a read's far end), anchors at the
edges, several anchors of one session, and an anchor no longer stored, with random windows.
And ``core.erasures``: what an erasure's mark covers.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

from longterm.core.erasures import Erasure
from longterm.core.neighbours import SessionReads, Sessions, by_session
from longterm.core.windows import Ask, TimeWindows
from longterm.records import MemoryRecord, Scope, record_id

SCOPE = Scope(app_name="a", user_id="u")


def _records(rng: random.Random) -> list[MemoryRecord]:
    out = []
    for s in range(3):
        t = 1_700_000_000.0
        for e in range(rng.randint(1, 40)):
            t += rng.choice((0.0, 0.0, 1.0, 5.0))  # many ties
            sid, eid = f"s{s}", f"e{rng.randint(0, 10**6):07d}-{e}"
            rid = record_id("a", "u", sid, eid)
            out.append(
                MemoryRecord(id=rid, app_name="a", user_id="u", session_id=sid, event_id=eid, text=eid, timestamp=t)
            )
    return out


class Whole(SessionReads):
    def __init__(self, records: list[MemoryRecord]) -> None:
        self.records = records

    async def _read(self, what: str, fn, *args):  # type: ignore[no-untyped-def]
        return fn(*args)

    def _session_rows(self, scope: Scope, session_ids: Sequence[str]) -> Sessions:
        return by_session(r for r in self.records if r.session_id in session_ids)


class Windows(TimeWindows, Whole):
    asked = 0

    def _time_windows(self, scope: Scope, asks: Sequence[Ask]) -> list[list[MemoryRecord]]:
        out = []
        for a in asks:
            mine = [r for r in self.records if r.session_id == a.session_id]
            side = [r for r in mine if (r.timestamp <= a.at if a.before else r.timestamp >= a.at)]
            side.sort(key=lambda r: r.timestamp, reverse=a.before)  # by time only, as an engine orders
            out.append(side[: a.limit])
        self.asked += len(asks)
        return out


def test_windows_by_time_answer_as_whole_sessions_do() -> None:
    rng = random.Random(43)
    for _ in range(300):
        records = _records(rng)
        anchors = rng.sample(records, min(len(records), rng.randint(1, 6)))
        if rng.random() < 0.2:  # an anchor the store no longer holds
            gone = anchors[0]
            records = [r for r in records if r.id != gone.id]
        before, after = rng.randint(0, 4), rng.randint(0, 4)
        want = asyncio.run(Whole(records).neighbours(SCOPE, anchors, before, after))
        got = asyncio.run(Windows(records).neighbours(SCOPE, anchors, before, after))
        assert got == want


def test_an_erasure_covers_its_scope_session_and_filter_saved_before_it() -> None:
    r = MemoryRecord(id="x", app_name="a", user_id="u", session_id="s1", event_id="e", text="t", timestamp=100.0)
    whole = Erasure("a", "u").stamped(10)
    assert whole.covers(r, 9) and whole.covers(r, 10) and whole.covers(r, None)
    assert not whole.covers(r, 11)  # saved after the erase began
    assert not Erasure("a", "other").stamped(10).covers(r, 1)
    assert not Erasure("a", "u", "s2").stamped(10).covers(r, 1)
    assert Erasure("a", "u", filter={"timestamp": {"$lte": 100}}).stamped(10).covers(r, 1)
    assert not Erasure("a", "u", filter={"timestamp": {"$lt": 100}}).stamped(10).covers(r, 1)
    mark = Erasure("a", "u", "s1", {"role": ""}).stamped(7)
    assert Erasure.of(mark.spec(), 7) == mark
