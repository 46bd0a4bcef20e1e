"""Expiry on the OpenSearch engine, against the real node the test setup starts.

What is held: a read made at a moment (``core.where.living``) returns exactly the records alive
then (no ``expires_at``, or one after it) that pass the rest of the filter, from the engine's own
query before its cut, on every read path (scan, count, pages by time, BM25, k-NN, the fused
search); moving the moment past a record's expiry hides it at once; ``expires_at`` and
``updated_at`` come back as written; an index of the previous release (no ``expires_at`` in its
mapping) gets the field when opened, once, and answers such reads right.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, cast

import pytest

from longterm import LongTermMemory, MemoryRecord, Scope
from longterm.backends.opensearch import OpenSearchBackend
from longterm.backends.opensearch.bulk import chunks, send
from longterm.backends.opensearch.filtering import clause
from longterm.backends.opensearch.schema import EXPIRES_AT, FILTERED, TOKENS, data_index
from longterm.core.engine import Query
from longterm.core.where import EXPIRES, Span, Where, holds, living, record_tokens, where_of
from longterm.retrieval.embedders import HashingEmbedder
from longterm.retrieval.text import segment
from longterm.testing import make_record

SCOPE = Scope(app_name="app", user_id="u1")
NOTE = Query("note", ["note"])
NOW = 1_800_000_000.0


def _engine(memory: LongTermMemory) -> OpenSearchBackend:
    return cast(OpenSearchBackend, memory.backend_instance)


def _records(user: str) -> list[MemoryRecord]:
    """Twelve notes: expired (before ``NOW``, one exactly at it), expiring later, never expiring;
    each kind with topics a and b, and two corrected ones (``updated_at``)."""
    expiries: list[float | None] = [NOW - 3600, NOW, NOW + 1, NOW + 3600, None, None] * 2
    out = []
    for i, expires in enumerate(expiries):
        r = make_record(
            f"note {i}", user=user, event=f"e{i}", metadata={"topic": "ab"[i // 6]}, timestamp=1_700_000_000.0 + i
        )
        out.append(r.model_copy(update={"expires_at": expires, "updated_at": NOW - 60 if i % 5 == 0 else None}))
    return out


def _alive(records: list[MemoryRecord], where: Where) -> set[str]:
    return {r.id for r in records if where.admits(r)}


class Store:
    """One store of ``_records`` (and the same for another user), kept for the module's tests."""

    def __init__(self, cfg: dict) -> None:
        self.loop = asyncio.new_event_loop()
        self.memory = LongTermMemory(backend="opensearch", backend_config=cfg, embedder=HashingEmbedder(16))
        self.engine = _engine(self.memory)
        self.records = _records("u1")
        self.run(self.engine.upsert([*self.records, *_records("u2")]))

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def scan(self, where: Where | None) -> list[MemoryRecord]:
        async def read() -> list[MemoryRecord]:
            return [r async for r in self.engine.scan(SCOPE, batch_size=5, where=where)]

        return cast(list[MemoryRecord], self.run(read()))

    def by_time(self, where: Where | None, newest_first: bool) -> list[MemoryRecord]:
        out: list[MemoryRecord] = []
        cursor = None
        while True:
            page, cursor = self.run(self.engine.page_by_time(SCOPE, cursor, 4, newest_first=newest_first, where=where))
            out += page
            if cursor is None:
                return out

    def reads(self, where: Where) -> dict[str, list[str]]:
        """The ids every read path returns for ``where``."""
        vector = self.engine.embedder.embed(["note"], kind="query")[0]  # type: ignore[union-attr]
        return {
            "scan": [r.id for r in self.scan(where)],
            "page": [r.id for r in self.engine._page(SCOPE, None, 100, where)[0]],
            "newest": [r.id for r in self.by_time(where, True)],
            "oldest": [r.id for r in self.by_time(where, False)],
            "search": [h.record.id for h in self.run(self.engine.search(SCOPE, "note", 50, where=where))],
            "fulltext": [r.id for r, _ in self.engine._fulltext(SCOPE, NOTE, 50, where)],
            "nearest": [r.id for r, _ in self.engine._nearest(SCOPE, vector, 50, where)],
        }

    def close(self) -> None:
        self.run(self.memory.close())
        self.loop.close()


@pytest.fixture(scope="module")
def store(services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = Store(services("opensearch").config(tmp_path_factory.mktemp("expiry")))
    yield s
    s.close()


def _check(store: Store, where: Where) -> set[str]:
    expected = _alive(store.records, where)
    for path, ids in store.reads(where).items():
        assert len(ids) == len(set(ids)) and set(ids) == expected, path
    assert store.run(store.engine.count(SCOPE, where=where)) == len(expected)
    assert store.engine._count(SCOPE, where) == len(expected)
    return expected


@pytest.mark.parametrize(
    "spec", [None, {"topic": "a"}, {"$not": {"topic": "a"}}, {"timestamp": {"$gte": 1_700_000_003}}]
)
def test_a_read_at_a_moment_returns_exactly_the_living_that_pass(store: Store, spec: dict[str, Any] | None):
    where = living(where_of(spec), NOW)
    expected = _check(store, where)
    # Expired: before NOW and exactly at it; alive: after it, or never expiring.
    kinds = {r.id: r.expires_at for r in store.records if r.id in expected}
    assert all(e is None or e > NOW for e in kinds.values()) and None in kinds.values()
    tokens = {r.id: set(record_tokens(r)) for r in store.records}
    native = {r.id for r in store.records if holds(where.native, tokens[r.id], r.timestamp, r.expires_at)}
    assert native == expected


def test_moving_the_moment_past_an_expiry_hides_the_record_at_once(store: Store):
    soon = [r for r in store.records if r.expires_at == NOW + 3600]
    before = _check(store, living(None, NOW + 3599.5))
    after = _check(store, living(None, NOW + 3600))
    assert before - after == {r.id for r in soon} and after < before
    never = _check(store, living(None, 9e12))
    assert never == {r.id for r in store.records if r.expires_at is None}
    everything = _check(store, living(None, NOW - 7200))
    assert everything == {r.id for r in store.records}


def test_expiry_and_correction_round_trip_on_every_read(store: Store):
    written = {r.id: (r.expires_at, r.updated_at) for r in store.records}
    assert any(e is not None for e, _ in written.values()) and any(u is not None for _, u in written.values())
    vector = store.engine.embedder.embed(["note"], kind="query")[0]  # type: ignore[union-attr]
    paths: dict[str, list[MemoryRecord]] = {
        "scan": store.scan(None),
        "page": store.engine._page(SCOPE, None, 100)[0],
        "by_time": store.by_time(None, True),
        "search": [h.record for h in store.run(store.engine.search(SCOPE, "note", 50))],
        "fulltext": [r for r, _ in store.engine._fulltext(SCOPE, NOTE, 50)],
        "nearest": [r for r, _ in store.engine._nearest(SCOPE, vector, 50)],
    }
    for path, records in paths.items():
        assert {r.id: (r.expires_at, r.updated_at) for r in records} == written, path
    assert {r.id: r for r in store.scan(None)} == {r.id: r for r in store.records}


def test_the_document_carries_expires_at_only_when_the_record_expires(store: Store):
    body = {"size": 100, "query": {"bool": {"filter": [{"term": {"user_id": "u1"}}]}}}
    hits = store.engine.client.search(index=store.engine.index, body=body)["hits"]["hits"]
    by_id = {r.id: r for r in store.records}
    assert len(hits) == len(by_id)
    for h in hits:
        assert h["_source"].get(EXPIRES_AT) == by_id[h["_id"]].expires_at
        assert (EXPIRES in h["_source"][TOKENS]) == (by_id[h["_id"]].expires_at is not None)


def test_an_overwrite_by_id_changes_the_expiry_it_is_read_with(store: Store):
    r = next(x for x in store.records if x.expires_at is None and x.metadata == {"topic": "b"})
    try:
        store.run(store.engine.upsert([r.model_copy(update={"expires_at": NOW - 1, "text": "note corrected"})]))
        assert r.id not in {x.id for x in store.scan(living(None, NOW))}
        assert r.id in {x.id for x in store.scan(living(None, NOW - 2))}
    finally:
        store.run(store.engine.upsert([r]))
    assert r.id in {x.id for x in store.scan(living(None, NOW))}


def test_a_span_on_expiry_leaves_out_what_never_expires():
    assert clause(Span(None, None, field="expires_at")) == {"exists": {"field": EXPIRES_AT}}
    assert clause(Span(NOW, None, lo_incl=False, field="expires_at")) == {"range": {EXPIRES_AT: {"gt": NOW}}}
    assert clause(Span(None, None)) == {"match_all": {}}


def test_a_new_index_maps_expiry_as_a_double():
    _, mappings = data_index(None, {"index": "i", "prefix": "p"})
    assert mappings["properties"][EXPIRES_AT] == {"type": "double"}


# -- an index of the previous release ----------------------------------------------------------------


def _old_index(engine: OpenSearchBackend, records: list[MemoryRecord]) -> None:
    """``engine.index`` as the previous release made and wrote it: tokens, no ``expires_at``."""
    settings, mappings = data_index(None, {"index": engine.cfg.index, "prefix": engine.cfg.prefix})
    del mappings["properties"][EXPIRES_AT]
    body = {"settings": {"index": {**settings, "number_of_replicas": 0}}, "mappings": mappings}
    engine.client.indices.create(index=engine.index, body=body)
    rows: list[tuple[str, dict[str, Any], str]] = []
    for r in records:
        data = r.model_dump(mode="json", exclude={"content"} if r.text_only_content() else None)
        data.pop("expires_at", None), data.pop("updated_at", None)
        doc = {"record_id": r.id, **{k: data[k] for k in FILTERED}, "terms": segment(r.text, 1000)}
        rows.append((r.id, {**doc, TOKENS: sorted(record_tokens(r)), "doc": data}, r.id))
    for chunk in chunks(engine.index, rows):
        send(engine.client, chunk)


def _properties(engine: OpenSearchBackend) -> dict[str, Any]:
    mapping = next(iter(engine.client.indices.get_mapping(index=engine.index).values()))["mappings"]
    return dict(mapping["properties"])


async def test_an_index_of_the_previous_release_gets_the_field_when_opened(
    services, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    cfg = services("opensearch").config(tmp_path)
    old = [make_record(f"note {i}", event=f"o{i}", metadata={"topic": "ab"[i % 2]}) for i in range(6)]
    a = LongTermMemory(backend="opensearch", backend_config=cfg, app_name="app")
    b = LongTermMemory(backend="opensearch", backend_config=cfg, app_name="app")
    ea, eb = _engine(a), _engine(b)
    _old_index(ea, old)
    assert EXPIRES_AT not in _properties(ea)
    try:
        # Two processes open it at once; its records never expire, and are read as alive.
        where = living(where_of({"topic": "a"}), NOW)
        counts = await asyncio.gather(ea.count(SCOPE, where=where), eb.count(SCOPE, where=where))
        assert counts == [3, 3]
        assert _properties(ea)[EXPIRES_AT] == {"type": "double"}
        assert {r.id async for r in ea.scan(SCOPE, where=living(None, NOW))} == {r.id for r in old}
        # A record saved now is written with its expiry and read by it, to the second.
        fresh = make_record("note fresh", event="fresh").model_copy(update={"expires_at": NOW + 0.25})
        await ea.upsert([fresh])
        assert fresh.id in {r.id async for r in eb.scan(SCOPE, where=living(None, NOW + 0.125))}
        assert fresh.id not in {r.id async for r in eb.scan(SCOPE, where=living(None, NOW + 0.25))}
        assert await eb.count(SCOPE, where=living(None, NOW + 1)) == len(old)

        # Opened again, a current index is read, not changed.
        def never(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("the mapping was put again")

        c = LongTermMemory(backend="opensearch", backend_config=cfg, app_name="app")
        monkeypatch.setattr(_engine(c).client.indices, "put_mapping", never)
        try:
            assert await _engine(c).count(SCOPE, where=living(None, NOW)) == len(old) + 1
        finally:
            await c.close()
    finally:
        await a.close()
        await b.close()
