"""Expiry on the local engine: a read made at a moment (``core.where.living``) leaves out what expired
by then, with a filter or without, in every read (scan, count, pages by time, search: full text and
the vector arm), at once when the moment passes an expiry; the record's ``expires_at`` and
``updated_at`` come back from every read; a store made before them gets the columns when opened;
and a record written over by id leaves its old words in no file, as an erase leaves a deleted one's."""

from __future__ import annotations

import shutil
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from longterm import LongTermMemory
from longterm.backends.local import reads, store
from longterm.core.where import Where, living, where_of
from longterm.records import MemoryRecord
from longterm.retrieval import vector_scan
from longterm.retrieval.embedders import normalize
from longterm.testing import make_record
from tests.backends.drawn import pages, scanned
from tests.faults.test_erase_on_disk import NEEDLES, OTHER, SECRET, SECRET_TERMS, leftovers, vocabulary

APP, USER = "expiry-app", "expiry-user"
NOW = 1_800_000_000.0
OLD_STORE = Path(__file__).resolve().parents[1] / "data" / "stores_71d0724" / "memory.db"
#: Filters asked with the moment: a seek, a rare one (a page looks its rows up), a negation (a
#: count subtracts), a range over metadata, over time, and a field.
SPECS: list[dict[str, Any]] = [
    {"topic": "work"},
    {"topic": "rare"},
    {"topic": {"$ne": "work"}},
    {"n": {"$gte": 3}},
    {"timestamp": {"$lt": 1_700_000_040}},
    {"$not": {"role": "model"}},
]


class Scattered:
    """A unit vector per text, drawn from its checksum: no two texts tie."""

    dim, id = 32, "scattered-32"

    def embed(self, batch: list[str], *, kind: str = "passage") -> np.ndarray:
        rows = [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self.dim) for t in batch]
        return normalize(np.array(rows, dtype=np.float32))


def _memory(path: Path, embedder: Any = None) -> LongTermMemory:
    extra = {} if embedder is None else {"embedder": embedder}
    return LongTermMemory(backend="local", backend_config={"path": str(path)}, app_name=APP, **extra)


def _records(n: int = 60) -> list[MemoryRecord]:
    """A third expired by ``NOW``, a third expiring after it, a third never; one expiring at ``NOW``."""
    out = []
    for i in range(n):
        expires = (NOW - 1_000.0 + i, NOW + 1_000.0 + i, None)[i % 3]
        if i == 4:
            expires = NOW  # at the moment: expired (``expires_at <= now``)
        topic = "rare" if i % 17 == 0 else ("work" if i % 2 else "home")
        out.append(
            make_record(f"harbour note {i} about the {topic}", app=APP, user=USER, session=f"s{i % 4}",
                        event=f"e{i}", role="model" if i % 5 == 0 else "user", timestamp=1_700_000_000.0 + i,
                        metadata={"topic": topic, "n": i % 7}, expires_at=expires,
                        updated_at=None if i % 2 else 1_750_000_000.0 + i)
        )  # fmt: skip
    return out


async def _reads_match(backend: Any, scope: Any, where: Where, records: list[MemoryRecord], hybrid: bool) -> None:
    """Every read of ``where`` gives exactly the records it admits (each once, in its order)."""
    want = sorted(r.id for r in records if where.admits(r))
    by_time = [r.id for r in sorted((r for r in records if where.admits(r)), key=lambda r: r.timestamp)]
    label = (where.filter, where.alive_at)
    got = [r.id for r in await scanned(backend, scope, where)]
    assert sorted(got) == want and len(got) == len(set(got)), label
    assert await backend.count(scope, where=where) == len(want), label
    assert [r.id for r in await pages(backend, scope, where, newest_first=False)] == by_time, label
    assert [r.id for r in await pages(backend, scope, where, newest_first=True)] == by_time[::-1], label
    hits = await backend.search(scope, "harbour note", 100, where=where)
    assert sorted(h.record.id for h in hits) == want, label
    if hybrid:  # a query no text holds: the vector arm alone, exactly the best that are alive and pass
        hits = await backend.search(scope, "zqxwv", 100, where=where)
        assert sorted(h.record.id for h in hits) == want, label
        embed = Scattered().embed
        q = embed(["zqxwv"])[0]
        passing = [r for r in records if where.admits(r)]
        order = sorted(passing, key=lambda r: -float(embed([r.text])[0] @ q))
        top = await backend.search(scope, "zqxwv", 5, where=where)
        assert [h.record.id for h in top] == [r.id for r in order[:5]], label


def _scanned(how: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``how`` (``int8``: codes from one row on; else float32), set for the test."""
    if how == "int8":
        if vector_scan._simsimd is None:
            pytest.skip("simsimd is not installed")
        monkeypatch.setattr(vector_scan, "QUANTIZE_FROM", 1)
    else:
        monkeypatch.setattr(vector_scan, "QUANTIZE_FROM", 10**9)
    return how


@pytest.fixture(params=["fulltext", "float32", "int8"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Full text only, or hybrid with the scope scanned in float32 or in int8 codes."""
    return _scanned(str(request.param), monkeypatch)


@pytest.fixture(params=["float32", "int8"])
def scan(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The hybrid engine's scope scanned in float32 or in int8 codes."""
    return _scanned(str(request.param), monkeypatch)


async def test_reads_at_a_moment_give_exactly_the_alive_that_pass(tmp_path: Path, engine: str) -> None:
    hybrid = engine != "fulltext"
    memory = _memory(tmp_path / "m.db", Scattered() if hybrid else None)
    backend = (await memory.located(APP, USER)).backend
    scope = memory.scope(APP, USER)
    records = _records()
    await backend.upsert(records)
    alive = living(None, NOW)
    assert alive.filter is None
    assert 0 < await backend.count(scope, where=alive) < len(records)
    await _reads_match(backend, scope, alive, records, hybrid)
    for spec in SPECS:
        await _reads_match(backend, scope, living(where_of(spec), NOW), records, hybrid)
    reads.FEW_PAGES = 0  # each record walked probed, however few pass
    try:
        await _reads_match(backend, scope, living(where_of({"topic": "rare"}), NOW), records, hybrid)
    finally:
        reads.FEW_PAGES = 20
    # Nothing expired yet: the same answers as without the moment.
    early = living(None, NOW - 10_000.0)
    assert await backend.count(scope, where=early) == len(records)
    await _reads_match(backend, scope, early, records, hybrid)
    await memory.close()


@pytest.mark.parametrize("hybrid", [False, True], ids=["fulltext", "hybrid"])
async def test_a_moment_past_an_expiry_hides_the_record_at_once(tmp_path: Path, hybrid: bool) -> None:
    memory = _memory(tmp_path / "m.db", Scattered() if hybrid else None)
    backend = (await memory.located(APP, USER)).backend
    scope = memory.scope(APP, USER)
    soon = make_record("the harbour gate code", app=APP, user=USER, event="soon", expires_at=NOW)
    never = make_record("the harbour opens at nine", app=APP, user=USER, event="never")
    await backend.upsert([soon, never])
    for at, want in ((NOW - 0.001, {soon.id, never.id}), (NOW, {never.id}), (NOW + 3_600, {never.id})):
        for where in (living(None, at), living(where_of({"role": ""}), at)):
            assert {r.id for r in await scanned(backend, scope, where)} == want, at
            assert await backend.count(scope, where=where) == len(want), at
            assert {h.record.id for h in await backend.search(scope, "harbour", 5, where=where)} == want, at
            page, _ = await backend.page_by_time(scope, None, 5, newest_first=True, where=where)
            assert {r.id for r in page} == want, at
    # Its expiry moved later by a write over it: alive again at once.
    await backend.upsert([soon.model_copy(update={"expires_at": NOW + 7_200})])
    assert await backend.count(scope, where=living(None, NOW + 3_600)) == 2
    await memory.close()


@pytest.mark.parametrize("hybrid", [False, True], ids=["fulltext", "hybrid"])
async def test_expires_at_and_updated_at_come_back_from_every_read(tmp_path: Path, hybrid: bool) -> None:
    memory = _memory(tmp_path / "m.db", Scattered() if hybrid else None)
    backend = (await memory.located(APP, USER)).backend
    scope = memory.scope(APP, USER)
    records = _records(12)
    await backend.upsert(records)
    want = {r.id: (r.expires_at, r.updated_at) for r in records}
    assert any(e is None for e, _ in want.values()) and any(u is not None for _, u in want.values())

    def life(found: list[MemoryRecord]) -> dict[str, tuple[float | None, float | None]]:
        return {r.id: (r.expires_at, r.updated_at) for r in found}

    assert life(await scanned(backend, scope, None)) == want
    assert life(await pages(backend, scope, None, newest_first=True)) == want
    assert life([h.record for h in await backend.search(scope, "harbour note", 50)]) == want
    page, _ = backend._page(scope, None, 50)  # by (session, event): the listing of a scan
    assert life(page) == want
    anchors = [records[0]]
    rows = backend._session_positions(scope, anchors, 3, 3)[records[0].session_id]
    assert life([r for r in backend._records_at(scope, [k for _, k in rows]) if r is not None]) == {
        rid: want[rid] for rid, _ in rows
    }
    later = living(None, 0.0)  # a moment before every expiry: the filtered statements read them too
    assert life(await scanned(backend, scope, later)) == want
    assert life([h.record for h in await backend.search(scope, "harbour note", 50, where=later)]) == want
    await memory.close()


def _columns(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[1] for r in conn.execute("PRAGMA table_info(records)")}


async def test_a_store_made_before_expiry_gets_its_columns_once_at_open(tmp_path: Path) -> None:
    """The previous release's store (71d0724): the columns and the index added when it is opened
    (again: nothing more), its records alive at any moment, new ones expiring."""
    db = tmp_path / "memory.db"
    shutil.copy(OLD_STORE, db)
    assert not {"expires_at", "updated_at"} & _columns(db)
    for _ in range(2):
        memory = LongTermMemory(backend="local", backend_config={"path": str(db)}, app_name="travel")
        backend = (await memory.located("travel", "alice")).backend
        scope = memory.scope("travel", "alice")
        assert {"expires_at", "updated_at"} <= _columns(db)
        alive = living(None, NOW)
        everything = await backend.count(scope)
        assert everything == 2 and await backend.count(scope, where=alive) == everything
        assert len(await scanned(backend, scope, alive)) == everything
        hits = await backend.search(scope, "passport", 5, where=living(where_of({"role": "user"}), NOW))
        assert [h.record.text for h in hits] == ["My passport expires in August 2027"]
        assert all(r.expires_at is None and r.updated_at is None for r in await scanned(backend, scope, None))
        await memory.close()
    memory = LongTermMemory(backend="local", backend_config={"path": str(db)}, app_name="travel")
    backend = (await memory.located("travel", "alice")).backend
    scope = memory.scope("travel", "alice")
    gone = make_record("a passport photo booth", app="travel", user="alice", event="x", expires_at=NOW)
    await backend.upsert([gone])
    assert await backend.count(scope, where=living(None, NOW)) == 2
    assert await backend.count(scope, where=living(None, NOW - 1)) == 3
    await memory.close()
    with sqlite3.connect(db) as conn:
        plan = " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + store.sql.EXPIRED, (1, NOW)))
    assert "records_expiring" in plan


async def test_a_record_written_over_leaves_its_old_words_in_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written over by id with other words (``update``): as after an erase, the old text and its
    metadata are in no file of the store (``memory.db``, ``-wal``, ``-shm``) nor in the index, the
    memory still open; a record written again unchanged costs no purge."""
    db = tmp_path / "memory.db"
    memory = LongTermMemory(backend="local", backend_config={"path": str(db)}, app_name=APP)
    backend = (await memory.located(APP, USER)).backend
    scope = memory.scope(APP, USER)
    secret = make_record(SECRET, app=APP, user=USER, session="s", event="e0", metadata={"where": "Vruxhaven"})
    others = [make_record(f"{OTHER} {i}", app=APP, user=USER, session="s", event=f"e{i}") for i in range(1, 40)]
    await backend.upsert([secret, *others])
    assert leftovers(db) and vocabulary(db) >= SECRET_TERMS and NEEDLES
    purges = []
    real = store.truncate_wal
    monkeypatch.setattr(store, "truncate_wal", lambda conn, path: (purges.append(path), real(conn, path)))
    await backend.upsert(others[:5])  # unchanged: nothing to purge
    assert purges == []
    fixed = secret.model_copy(update={"text": "my dentist moved to the afternoon", "content": {},
                                      "metadata": {"where": "home"}, "updated_at": NOW})  # fmt: skip
    fixed = MemoryRecord.model_validate(fixed.model_dump())
    await backend.upsert([fixed])
    assert purges == [db]
    assert leftovers(db) == {}
    assert SECRET_TERMS & vocabulary(db) == set()
    assert await backend.search(scope, "Vruxhaven marmalades", 5) == []
    got = [h.record for h in await backend.search(scope, "dentist afternoon", 5)]
    assert [(r.id, r.text, r.updated_at) for r in got] == [(secret.id, fixed.text, NOW)]
    assert await backend.count(scope, where=where_of({"where": "Vruxhaven"})) == 0
    await memory.close()
    assert leftovers(db) == {}


async def test_the_vector_arm_leaves_the_expired_out_before_its_cut(tmp_path: Path, scan: str) -> None:
    """The arm itself, not the hits read after fusion (which drop an expired row as a last guard):
    ``top(without=expired)`` and ``nearest(..., dead=expired)`` are the scan's best over the rows
    alive (and passing) alone, so no expired record takes a rank in the fusion."""
    from longterm.backends.local.filtering import compile_filter
    from longterm.backends.local.vectors import RANKED, nearest

    memory = _memory(tmp_path / "m.db", Scattered())
    backend = (await memory.located(APP, USER)).backend
    records = _records(300)
    await backend.upsert(records)
    conn = backend._reader()
    scope_id = backend._scope(APP, USER, conn=conn)
    scoped = backend._vectors.matrix(conn, scope_id)
    assert scoped.quantized == (scan == "int8")

    def positions(keep: list[MemoryRecord]) -> np.ndarray:
        ids = [bytes.fromhex(r.id) for r in keep]
        rowids = [conn.execute("SELECT rowid FROM records WHERE id = ?", (i,)).fetchone()[0] for i in ids]
        return scoped.positions(np.array(rowids, dtype=np.int64))

    dead = backend._vectors.expired(conn, scoped, scope_id, NOW)
    assert sorted(dead.tolist()) == positions([r for r in records if not living(None, NOW).admits(r)]).tolist()
    assert backend._vectors.expired(conn, scoped, scope_id, NOW - 10_000.0) is None
    alive = positions([r for r in records if living(None, NOW).admits(r)])
    where = where_of({"topic": "work"})
    passing = compile_filter(where.filter, scope_id)
    both = positions([r for r in records if living(where, NOW).admits(r)])
    for q in normalize(np.random.default_rng(5).standard_normal((8, Scattered.dim)).astype(np.float32)):
        for n in (3, 40, 400):
            got, best = scoped.top(q, n, without=dead), scoped.top(q, n, alive)
            assert [r for r, _ in got] == [r for r, _ in best]
            assert np.allclose([v for _, v in got], [v for _, v in best], atol=1e-6)
            ranked = scoped.ranked(q, RANKED * scoped.pool(n))
            got = nearest(conn, scoped, q, ranked, n, scope_id, passing, dead)
            assert [r for r, _ in got] == [r for r, _ in scoped.top(q, n, both)]
    await memory.close()
