"""Filters on the local engine: the whole filter in SQL, before every cut (full text, the vector
arm, counts, pages), held to the reference (``core.filters.matches``) on drawn filters and on
the edges of its semantics, kept right by every write and erase, and brought to a store written
before filters when it is opened."""

from __future__ import annotations

import shutil
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from longterm import LongTermMemory
from longterm.backends.local import reads
from longterm.backends.local.filtering import compile_filter
from longterm.backends.local.reads import FEW_PAGES
from longterm.backends.local.vectors import RANKED, nearest
from longterm.core.filters import matches
from longterm.core.where import where_of
from longterm.records import MemoryRecord
from longterm.retrieval import vector_scan
from longterm.retrieval.embedders import HashingEmbedder, normalize
from longterm.testing import make_record
from longterm.testing.contract.filters import APP, USER, corpus
from longterm.testing.filter_strategies import filters
from tests.backends.drawn import pages, scanned

OLD_STORE = Path(__file__).resolve().parents[1] / "data" / "stores_71d0724" / "memory.db"


class Scattered:
    """A unit vector per text, drawn from its checksum: no two texts tie (a tie may be broken either way)."""

    dim, id = 64, "scattered-64"

    def embed(self, batch: list[str], *, kind: str = "passage") -> np.ndarray:
        rows = [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self.dim) for t in batch]
        return normalize(np.array(rows, dtype=np.float32))


def _memory(path: Path, embedder: Any = False, app: str = APP) -> LongTermMemory:
    extra: dict[str, Any] = {"embedder": HashingEmbedder(64) if embedder is True else embedder} if embedder else {}
    return LongTermMemory(backend="local", backend_config={"path": str(path)}, app_name=app, **extra)


@pytest.mark.parametrize("embedder", [False, True], ids=["fulltext", "hybrid"])
async def test_the_five_that_pass_come_back_from_below_a_thousand_that_do_not(tmp_path: Path, embedder: bool) -> None:
    memory = _memory(tmp_path / "m.db", embedder)
    backend = (await memory.located(APP, USER)).backend
    scope = memory.scope(APP, USER)
    loud = [
        make_record("bees make honey, bees make honey", app=APP, user=USER, session=f"l{i % 20}", event=f"l{i}",
                    metadata={"topic": "work"}, timestamp=2_000.0 + i)
        for i in range(1_000)
    ]  # fmt: skip
    quiet = [
        make_record(f"an unrelated note, number {i}", app=APP, user=USER, session=f"q{i % 20}", event=f"q{i}",
                    metadata={"topic": "misc"}, timestamp=5_000.0 + i)
        for i in range(995)
    ]  # fmt: skip
    wanted = [
        make_record(f"bees near the old mill at dawn, {word} weather, and honey later", app=APP, user=USER,
                    session="trip", event=f"w{i}", metadata={"topic": "travel", "trip": {"year": 2024 + i % 2}},
                    timestamp=1_000.0 + i)
        for i, word in enumerate(["sunny", "rainy", "windy", "foggy", "stormy"])
    ]  # fmt: skip
    await backend.upsert([*loud, *quiet, *wanted])
    want = {r.id for r in wanted}
    assert not {h.record.id for h in await backend.search(scope, "bees make honey", 1_000)} & want
    for spec in (
        {"topic": "travel"},
        {"timestamp": {"$lt": 1_500}},
        {"trip.year": {"$gte": 2024}},
        {"$not": {"topic": {"$in": ["work", "misc"]}}},
        {"session_id": "trip", "role": ""},
    ):
        where = where_of(spec)
        hits = await backend.search(scope, "bees make honey", 5, where=where)
        assert {h.record.id for h in hits} == want, spec
        assert await backend.count(scope, where=where) == 5, spec
        assert {r.id for r in await scanned(backend, scope, where)} == want, spec
        newest = await pages(backend, scope, where, newest_first=True)
        assert [r.id for r in newest] == [r.id for r in reversed(wanted)], spec
    assert await backend.search(scope, "bees", 5, where=where_of({"topic": {"$in": []}})) == []
    assert await backend.count(scope, where=where_of({"topic": {"$nin": []}})) == 2_000
    await memory.close()


@pytest.fixture(params=[True, False], ids=["int8", "float32"])
def quantized(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """A scope scanned in int8 codes (simsimd, from one row on) or in float32."""
    if request.param:
        if vector_scan._simsimd is None:
            pytest.skip("simsimd is not installed")
        monkeypatch.setattr(vector_scan, "QUANTIZE_FROM", 1)
    else:
        monkeypatch.setattr(vector_scan, "QUANTIZE_FROM", 10**9)
    return bool(request.param)


async def test_the_vector_arm_is_the_exact_best_of_the_rows_that_pass(tmp_path: Path, quantized: bool) -> None:
    """Whether ``nearest`` checks candidates, reads every passing row, or both, its answer is the
    scan's over the passing rows alone (half of them pass, a tenth, a hundredth, none)."""
    memory = _memory(tmp_path / "m.db", embedder=Scattered())
    backend = (await memory.located(APP, USER)).backend
    scope = memory.scope(APP, USER)
    words = ["tea", "rust", "opera", "kayak", "tax", "bread", "sql", "jazz", "tent", "visa"]
    await backend.upsert(
        [
            make_record(f"{words[i % 10]} {words[i * 7 % 10]} note {i}", app=APP, user=USER, event=f"e{i}",
                        metadata={"half": i % 2, "tenth": i % 10, "rare": i % 100 == 0},
                        role="model" if i % 3 == 0 else "user")
            for i in range(3_000)
        ]
    )  # fmt: skip
    conn = backend._reader()
    scope_id = backend._scope(APP, USER, conn=conn)
    scoped = backend._vectors.matrix(conn, scope_id)
    assert scoped.quantized == quantized
    queries = normalize(np.random.default_rng(3).standard_normal((12, 64)).astype(np.float32))
    for spec in ({"half": 1}, {"tenth": 3}, {"rare": True}, {"tenth": {"$gt": 6}}, {"role": "model"}, {"half": 7}):
        passing = compile_filter(where_of(spec).filter, scope_id)
        every = [r.id for r in await scanned(backend, scope, where_of(spec))]
        rowids = [conn.execute("SELECT rowid FROM records WHERE id = ?", (bytes.fromhex(i),)).fetchone()[0]
                  for i in every]  # fmt: skip
        among = scoped.positions(np.array(rowids, dtype=np.int64))
        for vector in queries:
            for n in (5, 50):
                ranked = scoped.ranked(vector, RANKED * scoped.pool(n))
                got, best = nearest(conn, scoped, vector, ranked, n, scope_id, passing), scoped.top(vector, n, among)
                assert [r for r, _ in got] == [r for r, _ in best], spec
                assert np.allclose([s for _, s in got], [s for _, s in best], atol=1e-6), spec
    hits = await backend.search(scope, "tea rust", 10, where=where_of({"rare": True}))
    assert hits and all(h.record.metadata["rare"] for h in hits)
    await memory.close()


#: Records at the edges of the semantics, beside the contract's corpus (every path the strategies
#: name goes through a non-object, a list, an empty object; numbers meet booleans and strings).
EDGES: list[dict[str, Any]] = [
    {"project": 3, "topic": {"phase": "a"}},
    {"project": [1, {"phase": 1}], "n": [[1], {"a": 1}]},
    {"project": {}, "tags": []},
    {"project": {"phase": None, "n": 1.0}, "topic": None, "n": -0.0},
    {"project": {"phase": [True, 1, "1"]}, "n": 2**53 - 1, "tags": [1, 1.0, True]},
    {"topic": "Travel", "n": 1e300, "tags": ["é", "e\u0301"]},
    {"topic": "travel ", "n": -3, "tags": [None, False, 0]},
    {"missing": {"deeper": 1}, "n": 1.5, "topic": ""},
    {"n": float("nan"), "tags": [float("inf"), float("-inf")], "project": {"n": float("nan")}},
]


def _edges() -> list[MemoryRecord]:
    return [
        make_record(f"edge {i} memory about the harbour", app=APP, user=USER, session="s3", event=f"edge{i}",
                    role="model", author="x", timestamp=101.5, metadata=meta)
        for i, meta in enumerate(EDGES)
    ]  # fmt: skip


@pytest.fixture(scope="module", params=[False, True], ids=["fulltext", "hybrid"])
def drawn_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LongTermMemory, Any, list[MemoryRecord]]]:
    """One store of ``corpus()`` and ``EDGES`` (49 records), written once; every drawn filter is asked of it."""
    memory = _memory(tmp_path_factory.mktemp("drawn") / "m.db", request.param)
    records = [*corpus(), *_edges()]
    backend = memory.portal.call(memory.located(APP, USER)).backend
    memory.portal.call(backend.upsert(records))  # the engine's own write: NaN too, as an old store may hold
    yield memory, backend, records
    memory.close_sync()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=filters())
def test_a_drawn_filter_lists_counts_pages_and_searches_what_the_reference_passes(
    drawn_store: tuple[LongTermMemory, Any, list[MemoryRecord]], spec: dict[str, Any]
) -> None:
    memory, backend, records = drawn_store
    scope, where = memory.scope(APP, USER), where_of(spec)
    assert where is not None
    passing = [r for r in records if matches(where.filter, r)]
    want = sorted(r.id for r in passing)
    got = [r.id for r in memory.portal.call(scanned(backend, scope, where))]
    assert sorted(got) == want and len(got) == len(set(got)), spec
    assert memory.portal.call(backend.count(scope, where=where)) == len(want), spec
    by_time = [r.timestamp for r in sorted(passing, key=lambda r: r.timestamp)]
    oldest = memory.portal.call(pages(backend, scope, where, newest_first=False))
    assert [r.timestamp for r in oldest] == by_time and sorted(r.id for r in oldest) == want, spec
    reads.FEW_PAGES = 0  # each record walked probed, however few pass
    try:
        newest = memory.portal.call(pages(backend, scope, where, newest_first=True))
        walked = [r.id for r in memory.portal.call(scanned(backend, scope, where))]
    finally:
        reads.FEW_PAGES = FEW_PAGES
    assert [r.timestamp for r in newest] == by_time[::-1] and sorted(r.id for r in newest) == want, spec
    assert sorted(walked) == want, spec
    hits = memory.portal.call(backend.search(scope, "memory about the harbour", 60, where=where))
    assert sorted(h.record.id for h in hits) == want, spec


async def test_values_follow_every_write_and_erase(tmp_path: Path) -> None:
    """A record written again is found by its new metadata only; an erased one by nothing, and its
    values leave the file with it."""
    memory = _memory(tmp_path / "m.db")
    backend = (await memory.located(APP, USER)).backend
    scope = memory.scope(APP, USER)
    a = make_record("a harbour note", app=APP, user=USER, session="s1", event="e1", metadata={"topic": "old"})
    secret = {"secret": "Qzorbelline", "deeper": {"k": [7_316_029_461]}}
    b = make_record("another harbour note", app=APP, user=USER, session="s2", event="e2", metadata=secret)
    await backend.upsert([a, b])
    await backend.upsert([make_record(a.text, app=APP, user=USER, session="s1", event="e1", metadata={"topic": "new"})])
    assert await backend.count(scope, where=where_of({"topic": "old"})) == 0
    assert [r.id for r in await scanned(backend, scope, where_of({"topic": "new"}))] == [a.id]
    await backend.delete(scope, session_id="s2")
    assert await backend.count(scope, where=where_of({"secret": {"$exists": True}})) == 0
    assert backend.conn.execute("SELECT count(*) FROM record_values WHERE path LIKE '%secret%'").fetchone()[0] == 0
    await memory.close()
    for stored in tmp_path.iterdir():  # the erase's secure delete zeroed the values' bytes too
        data = stored.read_bytes()
        needles = (b"Qzorbelline", b"7316029461", (7_316_029_461).to_bytes(6, "big"))  # the JSON, the index's int
        assert not [n for n in needles if n in data], stored.name
    again = _memory(tmp_path / "m.db")
    backend = (await again.located(APP, USER)).backend
    await backend.delete(again.scope(APP, USER))
    assert backend.conn.execute("SELECT count(*) FROM record_values").fetchone()[0] == 0
    await again.close()


async def test_operands_no_store_could_hold_compare_as_the_reference_does(tmp_path: Path) -> None:
    """Integers past 64 bits, a lone surrogate, keys no JSON path could name: answered, not refused."""
    memory = _memory(tmp_path / "m.db")
    backend = (await memory.located(APP, USER)).backend
    scope = memory.scope(APP, USER)
    metas = [{"n": 1e20}, {"n": 2**62}, {"n": -1e300}, {"k": "\ue000x"}, {"k": "\ud7ffx"}, {'a"b\\c': {"é.": 1}}]
    records = [make_record(f"note {i}", app=APP, user=USER, event=f"e{i}", metadata=m) for i, m in enumerate(metas)]
    await backend.upsert(records)
    stored = {r.id: r for r in await scanned(backend, scope, None)}
    specs = [
        {"n": 10**20}, {"n": {"$gt": 10**20 + 1}}, {"n": {"$gte": 10**20 - 1}}, {"n": {"$lt": -(10**400)}},
        {"n": {"$lte": 2**70}}, {"k": {"$gt": "\ud800"}}, {"k": {"$lt": "\ud800"}}, {"k": "\ud800"},
        {'a"b\\c': {"$exists": True}}, {"metadata.a\"b\\c": {"$ne": 1}},
    ]  # fmt: skip
    for spec in specs:
        where = where_of(spec)
        want = sorted(i for i, r in stored.items() if matches(where.filter, r))
        assert sorted(r.id for r in await scanned(backend, scope, where)) == want, spec
        assert await backend.count(scope, where=where) == len(want), spec
    await memory.close()


def _values(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT * FROM record_values"), key=repr)


async def test_a_store_written_before_filters_gets_its_values_once_at_open(tmp_path: Path) -> None:
    memory = _memory(tmp_path / "m.db", embedder=True)
    backend = (await memory.located(APP, USER)).backend
    records = [*corpus(), *_edges()]
    await backend.upsert(records)
    before = _values(tmp_path / "m.db")
    await memory.close()
    with sqlite3.connect(tmp_path / "m.db") as conn:  # as the previous release left it
        conn.execute("DELETE FROM record_values")
        conn.execute("DELETE FROM store_meta WHERE key = 'record_values'")
        conn.execute("DROP INDEX records_by_role")
        words = conn.execute("SELECT count(*) FROM records_fts_1").fetchone()
    again = _memory(tmp_path / "m.db", embedder=True)
    backend = (await again.located(APP, USER)).backend
    scope = again.scope(APP, USER)
    assert _values(tmp_path / "m.db") == before
    assert backend.conn.execute("SELECT value FROM store_meta WHERE key = 'record_values'").fetchone() == ("1",)
    assert backend.conn.execute("SELECT count(*) FROM records_fts_1").fetchone() == words
    for spec in ({"topic": "travel"}, {"project.n": {"$exists": True}}, {"role": "user", "n": {"$gte": 1}}):
        where = where_of(spec)
        want = sorted(r.id for r in records if matches(where.filter, r))
        assert sorted(r.id for r in await scanned(backend, scope, where)) == want, spec
        assert await backend.count(scope, where=where) == len(want), spec
    await again.close()


async def test_the_previous_releases_store_is_upgraded_and_filters(tmp_path: Path) -> None:
    """A store of 71d0724 (one full-text table, no values; metadata given it as that release wrote
    it): at open it moves to this schema and its records are found by their metadata."""
    shutil.copy(OLD_STORE, tmp_path / "memory.db")
    with sqlite3.connect(tmp_path / "memory.db") as conn:
        trip = '{"trip": {"city": "Hangzhou", "year": 2023}}'
        conn.execute("UPDATE records SET metadata = ? WHERE event_id = 'e3'", (trip,))
    memory = LongTermMemory(backend="local", backend_config={"path": str(tmp_path / "memory.db")}, app_name="travel")
    backend = (await memory.located("travel", "alice")).backend
    scope = memory.scope("travel", "alice")
    later = {"timestamp": {"$gt": 1_700_000_001}}
    assert [r.text for r in await scanned(backend, scope, where_of(later))] == ["我住在杭州西湖边"]
    assert await backend.count(scope, where=where_of({"role": "user", "session_id": "s1"})) == 2
    assert await backend.count(scope, where=where_of({"trip.year": {"$lt": 2024}})) == 1
    hits = await backend.search(scope, "passport", 5, where=where_of({"trip": {"$exists": False}}))
    assert [h.record.text for h in hits] == ["My passport expires in August 2027"]
    assert await backend.search(scope, "passport", 5, where=where_of({"trip.city": "Hangzhou"})) == []
    await memory.close()
