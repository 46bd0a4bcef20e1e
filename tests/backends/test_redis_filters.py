"""Filters on the Redis engine, against the real Redis Stack server the test setup starts.

What is held: a filter narrows full text, k-NN, counts and pages before their cut (the 5 that
pass are found under 1,995 that rank above them); the engine's query answers what
``core.where.holds`` answers, and with the core's second look what ``core.filters.matches``
answers, for filters hypothesis draws over varied metadata (with an erase under way too); a store
of the previous release (no ``ftags`` field in its index, records without tokens, no marker) is
brought up to date when opened, by two processes at once, once; and records a process of that
release saves afterwards (no tokens, or the tokens of their previous doc) are put right before a
filtered read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longterm import LongTermMemory, MemoryRecord
from longterm.backends.redis import RedisBackend
from longterm.backends.redis.filtering import FILTER_FIELD, clause, tags
from longterm.backends.redis.scripts import CLOCK, FILTERS_KEY, INDEX_ON, SCHEMA, session_tag
from longterm.core.engine import Query
from longterm.core.erasures import Erasure
from longterm.core.filters import matches
from longterm.core.where import EVERYTHING, NOTHING, And, Has, Neg, Or, Span, holds, record_tokens, where_of
from longterm.retrieval.embedders import HashingEmbedder
from longterm.retrieval.text import index_terms, query_terms
from longterm.testing import make_record
from longterm.testing.contract import HANG_LIMIT
from longterm.testing.filter_strategies import filters
from tests.backends.drawn import SCOPE, Store, crowd, drawn_records

APPLE = Query("apple", query_terms("apple", stem=False))


@pytest.fixture
def redis_cfg(services, tmp_path: Path) -> dict:
    return cast(dict, services("redis").config(tmp_path))


def _engine(memory: LongTermMemory) -> RedisBackend:
    return cast(RedisBackend, memory.backend_instance)


def test_the_translation_folds_everything_and_nothing_and_brackets_every_part():
    a, b = Has(("aa",)), Has(("bb", "cc"))
    assert clause(EVERYTHING) is True and clause(NOTHING) is False and clause(Has(())) is False
    assert clause(Neg(EVERYTHING)) is False and clause(Neg(NOTHING)) is True
    assert clause(And((a, Or(())))) is False and clause(Or((a, And(())))) is True
    assert clause(And((a, Or((b, Neg(a)))))) == "(@ftags:{aa}) ((@ftags:{bb|cc})|(-(@ftags:{aa})))"
    assert clause(Span(1.5, None, lo_incl=False)) == "@timestamp:[(1.5 +inf]"
    assert clause(Span(None, 2.0, hi_incl=False)) == "@timestamp:[-inf (2.0]"
    with pytest.raises(ValueError, match="not a filter token"):
        clause(Has(("a}|@scope:{x",)))


def _scored(engine: RedisBackend, query: Query, k: int, where: Any) -> tuple[dict[str, float], dict[str, float]]:
    """The full-text scores (by id) of ``where``'s best ``k`` and of the best ``k`` without it, read
    while the index's statistics held still (RediSearch re-indexes what a new index's background
    scan meets, and counts replaced documents until its GC has run: BM25 moves meanwhile)."""
    end = time.monotonic() + HANG_LIMIT  # how long follows the machine's load: bounded against a hang only
    while time.monotonic() < end:
        plain = {r.id: score for r, score in engine._fulltext(SCOPE, query, k, None)}
        text = {r.id: score for r, score in engine._fulltext(SCOPE, query, k, where)}
        if plain == {r.id: score for r, score in engine._fulltext(SCOPE, query, k, None)}:
            return text, plain
        time.sleep(0.1)
    raise AssertionError(f"the scores did not hold still within {HANG_LIMIT:.0f} s")


# -- (1) the five that pass, under a thousand that rank above them --------------------------------


async def test_the_five_that_pass_are_found_under_the_thousands_that_rank_above_them(redis_cfg: dict):
    memory = LongTermMemory(backend="redis", backend_config=redis_cfg, embedder=HashingEmbedder(64), app_name="app")
    engine = _engine(memory)
    records = crowd()
    await engine.upsert(records)
    rare = {r.id for r in records[-5:]}
    vector = engine.embedder.embed(["apple"], kind="query")[0]  # type: ignore[union-attr]
    try:
        assert {h.record.id for h in await engine.search(SCOPE, "apple", 5)} & rare == set()  # they do rank last
        for spec in ({"topic": "rare"}, {"timestamp": {"$lt": 1_650_000_000}}, {"n": {"$gte": 5}}):
            where = where_of(spec)
            assert {h.record.id for h in await engine.search(SCOPE, "apple", 5, where=where)} == rare, spec
            text = await asyncio.to_thread(engine._fulltext, SCOPE, APPLE, 5, where)
            near = await asyncio.to_thread(engine._nearest, SCOPE, vector, 5, where)
            assert {r.id for r, _ in text} == rare and {r.id for r, _ in near} == rare, spec
            assert await engine.count(SCOPE, where=where) == 5
        # Scores are the unfiltered ones: a filter clause scores nothing.
        both = where_of({"topic": {"$in": ["rare", "common"]}})
        scores, unfiltered = await asyncio.to_thread(_scored, engine, APPLE, 10, both)
        assert scores == unfiltered
        # An erase under way: what it covers is left out with the filter, before the cut.
        await asyncio.to_thread(engine._erasure_begin, Erasure(app_name="app", user_id="u1", session_id="q4"))
        where = where_of({"topic": "rare"})
        assert {h.record.id for h in await engine.search(SCOPE, "apple", 5, where=where)} == rare - {records[-1].id}
        assert {r.id for r, _ in await asyncio.to_thread(engine._nearest, SCOPE, vector, 5, where)} == rare - {
            records[-1].id
        }
        assert await engine.count(SCOPE, where=where) == 4
    finally:
        await memory.close()


# -- (2) the engine and the reference agree on drawn filters ------------------------------------


@pytest.fixture(scope="module")
def store(services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = Store("redis", services("redis").config(tmp_path_factory.mktemp("filters")))
    yield s
    s.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=filters())
def test_scan_and_count_agree_with_the_reference_on_drawn_filters(store: Store, spec: dict[str, Any]):
    where = where_of(spec)
    assert where is not None
    expected = {r.id for r in store.records if matches(where.filter, r)}
    native = {r.id for r in store.records if holds(where.native, set(record_tokens(r)), r.timestamp)}
    scanned = store.scan(where)
    assert len(scanned) == len(set(scanned)) and set(scanned) == expected, spec
    assert store.run(store.engine.count(SCOPE, where=where)) == len(expected), spec
    paged = store.pages(where)
    assert len(paged) == len(set(paged)) and set(paged) == native, spec
    assert store.engine._count(SCOPE, where=where) == len(native), spec
    text, plain = _scored(store.engine, Query("note", query_terms("note", stem=False)), 40, where)
    assert text == {i: plain[i] for i in native}, spec  # the same scores: a filter adds nothing to them


def test_no_filter_and_the_empty_cases(store: Store):
    everyone = {r.id for r in store.records}
    assert set(store.scan(None)) == everyone and store.run(store.engine.count(SCOPE)) == 40
    nothing = where_of({"topic": {"$in": []}})
    assert nothing is not None and nothing.native == NOTHING
    assert store.scan(nothing) == [] and store.engine._count(SCOPE, where=nothing) == 0
    assert store.engine._page(SCOPE, None, 7, where=nothing) == ([], None)
    anything = where_of({"$not": {"topic": {"$in": []}}})
    assert anything is not None and anything.native == EVERYTHING
    assert set(store.pages(anything)) == everyone and store.engine._count(SCOPE, where=anything) == 40


@given(st.data())
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_search_with_drawn_filters_returns_only_what_passes(store: Store, data: st.DataObject):
    where = where_of(data.draw(filters()))
    assert where is not None
    hits = store.run(store.engine.search(SCOPE, "note", 40, where=where))
    assert {h.record.id for h in hits} == {r.id for r in store.records if matches(where.filter, r)}


async def test_a_filtered_page_leaves_out_what_an_erase_under_way_covers(redis_cfg: dict):
    memory = LongTermMemory(backend="redis", backend_config=redis_cfg, app_name="app")
    engine = _engine(memory)
    records = drawn_records("u1")
    await engine.upsert(records)
    try:
        await asyncio.to_thread(engine._erasure_begin, Erasure(app_name="app", user_id="u1", session_id="s1"))
        await engine.upsert([make_record("late", session="s1", event="late", metadata={"topic": "b"})])
        where = where_of({"$or": [{"topic": "b"}, {"n": {"$exists": False}}]})
        assert where is not None
        kept = [r for r in records if r.session_id != "s1"] + [make_record("late", session="s1", event="late")]
        expected = {r.id for r in kept if r.event_id == "late" or matches(where.filter, r)}
        assert {r.id async for r in engine.scan(SCOPE, batch_size=5, where=where)} == expected
        assert await engine.count(SCOPE, where=where) == len(expected)
    finally:
        await memory.close()


# -- (3) a store of the previous release ----------------------------------------------------------


def _as_the_previous_release_left_it(engine: RedisBackend) -> None:
    """The index without ``ftags``, every record without tokens, ``ns meta`` without the marker."""
    r, ns = engine._r, engine.ns
    r.execute_command("FT.DROPINDEX", engine.index_name)  # the records stay
    at = SCHEMA.index(FILTER_FIELD[0])
    old_schema = SCHEMA[:at] + SCHEMA[at + len(FILTER_FIELD) :]
    r.execute_command("FT.CREATE", engine.index_name, *INDEX_ON, ns + "m:", *old_schema)
    for key in r.scan_iter(match=ns + "m:*", count=1000):
        r.hdel(key, "ftags")
    r.hdel(ns + "meta", FILTERS_KEY)


def _hashes(engine: RedisBackend) -> dict[bytes, dict[bytes, bytes]]:
    return {key: engine._r.hgetall(key) for key in engine._r.scan_iter(match=engine.ns + "m:*", count=1000)}


async def test_a_store_of_the_previous_release_gets_its_tokens_once(redis_cfg: dict, monkeypatch: pytest.MonkeyPatch):
    records = drawn_records("u1")
    first = LongTermMemory(backend="redis", backend_config=redis_cfg, app_name="app")
    await _engine(first).upsert(records)
    _as_the_previous_release_left_it(_engine(first))
    before = _hashes(_engine(first))
    await first.close()

    a = LongTermMemory(backend="redis", backend_config=redis_cfg, app_name="app")
    b = LongTermMemory(backend="redis", backend_config=redis_cfg, app_name="app")
    ea, eb = _engine(a), _engine(b)
    specs = [{"topic": "travel"}, {"n": 1}, {"project.phase": {"$exists": True}}, {"$not": {"role": "user"}}]
    try:
        # Two processes open it at once: both upgrade, neither spoils the other's work.
        where = where_of(specs[0])
        assert where is not None
        counts = await asyncio.gather(ea.count(SCOPE, where=where), eb.count(SCOPE, where=where))
        assert counts == [sum(matches(where.filter, r) for r in records)] * 2
        fields = ea._r.execute_command("FT.INFO", ea.index_name)
        info = dict(zip(fields[::2], fields[1::2], strict=True))
        assert any(attr[1] == b"ftags" for attr in info[b"attributes"])
        by_key = {f"{ea.ns}m:{r.id}".encode(): r for r in records}
        after = _hashes(ea)
        assert after.keys() == before.keys() == by_key.keys()
        for key, fields_of in after.items():
            tokens = fields_of.pop(b"ftags")
            assert fields_of == before[key]  # the words, the record, its stamp: as they were
            assert tokens.decode() == tags(by_key[key])
        for spec in specs:
            w = where_of(spec)
            assert w is not None
            got = {r.id async for r in ea.scan(SCOPE, where=w)}
            assert got == {r.id for r in records if matches(w.filter, r)}, spec
        # A save now writes its tokens, and a store that is up to date is not read whole again when opened.
        await ea.upsert([make_record("new one", event="new", metadata={"topic": "travel"})])

        def never(*args: Any) -> None:
            raise AssertionError("upgraded twice")

        monkeypatch.setattr("longterm.backends.redis.tokens.records_of", never)
        c = LongTermMemory(backend="redis", backend_config=redis_cfg, app_name="app")
        try:
            assert await _engine(c).count(SCOPE, where=where) == counts[0] + 1
        finally:
            await c.close()
    finally:
        await a.close()
        await b.close()


def _saved_by_the_previous_release(engine: RedisBackend, record: MemoryRecord) -> None:
    """``record`` written as a process of the previous release's ``SAVE`` writes it: the clock moved,
    every field but ``ftags`` (a new record has none; one written before keeps its old tokens)."""
    r, ns = engine._r, engine.ns
    now = r.hincrby(ns + "meta", CLOCK, 1)
    key = f"{ns}m:{record.id}"
    fields = {"doc": record.model_dump_json(), "terms": " ".join(index_terms(record.text))}
    fields |= {"scope": engine._tag(record.app_name, record.user_id), "timestamp": repr(record.timestamp)}
    r.hset(key, mapping={**fields, "session": session_tag(record.session_id), "saved": now})
    r.sadd(engine._set(SCOPE), key)


async def test_records_an_older_process_saves_are_put_right_before_a_filtered_read(redis_cfg: dict):
    memory = LongTermMemory(backend="redis", backend_config=redis_cfg, app_name="app")
    engine = _engine(memory)
    records = [make_record(f"note {i}", event=f"e{i}", metadata={"topic": "a"}) for i in range(5)]
    await engine.upsert(records)
    try:
        meta = engine.ns + "meta"
        assert engine._r.hget(meta, FILTERS_KEY) == engine._r.hget(meta, CLOCK)  # moved with the clock
        changed = records[0].model_copy(update={"metadata": {"topic": "b"}})
        fresh = make_record("note new", event="new", metadata={"topic": "b"})
        for record in (changed, fresh):
            _saved_by_the_previous_release(engine, record)
        assert not engine._r.hexists(f"{engine.ns}m:{fresh.id}", "ftags")
        for spec, want in (
            ({"topic": "a"}, {r.id for r in records[1:]}),
            ({"topic": "b"}, {changed.id, fresh.id}),
            ({"topic": {"$ne": "b"}}, {r.id for r in records[1:]}),
        ):
            where = where_of(spec)
            assert {r.id async for r in engine.scan(SCOPE, where=where)} == want, spec
            assert await engine.count(SCOPE, where=where) == len(want), spec
            assert {h.record.id for h in await engine.search(SCOPE, "note", 10, where=where)} == want, spec
        assert engine._r.hget(meta, FILTERS_KEY) == engine._r.hget(meta, CLOCK)
    finally:
        await memory.close()
