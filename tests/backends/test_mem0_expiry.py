"""Expiry on mem0 (OSS, offline: its embedded Qdrant store, as test_mem0.py runs it): a read made at a
moment (``core.where.living``) leaves out what expired by then inside mem0's own query (scan, count,
page by time, search), a record's ``expires_at``/``updated_at`` come back as written, an overwrite
that drops the expiry drops it from the memory's metadata, a store holding no memory that expires
is asked what an unfiltered read asks, and a store that cannot filter still answers a read at a
moment (refusing a filter as before)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest

from longterm import InvalidInputError
from longterm.backends.mem0 import Mem0Backend
from longterm.backends.mem0_filters import EXPIRING, EXPIRY, TAGS, mem0_filters
from longterm.core.where import EXPIRES, Span, Where, living, where_of
from longterm.records import Scope
from longterm.testing import make_record
from tests.backends.drawn import scanned
from tests.backends.embedded import alive_ids, backend_of, mem0_memory
from tests.backends.expiring import APP, NOW, USER, expiring_records

_memory = partial(mem0_memory, app=APP)


def _payloads(backend: Any) -> list[dict[str, Any]]:
    store = backend._mem.vector_store
    points, _ = store.client.scroll(store.collection_name, limit=1_000, with_payload=True)
    return [p.payload for p in points]


async def test_a_read_at_a_moment_returns_exactly_the_alive_that_pass(tmp_path: Path) -> None:
    memory = _memory(tmp_path / "m")
    backend = await backend_of(memory, APP, USER)
    scope = memory.scope(APP, USER)
    records = expiring_records()
    await backend.upsert(records)
    for where in (living(None, NOW), living(where_of({"topic": "travel"}), NOW), living(where_of({"n": 1}), NOW)):
        want = alive_ids(records, where)
        page, cursor = await backend.page_by_time(scope, None, 100, where=where)
        hits = await backend.search(scope, "harbour memory", 20, where=where)
        assert sorted(r.id for r in await scanned(backend, scope, where)) == want, where
        assert await backend.count(scope, where=where) == len(want), where
        assert (sorted(r.id for r in page), cursor) == (want, None), where
        assert sorted(h.record.id for h in hits) == want, where
    assert len(alive_ids(records, living(None, NOW))) == 5
    later = living(None, NOW + 1)  # a moment later: what expired meanwhile is gone at once
    assert sorted(r.id for r in await scanned(backend, scope, later)) == alive_ids(records, later)
    assert await backend.count(scope, where=later) == 4
    assert await backend.count(scope, where=living(None, NOW + 1_000)) == 2
    assert await backend.count(scope, where=living(None, NOW - 1_000)) == len(records)
    assert await backend.count(scope) == len(records)
    written = {r.id: (r.expires_at, r.updated_at) for r in records}  # and the times come back as written
    assert {r.id: (r.expires_at, r.updated_at) for r in await scanned(backend, scope, None)} == written
    page, _ = await backend.page_by_time(scope, None, 100)
    assert {r.id: (r.expires_at, r.updated_at) for r in page} == written
    hits = await backend.search(scope, "harbour memory", 20)
    assert {h.record.id: (h.record.expires_at, h.record.updated_at) for h in hits} == written
    await memory.close()


async def test_an_overwrite_sets_or_drops_the_expiry_with_the_record(tmp_path: Path) -> None:
    memory = _memory(tmp_path / "m")
    backend = await backend_of(memory, APP, USER)
    scope, now = memory.scope(APP, USER), living(None, NOW)
    first = make_record("the harbour at dawn", app=APP, user=USER, expires_at=NOW - 5)
    await backend.upsert([first])
    assert await backend.count(scope, where=now) == 0
    (payload,) = _payloads(backend)
    assert payload[EXPIRY] == NOW - 5 and EXPIRES in payload[TAGS]
    kept = first.model_copy(update={"text": "the harbour at noon", "expires_at": None, "updated_at": NOW})
    await backend.upsert([kept])
    (payload,) = _payloads(backend)
    assert payload[EXPIRY] is None and EXPIRES not in payload[TAGS]  # mem0 merges metadata: null, in no range
    assert [(r.text, r.updated_at) for r in await scanned(backend, scope, now)] == [("the harbour at noon", NOW)]
    assert await backend.count(scope, where=living(None, NOW + 10**6)) == 1
    await backend.upsert([kept.model_copy(update={"expires_at": NOW})])
    assert await backend.count(scope, where=now) == 0
    assert await backend.count(scope, where=living(None, NOW - 1)) == 1
    await memory.close()


async def test_a_store_that_never_held_an_expiring_memory_is_asked_as_if_unfiltered(tmp_path: Path) -> None:
    """A store made before expiry (no ``EXPIRING`` in its meta, no memory with the key) reads every
    memory as alive and asks mem0 what an unfiltered read asks; once one that expires is written,
    the alive condition, and the store keeps knowing it once reopened."""
    memory = _memory(tmp_path / "m")
    backend = await backend_of(memory, APP, USER)
    scope, now = memory.scope(APP, USER), living(None, NOW)
    plain = [make_record(f"the harbour {i}", app=APP, user=USER, event=f"p{i}") for i in range(3)]
    await backend.upsert(plain)
    assert not backend._may_expire() and not backend._side().meta_get(EXPIRING)
    assert all(EXPIRY not in p for p in _payloads(backend))
    assert backend._filters(scope, now) == backend._filters(scope, None)
    travel = where_of({"topic": "travel"})
    assert backend._filters(scope, living(travel, NOW)) == backend._filters(scope, travel)
    assert await backend.count(scope, where=now) == 3
    await backend.upsert([make_record("gone", app=APP, user=USER, event="gone", expires_at=NOW - 1)])
    assert backend._may_expire()
    assert backend._filters(scope, now) != backend._filters(scope, None)
    assert sorted(r.id for r in await scanned(backend, scope, now)) == sorted(r.id for r in plain)
    await memory.close()
    again = _memory(tmp_path / "m")
    backend = await backend_of(again, APP, USER)
    assert backend._may_expire()
    assert await backend.count(scope, where=now) == 3
    await again.close()


def test_alive_is_one_range_and_a_span_of_expiry_is_on_its_key() -> None:
    got = mem0_filters("u", living(None, NOW))
    assert got == {"user_id": "u", "$or": [{"NOT": [{EXPIRY: {"lte": NOW}}]}]}
    span = Where(None, Span(1.0, 2.0, hi_incl=False, field="expires_at"), True)
    assert mem0_filters("u", span) == {"user_id": "u", "$or": [{EXPIRY: {"gte": 1.0, "lt": 2.0}}]}
    assert mem0_filters("u", living(None, NOW), expiring=False) == {"user_id": "u"}


def test_a_store_that_cannot_filter_answers_a_read_at_a_moment_and_refuses_a_filter(tmp_path: Path) -> None:
    """Another vector store: the alive part is checked on what mem0 returned; a filter is refused as before."""
    config = {"path": str(tmp_path / "m"), "config": {"vector_store": {"provider": "faiss", "config": {}}}}
    engine = Mem0Backend.from_config(config, root=tmp_path)
    scope = Scope(app_name=APP, user_id=USER)
    assert engine._filters(scope, living(None, NOW)) == engine._filters(scope, None)
    with pytest.raises(InvalidInputError, match="'faiss' vector store"):
        engine._filters(scope, living(where_of({"topic": "travel"}), NOW))
    records = expiring_records()
    pairs = [({"id": r.id}, r) for r in records]
    assert sorted(r.id for _, r in engine._alive(pairs, living(None, NOW))) == alive_ids(records, living(None, NOW))
    assert engine._alive(pairs, None) == pairs
