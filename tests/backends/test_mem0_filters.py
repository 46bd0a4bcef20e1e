"""Filters on mem0 (OSS, offline: its embedded Qdrant store, as test_mem0.py runs it): mem0's own
``filters=`` applied inside its query before its cut, held to the reference
(``core.filters.matches``) on drawn filters; memories written before the filter keys get them at
open; a store that cannot filter (platform mode, another vector store) refuses by name before
anything is read. The five that pass found below a thousand that do not: the contract's ``Filters``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from longterm import InvalidInputError, LongTermMemory
from longterm.backends.mem0 import Mem0Backend
from longterm.backends.mem0_filters import MARKER, TAGS, TIME
from longterm.core.engine import Query
from longterm.core.filters import matches
from longterm.core.where import where_of
from longterm.records import MemoryRecord, Scope
from longterm.testing.contract.filters import APP, USER, corpus
from longterm.testing.filter_strategies import filters
from tests.backends.drawn import agrees_with_reference, scanned
from tests.backends.embedded import mem0_memory

_memory = partial(mem0_memory, app=APP)


@pytest.fixture(scope="module")
def drawn_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LongTermMemory, Any, list[MemoryRecord]]]:
    """``corpus()`` (40 records: nested metadata, lists, ints and floats, booleans, None, missing
    keys) in one mem0 store, written once; every drawn filter is asked of it."""
    memory = _memory(tmp_path_factory.mktemp("drawn") / "m")
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


def _points(backend: Any) -> dict[str, tuple[dict[str, Any], Any]]:
    """Every point of the mem0 collection: (payload, vector) by id."""
    store = backend._mem.vector_store
    points, _ = store.client.scroll(store.collection_name, limit=1_000, with_payload=True, with_vectors=True)
    return {str(p.id): (p.payload, p.vector) for p in points}


async def test_memories_written_without_filter_keys_get_them_once_at_open(tmp_path: Path) -> None:
    memory = _memory(tmp_path / "m")
    backend = (await memory.located(APP, USER)).backend
    records = corpus()
    await backend.upsert(records)
    before = _points(backend)
    store = backend._mem.vector_store
    store.client.delete_payload(store.collection_name, keys=[TAGS, TIME], points=list(before))
    backend._meta_set(MARKER, "")  # as the previous release left it
    assert all(TAGS not in payload for payload, _ in _points(backend).values())
    await memory.close()

    again = _memory(tmp_path / "m")
    backend = (await again.located(APP, USER)).backend
    scope = again.scope(APP, USER)
    assert _points(backend) == before  # the keys are back; vectors (no new embedding) and words as they were
    for spec in ({"topic": "travel"}, {"project.n": {"$exists": True}}, {"timestamp": {"$gte": 102}}):
        where = where_of(spec)
        want = sorted(r.id for r in records if matches(where.filter, r))
        assert sorted(r.id for r in await scanned(backend, scope, where)) == want, spec
        assert await backend.count(scope, where=where) == len(want), spec
    await again.close()


class _Platform(BaseHTTPRequestHandler):
    seen: list[str] = []

    def _answer(self) -> None:
        type(self).seen.append(self.path)
        body = {"status": "ok", "user_email": "t@example.com", "org_id": "o", "project_id": "p", "results": []}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        return None


async def test_platform_mode_refuses_a_filter_by_name_before_anything_is_read() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Platform)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = {"host": f"http://127.0.0.1:{server.server_address[1]}", "api_key": "key"}
    memory = LongTermMemory(backend="mem0", backend_config=config, app_name=APP)
    try:
        backend = (await memory.located(APP, USER)).backend
        scope, where = memory.scope(APP, USER), where_of({"topic": "travel"})
        _Platform.seen = []
        with pytest.raises(InvalidInputError, match="platform mode") as refused:
            await backend.search(scope, "harbour", 5, where=where)
        assert "Qdrant vector store" in str(refused.value)
        with pytest.raises(InvalidInputError, match="platform mode"):
            await backend.count(scope, where=where)
        with pytest.raises(InvalidInputError, match="platform mode"):
            await scanned(backend, scope, where)
        assert not [p for p in _Platform.seen if "memories" in p], "nothing is read"
    finally:
        await memory.close()
        server.shutdown()


def test_another_vector_store_refuses_a_filter_by_name_before_anything_is_read(tmp_path: Path) -> None:
    """mem0's other stores spell filters their own way: refused at the primitives, which touch mem0
    (never built here) only after the refusal."""
    config = {"path": str(tmp_path / "m"), "config": {"vector_store": {"provider": "faiss", "config": {}}}}
    engine = Mem0Backend.from_config(config, root=tmp_path)
    scope, where = Scope(app_name=APP, user_id=USER), where_of({"topic": "travel"})
    for ask in (
        lambda: engine._fulltext(scope, Query("harbour", ["harbour"]), 5, where=where),
        lambda: engine._count(scope, where=where),
        lambda: engine._page(scope, None, 10, where=where),
    ):
        with pytest.raises(InvalidInputError, match="'faiss' vector store"):
            ask()
    assert list(engine._filters(scope, None) or {}) == ["user_id"]  # without a filter: as before
