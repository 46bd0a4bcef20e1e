"""Expiry on both Qdrant engines (qdrant-edge, and qdrant-client's local mode): a read made at a
moment (``core.where.living``) leaves out what expired by then inside Qdrant's query (scan, count,
page by time, search on each fusion path), a record's ``expires_at``/``updated_at`` come back as
written, an overwrite that drops the expiry drops it from the point, a store holding no record that
expires is read as if unfiltered, and a store made before expiry gets its index at open."""

from __future__ import annotations

import tarfile
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory
from longterm.backends.qdrant.tags import EXPIRY, condition
from longterm.core.where import EXPIRES, Where, living, where_of
from longterm.records import MemoryRecord
from longterm.testing import make_record
from tests.backends.drawn import scanned
from tests.backends.embedded import alive_ids, backend_of, qdrant_memory
from tests.backends.expiring import APP, NOW, USER, expiring_records

_memory = partial(qdrant_memory, app=APP)

OLD_STORES = Path(__file__).resolve().parents[1] / "data" / "stores_71d0724"
#: Each fusion path on the embedded engine, and qdrant-client's local mode (full text, its own RRF).
PATHS = [("edge", "text"), ("edge", "convex"), ("edge", "rrf"), ("local", "text"), ("local", "rrf")]


async def _reads(backend: Any, scope: Any, where: Where) -> dict[str, list[str]]:
    """What each read returns for ``where``: scan, count (as a list's length), page by time, search."""
    pages: list[str] = []
    cursor = None
    while True:
        page, cursor = await backend.page_by_time(scope, cursor, 3, where=where)
        pages += [r.id for r in page]
        if cursor is None:
            break
    hits = await backend.search(scope, "harbour memory", 20, where=where)
    return {
        "scan": sorted(r.id for r in await scanned(backend, scope, where)),
        "count": ["x"] * await backend.count(scope, where=where),
        "page": sorted(pages),
        "search": sorted(h.record.id for h in hits),
    }


@pytest.mark.parametrize(("engine", "mode"), PATHS)
async def test_a_read_at_a_moment_returns_exactly_the_alive_that_pass(tmp_path: Path, engine: str, mode: str) -> None:
    memory = _memory(tmp_path / "q", engine, mode)
    backend = await backend_of(memory, APP, USER)
    scope = memory.scope(APP, USER)
    records = expiring_records()
    await backend.upsert(records)
    for where in (living(None, NOW), living(where_of({"topic": "travel"}), NOW), living(where_of({"n": 1}), NOW)):
        want = alive_ids(records, where)
        got = await _reads(backend, scope, where)
        assert got == {"scan": want, "count": ["x"] * len(want), "page": want, "search": want}, where
    assert len(alive_ids(records, living(None, NOW))) == 5
    assert len(alive_ids(records, living(where_of({"topic": "travel"}), NOW))) == 2
    # a moment later: what expired meanwhile is gone at once, nothing written
    later = living(None, NOW + 1)
    assert sorted(r.id for r in await scanned(backend, scope, later)) == alive_ids(records, later)
    assert await backend.count(scope, where=later) == 4
    assert await backend.count(scope, where=living(None, NOW + 1_000)) == 2
    assert await backend.count(scope, where=living(None, NOW - 1_000)) == len(records)
    assert await backend.count(scope) == len(records)  # a read at no moment: everything
    await memory.close()


@pytest.mark.parametrize("engine", ["edge", "local"])
async def test_expiry_and_correction_times_come_back_from_every_read(tmp_path: Path, engine: str) -> None:
    memory = _memory(tmp_path / "q", engine, "rrf")
    backend = await backend_of(memory, APP, USER)
    scope = memory.scope(APP, USER)
    records = expiring_records()
    await backend.upsert(records)
    written = {r.id: (r.expires_at, r.updated_at) for r in records}

    def times(found: list[MemoryRecord]) -> dict[str, tuple[float | None, float | None]]:
        return {r.id: (r.expires_at, r.updated_at) for r in found}

    assert times(await scanned(backend, scope, None)) == written
    page, _ = await backend.page_by_time(scope, None, 100)
    assert times(page) == written
    hits = await backend.search(scope, "harbour memory", 20)
    assert times([h.record for h in hits]) == written
    assert {r.id: r for r in await scanned(backend, scope, None)} == {r.id: r for r in records}  # the whole record
    await memory.close()
    again = _memory(tmp_path / "q", engine, "rrf")  # and from the files, reopened
    backend = await backend_of(again, APP, USER)
    assert times(await scanned(backend, again.scope(APP, USER), None)) == written
    await again.close()


def _payloads(backend: Any) -> dict[str, dict[str, Any]]:
    if hasattr(backend, "_shard"):
        points, _ = backend._shard.scroll(backend._e.ScrollRequest(limit=1_000, with_payload=True))
    else:
        points, _ = backend._client.scroll(backend.collection, limit=1_000, with_payload=True)
    return {str(p.id): p.payload for p in points}


@pytest.mark.parametrize("engine", ["edge", "local"])
async def test_an_overwrite_sets_or_drops_the_expiry_with_the_record(tmp_path: Path, engine: str) -> None:
    memory = _memory(tmp_path / "q", engine)
    backend = await backend_of(memory, APP, USER)
    scope, now = memory.scope(APP, USER), living(None, NOW)
    first = make_record("the harbour at dawn", app=APP, user=USER, expires_at=NOW - 5)
    await backend.upsert([first])
    assert await backend.count(scope, where=now) == 0
    (payload,) = _payloads(backend).values()
    assert payload[EXPIRY] == NOW - 5 and EXPIRES in payload["ftags"]
    kept = first.model_copy(update={"text": "the harbour at noon", "expires_at": None, "updated_at": NOW})
    await backend.upsert([kept])
    (payload,) = _payloads(backend).values()
    assert EXPIRY not in payload and EXPIRES not in payload["ftags"]  # as a record never expiring is stored
    assert [r.text for r in await scanned(backend, scope, now)] == ["the harbour at noon"]
    hits = await backend.search(scope, "dawn", 5, where=now)
    assert hits == []  # the old words are no longer the record's
    assert [h.record.updated_at for h in await backend.search(scope, "noon", 5, where=now)] == [NOW]
    await backend.upsert([kept.model_copy(update={"expires_at": NOW})])
    assert await backend.count(scope, where=now) == 0
    assert await backend.count(scope, where=living(None, NOW - 1)) == 1
    await memory.close()


@pytest.mark.parametrize("engine", ["edge", "local"])
async def test_a_store_that_never_held_an_expiring_record_is_read_as_if_unfiltered(tmp_path: Path, engine: str) -> None:
    """Until a record that expires is written, a read at a moment sends the scope's filter alone;
    after, the alive condition; the store keeps knowing it once reopened."""
    memory = _memory(tmp_path / "q", engine)
    backend = await backend_of(memory, APP, USER)
    scope, now = memory.scope(APP, USER), living(None, NOW)
    plain = make_record("the harbour", app=APP, user=USER, event="plain")
    await backend.upsert([plain])

    def sent(where: Where | None) -> str:
        return repr(backend._scoped(scope, where))  # qdrant-edge's models compare by identity

    assert not backend._may_expire()
    assert sent(now) == sent(None)
    travel = living(where_of({"topic": "travel"}), NOW)
    assert sent(travel) == sent(where_of({"topic": "travel"}))
    await backend.upsert([make_record("gone", app=APP, user=USER, event="gone", expires_at=NOW - 1)])
    assert backend._may_expire()
    assert sent(now) != sent(None)
    assert [r.id for r in await scanned(backend, scope, now)] == [plain.id]
    await memory.close()
    again = _memory(tmp_path / "q", engine)
    backend = await backend_of(again, APP, USER)
    assert backend._may_expire()
    assert [r.id for r in await scanned(backend, again.scope(APP, USER), now)] == [plain.id]
    await again.close()


def test_alive_is_one_range_and_a_span_of_expiry_is_a_range_on_its_key() -> None:
    """``alive(now)``: "no expiry at or before now" (a point without the key passes); any other
    span of ``expires_at`` is a range on the payload's key (a point without it is in none)."""
    from qdrant_client import models as m

    (alive,) = condition(m, living(None, NOW).native).must_not
    assert alive == m.FieldCondition(key=EXPIRY, range=m.Range(lte=NOW))
    from longterm.core.where import Span

    span = condition(m, Span(1.0, 2.0, hi_incl=False, field="expires_at"))
    assert span == m.FieldCondition(key=EXPIRY, range=m.Range(gte=1.0, lt=2.0))


async def test_the_previous_releases_edge_store_gets_the_expiry_index_and_its_records_live(tmp_path: Path) -> None:
    """A store of 71d0724 (tests/data/stores_71d0724) has no expiry index: it gets one at open, once,
    and a read at any moment returns all its records (none of them expires)."""
    with tarfile.open(OLD_STORES / "qdrant-edge.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    config = {"path": str(tmp_path / "qdrant"), "engine": "edge"}
    memory = LongTermMemory(backend="qdrant", backend_config=config, app_name="travel")
    backend = await backend_of(memory, "travel", "alice")
    scope = memory.scope("travel", "alice")
    assert EXPIRY in backend._shard.info().payload_schema
    everything = await backend.count(scope)
    assert everything > 0
    assert await backend.count(scope, where=living(None, NOW)) == everything
    hits = await backend.search(scope, "passport", 5, where=living(None, 4_000_000_000.0))
    assert [h.record.text for h in hits] == ["My passport expires in August 2027"]
    await memory.close()
    again = LongTermMemory(backend="qdrant", backend_config=config, app_name="travel")  # a second open: as it is
    backend = await backend_of(again, "travel", "alice")
    assert EXPIRY in backend._shard.info().payload_schema
    assert await backend.count(scope, where=living(None, NOW)) == everything
    await again.close()


async def test_a_local_mode_store_made_before_expiry_reads_its_records_asalive_ids(tmp_path: Path) -> None:
    """qdrant-client's local mode (no indexes): points without the expiry key pass every read at a moment."""
    memory = _memory(tmp_path / "q", "local")
    backend = await backend_of(memory, APP, USER)
    scope = memory.scope(APP, USER)
    records = [make_record(f"the harbour {i}", app=APP, user=USER, event=f"e{i}") for i in range(5)]
    await backend.upsert(records)
    assert all(EXPIRY not in p for p in _payloads(backend).values())
    await backend.upsert([make_record("gone", app=APP, user=USER, event="gone", expires_at=NOW - 1)])
    assert await backend.count(scope, where=living(None, NOW)) == 5
    assert len(await backend.search(scope, "harbour", 10, where=living(None, NOW))) == 5
    await memory.close()
