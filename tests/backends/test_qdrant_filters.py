"""Filters on both Qdrant engines (qdrant-edge, and qdrant-client's local mode): applied inside
Qdrant's query before its cut (full text, vectors, Qdrant's RRF, counts, scrolls), held to the
reference (``core.filters.matches``) on drawn filters, and a store written before the filter
tokens brought up to date at open."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from longterm import LongTermMemory
from longterm.backends.qdrant.common import RECORD, point_id
from longterm.backends.qdrant.tags import MARKER, TAGS
from longterm.core.filters import matches
from longterm.core.where import where_of
from longterm.records import MemoryRecord
from longterm.testing import make_record
from longterm.testing.contract.filters import APP, USER, corpus
from longterm.testing.filter_strategies import filters
from tests.backends.drawn import agrees_with_reference, scanned
from tests.backends.embedded import qdrant_memory

_memory = partial(qdrant_memory, app=APP)

ENGINES = ["edge", "local"]
OLD_STORES = Path(__file__).resolve().parents[1] / "data" / "stores_71d0724"


#: Each fusion path on the embedded engine; in qdrant-client's local mode (slow at 2,000 points) its
#: own RRF only: full text alone there is the contract's ``Filters`` test, and convex fusion is the core's.
PATHS = [("edge", "text"), ("edge", "convex"), ("edge", "rrf"), ("local", "rrf")]


@pytest.mark.parametrize(("engine", "mode"), PATHS)
async def test_the_five_that_pass_come_back_from_below_two_thousand_that_do_not(
    tmp_path: Path, engine: str, mode: str
) -> None:
    """Full text alone, both arms fused by the core, and Qdrant's own RRF: the five that pass rank
    below 1,995 that do not, and a filtered search returns exactly them."""
    memory = _memory(tmp_path / "q", engine, mode)
    backend = (await memory.located(APP, USER)).backend
    scope = memory.scope(APP, USER)
    loud = [
        make_record("bees make honey", app=APP, user=USER, session=f"l{i % 20}", event=f"l{i}",
                    metadata={"topic": "work"}, timestamp=2_000.0 + i)
        for i in range(1_995)
    ]  # fmt: skip
    wanted = [
        make_record(f"bees make honey near the old mill at dawn, {word}", app=APP, user=USER, session="trip",
                    event=f"w{i}", metadata={"topic": "travel"}, timestamp=1_000.0 + i)
        for i, word in enumerate(["sunny", "rainy", "windy", "foggy", "stormy"])
    ]  # fmt: skip
    await backend.upsert([*loud, *wanted])
    want = {r.id for r in wanted}
    assert not {h.record.id for h in await backend.search(scope, "bees make honey", 1_000)} & want
    for spec in ({"topic": "travel"}, {"timestamp": {"$lt": 1_500}}, {"$not": {"topic": "work"}}):
        hits = await backend.search(scope, "bees make honey", 5, where=where_of(spec))
        assert {h.record.id for h in hits} == want, spec
        assert await backend.count(scope, where=where_of(spec)) == 5
    assert await backend.search(scope, "bees", 5, where=where_of({"topic": {"$in": []}})) == []
    await memory.close()


@pytest.fixture(scope="module", params=ENGINES)
def drawn_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LongTermMemory, Any, list[MemoryRecord]]]:
    """One store per engine of ``corpus()`` (40 records: nested metadata, lists, ints and floats,
    booleans, None, missing keys), written once; every drawn filter is asked of it."""
    memory = _memory(tmp_path_factory.mktemp("drawn") / "q", request.param, "rrf")
    records = corpus()
    memory.upsert_records_sync(records)
    backend = memory.portal.call(memory.located(APP, USER)).backend
    yield memory, backend, records
    memory.close_sync()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=filters())
def test_a_drawn_filter_lists_counts_and_searches_what_the_reference_passes(
    drawn_store: tuple[LongTermMemory, Any, list[MemoryRecord]], spec: dict[str, Any]
) -> None:
    agrees_with_reference(*drawn_store, spec)


def _strip_tokens(backend: Any) -> None:
    """The store as the previous release left it: no point carries tokens, no marker."""
    if hasattr(backend, "_shard"):
        e = backend._e
        points, _ = backend._shard.scroll(e.ScrollRequest(limit=1_000, with_payload=False))
        backend._shard.update(e.UpdateOperation.delete_payload([p.id for p in points], [TAGS]))
    else:
        m = backend._m
        everything = m.FilterSelector(filter=m.Filter(must=[]))
        backend._client.delete_payload(backend.collection, keys=[TAGS], points=everything)
    backend._meta_set(MARKER, "")


def _points(backend: Any) -> dict[str, Any]:
    """Every point's (payload, vectors) by point id."""
    if hasattr(backend, "_shard"):
        e = backend._e
        points, _ = backend._shard.scroll(e.ScrollRequest(limit=1_000, with_payload=True, with_vector=True))
    else:
        points, _ = backend._client.scroll(backend.collection, limit=1_000, with_payload=True, with_vectors=True)
    return {str(p.id): (p.payload, {k: _plain(v) for k, v in (p.vector or {}).items()}) for p in points}


def _plain(vector: Any) -> Any:
    """A vector as plain values (qdrant-edge's sparse vectors compare by identity)."""
    if hasattr(vector, "indices"):
        return list(vector.indices), list(vector.values)
    return list(vector)


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_store_written_without_tokens_gets_them_once_at_open(tmp_path: Path, engine: str) -> None:
    memory = _memory(tmp_path / "q", engine, "convex")
    backend = (await memory.located(APP, USER)).backend
    records = corpus()
    await backend.upsert(records)
    before = _points(backend)
    _strip_tokens(backend)
    assert all(TAGS not in payload for payload, _ in _points(backend).values())
    await memory.close()

    again = _memory(tmp_path / "q", engine, "convex")
    backend = (await again.located(APP, USER)).backend
    scope = again.scope(APP, USER)
    after = _points(backend)
    assert after == before  # the tokens are back, vectors and words as they were
    assert backend._meta_get(MARKER)
    for spec in ({"topic": "travel"}, {"project.n": {"$exists": True}}, {"timestamp": {"$gte": 102}}):
        where = where_of(spec)
        want = sorted(r.id for r in records if matches(where.filter, r))
        assert sorted(r.id for r in await scanned(backend, scope, where)) == want, spec
        assert await backend.count(scope, where=where) == len(want), spec
    await again.close()


async def test_the_previous_releases_edge_store_is_upgraded_and_filters(tmp_path: Path) -> None:
    """A store of 71d0724 (tests/data/stores_71d0724): its points lacked the tokens, the time and
    the session in their payloads; at open they get them (and the tokens' index), once."""
    with tarfile.open(OLD_STORES / "qdrant-edge.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    config = {"path": str(tmp_path / "qdrant"), "engine": "edge"}
    memory = LongTermMemory(backend="qdrant", backend_config=config, app_name="travel")
    backend = (await memory.located("travel", "alice")).backend
    scope = memory.scope("travel", "alice")
    assert TAGS in backend._shard.info().payload_schema
    records = {p[RECORD]: p for p, _ in _points(backend).values()}
    assert all(TAGS in p and "timestamp" in p for p in records.values())
    later = {"timestamp": {"$gt": 1_700_000_001}}
    assert [r.text for r in await scanned(backend, scope, where_of(later))] == ["我住在杭州西湖边"]
    assert await backend.count(scope, where=where_of({"role": "user", "session_id": "s1"})) == 2
    hits = await backend.search(scope, "passport", 5, where=where_of({"author": "user"}))
    assert [h.record.text for h in hits] == ["My passport expires in August 2027"]
    await memory.close()


async def test_a_tagging_on_a_server_leaves_a_point_rewritten_meanwhile_as_it_is(tmp_path: Path) -> None:
    """On a server the upgrade's change of a point holds only while the point lacks its tokens: a
    process that rewrote it since (tokens and all) keeps its own (local mode evaluates the filter
    as a server does)."""
    memory = _memory(tmp_path / "q", "local")
    backend = (await memory.located(APP, USER)).backend
    old, new = corpus(2)
    await backend.upsert([old, new])
    _strip_tokens(backend)
    stale = {TAGS: ["stale"]}
    backend.url = "http://server"  # the server's way of setting payloads (``_set_payloads``)
    try:
        backend._set_payloads([(point_id(old.id), stale)])
        backend._set_payloads([(point_id(new.id), dict(stale, other=1))])
        backend._set_payloads([(point_id(new.id), {TAGS: ["later"], "other": 2})])
    finally:
        backend.url = None
    payloads = {pid: payload for pid, (payload, _) in _points(backend).items()}
    assert payloads[point_id(old.id)][TAGS] == ["stale"]
    assert payloads[point_id(new.id)][TAGS] == ["stale"] and payloads[point_id(new.id)]["other"] == 1
    await memory.close()
