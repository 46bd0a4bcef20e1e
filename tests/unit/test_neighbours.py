"""A hit's session neighbours, the core's machinery on engines built for the purpose: one hop
to the engine's thread and one read of the anchors' sessions however many anchors; nothing
read for anchors of another scope; whatever an engine's primitive returns, no record of
another scope or session and no anchor itself; the default scan orders ties by event id; the
local store's two steps order ties by the order saved, drop what an erase took between them,
walk the indexes they were written for, and find in a long session what reading it whole finds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from longterm.backends.local import LocalBackend
from longterm.backends.local import schema as sql
from longterm.core.neighbours import Sessions, by_session
from longterm.records import MemoryRecord, Scope, record_id
from tests.test_kit_example import dict_backend

S = Scope(app_name="a", user_id="u")


def rec(session: str, event: str, at: float, *, user: str = "u") -> MemoryRecord:
    rid = record_id("a", user, session, event)
    return MemoryRecord(
        id=rid, app_name="a", user_id=user, session_id=session, event_id=event, text=event, timestamp=at
    )


def names(got: list[tuple[list[MemoryRecord], list[MemoryRecord]]]) -> list[tuple[list[str], list[str]]]:
    return [([r.event_id for r in b], [r.event_id for r in a]) for b, a in got]


class Counting(dict_backend.DictBackend):
    """The template engine, counting the primitives' calls and the hops to its thread."""

    def __init__(self, store: str) -> None:
        super().__init__(store)
        self.calls: list[str] = []

    async def _read(self, what: str, fn: Any, *args: object) -> Any:
        self.calls.append(f"hop: {what}")
        return await super()._read(what, fn, *args)

    def _session_positions(self, scope: Scope, anchors: Sequence[MemoryRecord], before: int, after: int) -> Any:
        self.calls.append(f"positions of {sorted({a.session_id for a in anchors})}")
        return super()._session_positions(scope, anchors, before, after)

    def _records_at(self, scope: Scope, keys: Sequence[object]) -> list[MemoryRecord | None]:
        self.calls.append(f"records of {len(keys)}")
        return super()._records_at(scope, keys)


async def test_one_hop_and_one_read_of_the_sessions_for_all_anchors() -> None:
    store = Counting("nb-one-hop")
    s1 = [rec("s1", f"e{i}", 10.0 + i) for i in range(5)]
    s2 = [rec("s2", f"f{i}", 10.5 + i) for i in range(3)]
    await store.upsert([*s1, *s2, rec("s3", "g0", 1.0)])
    got = await store.neighbours(S, [s1[2], s2[0], s1[0], s2[2]], 1, 1)
    assert names(got) == [(["e1"], ["e3"]), ([], ["f1"]), ([], ["e1"]), (["f1"], [])]
    assert store.calls == [
        "hop: reading neighbours",
        "positions of ['s1', 's2']",
        "records of 3",
    ]  # e1, e3, f1: each once
    await store.close()


async def test_anchors_of_another_scope_or_no_window_read_nothing() -> None:
    store = Counting("nb-nothing")
    mine, theirs = rec("s", "e0", 1.0), rec("s", "e0", 1.0, user="them")
    await store.upsert([mine, rec("s", "e1", 2.0), theirs, rec("s", "e1", 2.0, user="them")])
    assert await store.neighbours(S, [theirs, theirs], 3, 3) == [([], []), ([], [])]
    assert await store.neighbours(S, [mine], 0, 0) == [([], [])]
    assert await store.neighbours(S, [mine], -2, -1) == [([], [])]
    assert await store.neighbours(S, [], 1, 1) == []
    assert store.calls == []
    assert names(await store.neighbours(S, [theirs, mine], -1, 1)) == [([], []), ([], ["e1"])]
    await store.close()


class Lying(dict_backend.DictBackend):
    """An engine whose session read returns what it must not: another user's record, a record of
    another session, the same record twice."""

    def _session_rows(self, scope: Scope, session_ids: Sequence[str]) -> Sessions:
        rows = super()._session_rows(scope, session_ids)
        rows["s"] = [
            rec("s", "x", 0.5, user="them"),
            rows["s"][0],
            rows["s"][0],
            rec("other", "y", 1.5),
            *rows["s"][1:],
        ]
        return rows


async def test_whatever_an_engine_returns_no_record_of_another_scope_or_session() -> None:
    store = Lying("nb-lying")
    turns = [rec("s", f"e{i}", float(i)) for i in range(4)]
    await store.upsert(turns)
    got = await store.neighbours(S, [turns[1], turns[0]], 9, 9)
    assert names(got) == [(["e0"], ["e2", "e3"]), ([], ["e1", "e2", "e3"])]
    await store.close()


async def test_the_default_scan_orders_a_session_by_time_then_event_id() -> None:
    store = dict_backend.DictBackend("nb-order")
    turns = [rec("s", "b", 2.0), rec("s", "c", 2.0), rec("s", "a", 2.0), rec("s", "z", 1.0), rec("s", "m", 3.0)]
    await store.upsert(turns)
    assert names(await store.neighbours(S, [turns[1]], 9, 9)) == [(["z", "a", "b"], ["m"])]
    assert [r.event_id for r in by_session(reversed(turns))["s"]] == ["z", "a", "b", "c", "m"]
    await store.close()


@pytest.fixture
async def local(tmp_path: Path) -> Any:
    store = LocalBackend(tmp_path / "m.db")
    yield store
    await store.close()


async def test_local_orders_ties_by_the_order_saved(local: LocalBackend) -> None:
    turns = [rec("s", "z", 5.0), rec("s", "b", 5.0), rec("s", "a", 5.0), rec("s", "first", 1.0)]
    await local.save(turns, S, "s", [t.event_id for t in turns])
    assert names(await local.neighbours(S, [turns[1]], 9, 9)) == [(["first", "z"], ["a"])]


async def test_local_leaves_out_what_an_erase_took_between_its_two_steps(local: LocalBackend) -> None:
    turns = [rec("s", f"e{i}", float(i)) for i in range(4)]
    await local.upsert(turns)
    positions = local._session_positions

    def then_erase(scope: Scope, anchors: Sequence[MemoryRecord], before: int, after: int) -> Any:
        found = positions(scope, anchors, before, after)
        local._remove(scope, [turns[0].id], None)  # on the reader's thread: the writer's connection is free
        return found

    local._session_positions = then_erase  # type: ignore[method-assign]
    assert names(await local.neighbours(S, [turns[1]], 1, 1)) == [([], ["e2"])]


async def test_local_walks_its_indexes_from_the_anchor_and_reads_records_by_rowid(local: LocalBackend) -> None:
    await local.upsert([rec("s", "e0", 1.0)])

    def plan(query: str, *args: object) -> str:
        return " ".join(row[-1] for row in local.conn.execute("EXPLAIN QUERY PLAN " + query, args))

    assert "INDEX sqlite_autoindex_records_1 (scope=? AND session_id=? AND event_id=?)" in plan(sql.ANCHOR, 1, "s", "e")
    for walk in (sql.BEFORE, sql.AFTER):
        assert "INDEX records_by_session (scope=? AND session_id=? AND timestamp" in plan(walk, 1, "s", 1.0, 1, 2)
        assert "TEMP B-TREE" not in plan(walk, 1, "s", 1.0, 1, 2)
    assert "INTEGER PRIMARY KEY" in plan(sql.BY_ROWIDS.format("?,?"), 1, 2, 1)


async def test_local_finds_the_same_neighbours_in_a_long_session_saved_among_others(local: LocalBackend) -> None:
    """5,000 turns saved interleaved with another session's (100 saves, each of 50 pairs: a turn
    of each), some at one time: the windows are those of the session read whole and ordered by the rule
    (time, then the order saved). (A save a pair took 20 s for the same interleaving.)"""
    turns = [rec("long", f"e{i}", float(i // 3)) for i in range(5000)]
    others = [rec("other", f"o{i}", float(i // 3)) for i in range(5000)]
    pairs = [r for t, o in zip(turns, others, strict=True) for r in (t, o)]
    for i in range(0, len(pairs), 100):
        await local.upsert(pairs[i : i + 100])
    anchors = [turns[0], turns[1], turns[2500], turns[4999]]
    got = await local.neighbours(S, anchors, 4, 4)
    for a, (before, after) in zip(anchors, got, strict=True):
        i = int(a.event_id[1:])
        assert [r.event_id for r in before] == [f"e{j}" for j in range(max(0, i - 4), i)]
        assert [r.event_id for r in after] == [f"e{j}" for j in range(i + 1, min(5000, i + 5))]
