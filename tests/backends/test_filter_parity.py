"""Filter parity: the same store and the same filter pass the same memories on every engine.

Against the real engines (tests/services), each holding the contract's filter corpus: the
filtered listing (every page of ``get_all``) and the filtered count are compared across engines,
and a filtered search where the filter leaves at most ``top_k`` candidates finds them all. The
contract holds each engine to the reference (``core.filters.matches``); this pins that a user
moving a store between backends keeps what a filter means.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory
from longterm.testing.contract.filters import APP, USER, corpus, listed

ENGINES = ["local", "redis", "opensearch", "qdrant-edge", "qdrant-local"]
FILTERS: list[dict[str, Any]] = [
    {"topic": "travel"},
    {"n": 1},
    {"n": {"$in": [1.5, "a", True]}},
    {"tags": {"$nin": ["a", None]}},
    {"n": {"$gte": 0}},
    {"topic": {"$lt": "b"}},
    {"project.phase": {"$exists": True}},
    {"project.n": {"$ne": 1}},
    {"$or": [{"role": "user", "session_id": "s1"}, {"timestamp": {"$gt": 102}}]},
    {"$not": {"$and": [{"author": "alice"}, {"topic": {"$exists": False}}]}},
    {"metadata.project.phase": {"$in": [1, "Travel", False]}},
]


@pytest.fixture(scope="module")
def listings(services, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[list[str], int]]]:
    """Per engine, each filter's (sorted listed ids, count)."""
    out: dict[str, list[tuple[list[str], int]]] = {}
    for engine in ENGINES:
        provider = services(engine)
        tmp: Path = tmp_path_factory.mktemp(engine)
        memory = LongTermMemory(backend=provider.name, backend_config=provider.config(tmp), app_name=APP)
        try:
            memory.upsert_records_sync(corpus())
            out[engine] = [
                (sorted(listed(memory, f)), memory.portal.call(memory.count(app_name=APP, user_id=USER, filters=f)))
                for f in FILTERS
            ]
            hits = memory.search_sync("harbour", user_id=USER, top_k=40, filters={"topic": "travel"})
            out[engine].append((sorted(m.id for m in hits if m.id), len(hits)))
        finally:
            memory.close_sync()
    return out


@pytest.mark.parametrize("engine", ENGINES[1:])
def test_every_engine_passes_what_the_local_store_passes(listings: dict[str, Any], engine: str) -> None:
    for i, (want, got) in enumerate(zip(listings["local"], listings[engine], strict=True)):
        spec = FILTERS[i] if i < len(FILTERS) else "search under {'topic': 'travel'}"
        assert got == want, spec


def test_the_filters_are_not_trivial(listings: dict[str, Any]) -> None:
    counts = [n for _, n in listings["local"]]
    assert all(0 < n < len(corpus()) for n in counts), counts
