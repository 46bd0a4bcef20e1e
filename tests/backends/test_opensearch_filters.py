"""Filters on the OpenSearch engine, against the real node the test setup starts.

What is held: a filter narrows BM25, k-NN, counts and pages before their cut (the 5 that pass
are found under 1,995 that rank above them); the engine's bool query answers what
``core.where.holds`` answers, and with the core's second look what ``core.filters.matches``
answers, for filters hypothesis draws over varied metadata; an index of the previous release
(no token field, no marker) is brought up to date when opened, by two processes at once, with
its records' words unchanged, and once only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longterm import LongTermMemory, MemoryRecord
from longterm.backends.opensearch import OpenSearchBackend
from longterm.backends.opensearch.bulk import chunks, send
from longterm.backends.opensearch.schema import FILTERED, TOKENS, TOKENS_META, data_index
from longterm.core.engine import Query
from longterm.core.filters import matches
from longterm.core.where import NOTHING, holds, record_tokens, where_of
from longterm.retrieval.embedders import HashingEmbedder
from longterm.retrieval.text import query_terms, segment
from longterm.testing import make_record
from longterm.testing.filter_strategies import filters
from tests.backends.drawn import SCOPE, Store, crowd, drawn_records

APPLE = Query("apple", query_terms("apple", stem=False))


@pytest.fixture
def os_cfg(services, tmp_path: Path) -> dict:
    return cast(dict, services("opensearch").config(tmp_path))


def _engine(memory: LongTermMemory) -> OpenSearchBackend:
    return cast(OpenSearchBackend, memory.backend_instance)


# -- (1) the five that pass, under a thousand that rank above them --------------------------------


async def test_the_five_that_pass_are_found_under_the_thousands_that_rank_above_them(os_cfg: dict):
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg, embedder=HashingEmbedder(64), app_name="app")
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
        plain = await asyncio.to_thread(engine._fulltext, SCOPE, APPLE, 10, None)
        assert await asyncio.to_thread(engine._fulltext, SCOPE, APPLE, 10, both) == plain
    finally:
        await memory.close()


# -- (2) the engine and the reference agree on drawn filters ------------------------------------


@pytest.fixture(scope="module")
def store(services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = Store("opensearch", services("opensearch").config(tmp_path_factory.mktemp("filters")), vectors=True)
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


def test_no_filter_and_the_empty_cases(store: Store):
    everyone = {r.id for r in store.records}
    assert set(store.scan(None)) == everyone and store.run(store.engine.count(SCOPE)) == 40
    nothing = where_of({"topic": {"$in": []}})
    assert nothing is not None and nothing.native == NOTHING
    assert store.scan(nothing) == [] and store.engine._count(SCOPE, where=nothing) == 0
    anything = where_of({"$not": {"topic": {"$in": []}}})
    assert set(store.pages(anything)) == everyone


@given(st.data())
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_search_with_drawn_filters_returns_only_what_passes(store: Store, data: st.DataObject):
    where = where_of(data.draw(filters()))
    assert where is not None
    hits = store.run(store.engine.search(SCOPE, "note", 40, where=where))
    assert {h.record.id for h in hits} == {r.id for r in store.records if matches(where.filter, r)}
    native = {r.id for r in store.records if holds(where.native, set(record_tokens(r)), r.timestamp)}
    vector = store.engine.embedder.embed(["note"], kind="query")[0]  # type: ignore[union-attr]
    assert {r.id for r, _ in store.engine._nearest(SCOPE, vector, 40, where)} == native
    assert {r.id for r, _ in store.engine._fulltext(SCOPE, Query("note", ["note"]), 40, where)} == native


# -- (3) an index of the previous release ----------------------------------------------------------


def _old_index(engine: OpenSearchBackend, records: list[MemoryRecord]) -> None:
    """``engine.index`` as the previous release made and wrote it: no token field, no marker, and a
    tombstone of an erased record."""
    settings, mappings = data_index(None, {"index": engine.cfg.index, "prefix": engine.cfg.prefix})
    del mappings["properties"][TOKENS]
    del mappings["_meta"][TOKENS_META]
    body = {"settings": {"index": {**settings, "number_of_replicas": 0}}, "mappings": mappings}
    engine.client.indices.create(index=engine.index, body=body)
    rows: list[tuple[str, dict[str, Any], str]] = []
    for r in records:
        data = r.model_dump(mode="json", exclude={"content"} if r.text_only_content() else None)
        doc = {"record_id": r.id, **{k: data[k] for k in FILTERED}, "terms": segment(r.text, 1000), "doc": data}
        rows.append((r.id, doc, r.id))
    rows.append(("gone", {"erased": True}, "tombstone"))
    for chunk in chunks(engine.index, rows):
        send(engine.client, chunk)


def _sources(engine: OpenSearchBackend) -> dict[str, dict[str, Any]]:
    body = {"size": 1000, "query": {"match_all": {}}}
    return {h["_id"]: h["_source"] for h in engine.client.search(index=engine.index, body=body)["hits"]["hits"]}


async def test_an_index_of_the_previous_release_gets_its_tokens_once(os_cfg: dict, monkeypatch: pytest.MonkeyPatch):
    records = drawn_records("u1")
    a = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    b = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    ea, eb = _engine(a), _engine(b)
    _old_index(ea, records)
    before = _sources(ea)
    specs = [{"topic": "travel"}, {"n": 1}, {"project.phase": {"$exists": True}}, {"$not": {"role": "user"}}]
    try:
        # Two processes open it at once: both upgrade, neither spoils the other's work.
        where = where_of(specs[0])
        counts = await asyncio.gather(ea.count(SCOPE, where=where), eb.count(SCOPE, where=where))
        assert counts == [sum(matches(where.filter, r) for r in records)] * 2  # type: ignore[union-attr]
        mapping = next(iter(ea.client.indices.get_mapping(index=ea.index).values()))["mappings"]
        assert mapping["properties"][TOKENS] == {"type": "keyword"} and mapping["_meta"][TOKENS_META] == "1"
        after = _sources(ea)
        by_id = {r.id: r for r in records}
        assert after["gone"] == {"erased": True}
        for doc_id, source in after.items():
            tokens = source.pop(TOKENS, None)
            assert source == before[doc_id]  # the words, the record: as they were
            assert tokens == (sorted(record_tokens(by_id[doc_id])) if doc_id in by_id else None)
        for spec in specs:
            w = where_of(spec)
            assert w is not None
            got = {r.id async for r in ea.scan(SCOPE, where=w)}
            assert got == {r.id for r in records if matches(w.filter, r)}, spec
        # A save now writes its tokens, and a store that is up to date is not read again when opened.
        await ea.upsert([make_record("new one", event="new", metadata={"topic": "travel"})])

        def never(*args: Any) -> None:
            raise AssertionError("upgraded twice")

        monkeypatch.setattr("longterm.backends.opensearch.engine.add_tokens", never)
        c = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
        try:
            assert await _engine(c).count(SCOPE, where=where) == counts[0] + 1
        finally:
            await c.close()
    finally:
        await a.close()
        await b.close()


def test_a_new_index_is_made_with_the_field_and_the_marker():
    settings, mappings = data_index(HashingEmbedder(8), {"index": "i", "prefix": "p"})
    assert mappings["properties"][TOKENS] == {"type": "keyword"} and mappings["_meta"][TOKENS_META] == "1"
    assert json.loads(json.dumps(settings))["knn"] is True
