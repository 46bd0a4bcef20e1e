"""The contract's context: a hit's session neighbours, read from the store as it is now.

The seam: ``Context``, a mixin of test methods over ``Fixtures``' ``memory`` and
``open_memory``. It asks the engine behind a user's memories (``located``) for the
``neighbours`` of records the memory reads back (``iter_records``), as the facade's search
does for its hits, and checks them by event id: session order (time, then the order saved,
which these sessions give the same as their event ids), a session's edges, sessions of one
turn, an erased turn or anchor, hostile ids of other users and apps, a reopened store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import pytest

from ... import LongTermMemory
from ...records import MemoryRecord, Scope
from .. import make_session
from .isolation import HOSTILE_IDS

#: Neighbours as records, and as event ids: (before, after) of each anchor.
Around = list[tuple[list[MemoryRecord], list[MemoryRecord]]]
Named = list[tuple[list[str], list[str]]]


@runtime_checkable
class HasNeighbours(Protocol):
    """What this suite asks of a backend beyond ``core.backend.Backend`` (every ``Engine`` has it)."""

    async def neighbours(self, scope: Scope, anchors: Sequence[MemoryRecord], before: int, after: int) -> Around: ...


def session(sid: str, turns: Sequence[tuple[str, float, str]], *, app: str = "app", user: str = "u1") -> dict[str, Any]:
    """A session of user turns, each (event id, time, text), saved in the order given."""
    events = [
        {"id": eid, "author": "user", "timestamp": at, "content": {"role": "user", "parts": [{"text": text}]}}
        for eid, at, text in turns
    ]
    return {"id": sid, "app_name": app, "user_id": user, "events": events}


async def records(memory: LongTermMemory, app: str = "app", user: str = "u1") -> dict[str, MemoryRecord]:
    """The scope's records as the store holds them, by event id."""
    return {r.event_id: r async for r in memory.iter_records(app_name=app, user_id=user)}


async def neighbours(
    memory: LongTermMemory, anchors: Sequence[MemoryRecord], before: int, after: int, *, user: str = "u1"
) -> Around:
    """The neighbours of ``anchors`` in (app, ``user``), from the engine behind ``memory``."""
    engine = (await memory.located("app", user)).backend
    assert isinstance(engine, HasNeighbours), f"{type(engine).__name__} has no neighbours(scope, anchors, ...)"
    got = await engine.neighbours(memory.scope("app", user), anchors, before, after)
    assert len(got) == len(anchors)
    return got


async def around(
    memory: LongTermMemory, anchors: Sequence[MemoryRecord], before: int, after: int, *, user: str = "u1"
) -> Named:
    """``neighbours`` as event ids."""
    got = await neighbours(memory, anchors, before, after, user=user)
    return [([r.event_id for r in b], [r.event_id for r in a]) for b, a in got]


#: A session of five turns whose times are not in the order the events were listed (saved).
SHUFFLED = [("e3", 103.0, "turn three"), ("e0", 100.0, "turn zero"), ("e4", 104.0, "turn four")]
SHUFFLED += [("e1", 101.0, "turn one"), ("e2", 102.0, "turn two")]


class Context:
    """Each hit's neighbours: its session's turns just before and after it, from the store as it is now."""

    @pytest.mark.asyncio
    async def test_neighbours_in_session_order_at_the_edges(self, memory: LongTermMemory):
        await memory.add_session_to_memory(session("s1", SHUFFLED))
        # another session of the same user, its times between s1's; one of a single turn; one with a tie
        await memory.add_session_to_memory(session("s2", [(f"x{i}", 100.5 + i, f"other turn {i}") for i in range(4)]))
        await memory.add_session_to_memory(session("one", [("only", 200.0, "a single turn")]))
        tie = [("t1", 300.0, "tie one"), ("t2", 301.0, "tie two"), ("t3", 301.0, "tie three"), ("t4", 302.0, "four")]
        await memory.add_session_to_memory(session("tie", tie))
        got = await records(memory)
        assert len(got) == 14
        e = [got[f"e{i}"] for i in range(5)]
        assert await around(memory, [e[2]], 1, 1) == [(["e1"], ["e3"])]
        assert await around(memory, [e[2]], 2, 2) == [(["e0", "e1"], ["e3", "e4"])]
        assert await around(memory, [e[0], e[4]], 1, 1) == [([], ["e1"]), (["e3"], [])]
        assert await around(memory, [e[1]], 0, 2) == [([], ["e2", "e3"])]
        assert await around(memory, [e[3]], 3, 0) == [(["e0", "e1", "e2"], [])]
        all_before: tuple[list[str], list[str]] = (["e0", "e1", "e2", "e3"], [])
        assert await around(memory, [e[4], e[0]], 50, 50) == [all_before, ([], ["e1", "e2", "e3", "e4"])]
        assert await around(memory, [got["only"]], 5, 5) == [([], [])]
        assert await around(memory, [got["t2"], got["t3"]], 1, 1) == [(["t1"], ["t3"]), (["t2"], ["t4"])]
        assert await around(memory, [got["x1"], e[1], got["only"]], 1, 1) == [
            (["x0"], ["x2"]),
            (["e0"], ["e2"]),
            ([], []),
        ]
        assert await around(memory, [e[2]], 0, 0) == [([], [])]
        assert await around(memory, [], 1, 1) == []

    @pytest.mark.asyncio
    async def test_an_erased_turn_is_never_a_neighbour(self, memory: LongTermMemory):
        await memory.add_session_to_memory(session("s1", SHUFFLED))
        await memory.add_session_to_memory(session("s2", [("y0", 10.0, "keep me"), ("y1", 11.0, "and me")]))
        got = await records(memory)
        assert await memory.delete_memory(app_name="app", user_id="u1", memory_id=got["e2"].id) == 1
        assert await around(memory, [got["e1"], got["e3"]], 1, 1) == [(["e0"], ["e3"]), (["e1"], ["e4"])]
        assert await around(memory, [got["e1"]], 5, 5) == [(["e0"], ["e3", "e4"])]
        assert await around(memory, [got["e2"]], 2, 2) == [([], [])]  # the erased anchor itself
        assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s1") == 4
        assert await around(memory, [got["e0"], got["e2"], got["y0"]], 2, 2) == [([], []), ([], []), ([], ["y1"])]
        assert await memory.delete_memories(app_name="app", user_id="u1") == 2
        assert await around(memory, [got["y0"], got["y1"]], 2, 2) == [([], []), ([], [])]

    @pytest.mark.asyncio
    async def test_neighbours_never_come_from_another_user_or_app(self, memory: LongTermMemory):
        for h in HOSTILE_IDS:  # each hostile id as user and session id alike, in one store
            turns = [(f"{h}-{i}", 100.0 + i, f"turn {i}") for i in range(3)]
            await memory.add_session_to_memory(session(h, turns, user="victim"))
            await memory.add_session_to_memory(session(h, turns, app="other", user=h))
            await memory.add_session_to_memory(session(h, turns, user=h))
        for h in HOSTILE_IDS:
            own, victim = await records(memory, user=h), await records(memory, user="victim")
            ids = [f"{h}-{i}" for i in range(3)]
            mid = own[ids[1]]
            assert await around(memory, [mid], 5, 5, user=h) == [([ids[0]], [ids[2]])]
            got = await neighbours(memory, [mid], 5, 5, user=h)
            assert {(r.app_name, r.user_id, r.session_id) for part in got[0] for r in part} == {("app", h, h)}
            # another scope's record, or one of ours under another's id, is no anchor here
            forged = mid.model_copy(update={"id": victim[ids[1]].id})
            assert await around(memory, [victim[ids[1]], forged, mid], 1, 1, user=h) == [
                ([], []),
                ([], []),
                ([ids[0]], [ids[2]]),
            ]

    @pytest.mark.asyncio
    async def test_neighbours_are_the_same_after_reopening(self, open_memory: Any):
        memory = open_memory()
        await memory.add_session_to_memory(session("s1", SHUFFLED))
        await memory.add_session_to_memory(make_session("s2", turns=[("user", "alpha"), ("user", "beta")], start=101.5))
        anchors = list((await records(memory)).values())
        first = await around(memory, anchors, 2, 2)
        await memory.close()
        again = open_memory()
        assert await around(again, anchors, 2, 2) == first
        assert first[anchors.index(next(a for a in anchors if a.event_id == "e2"))] == (["e0", "e1"], ["e3", "e4"])
        await again.close()

    @pytest.mark.asyncio
    async def test_a_search_and_its_lenders_neighbours_in_one_read_answer_as_two_reads(self, memory: LongTermMemory):
        # ``search_lending`` (optional; every ``Engine`` has it, the facade reads the two apart
        # without it): the hits ``search`` gives, and each picked hit's own neighbours, in order.
        engine = (await memory.located("app", "u1")).backend
        one_read = getattr(engine, "search_lending", None)
        if one_read is None:
            pytest.skip(f"{type(engine).__name__} has no search_lending (optional)")
        for sid in ("s1", "s2", "s3"):
            turns = [(f"{sid}-{i}", 100.0 + i, f"turn {i}" + " by the lighthouse" * (i == 1)) for i in range(3)]
            await memory.add_session_to_memory(session(sid, turns))
        scope = memory.scope("app", "u1")
        hits, lent = await one_read(scope, "lighthouse", 5, lambda found: [h.record for h in found[:3]], 1)
        apart = await engine.search(scope, "lighthouse", 5)
        assert {h.record.id: h.score for h in hits} == pytest.approx({h.record.id: h.score for h in apart})
        assert lent is not None and len(lent) == min(3, len(hits)) > 0
        for h, (before, after) in zip(hits, lent, strict=False):  # each hit its own session's turns
            sid, i = h.record.event_id.rsplit("-", 1)
            want = ([f"{sid}-{int(i) - 1}"] if i != "0" else [], [f"{sid}-{int(i) + 1}"] if i != "2" else [])
            assert ([r.event_id for r in before], [r.event_id for r in after]) == want, h.record.event_id
