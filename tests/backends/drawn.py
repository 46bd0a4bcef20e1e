"""What the token engines' filter tests share (``test_redis_filters.py``, ``test_opensearch_filters.py``):
the crowd the five that pass hide under (``crowd``), the records hypothesis's filters are asked
of (``drawn_records``: drawn metadata, and the shapes a draw may miss, ``EDGES``), and one store of them
kept for every drawn filter (``Store``).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, cast

from longterm import LongTermMemory, MemoryRecord, Scope
from longterm.core.filters import matches
from longterm.core.where import where_of
from longterm.retrieval.embedders import HashingEmbedder
from longterm.testing import make_record

SCOPE = Scope(app_name="app", user_id="u1")


def crowd() -> list[MemoryRecord]:
    """1,995 records "apple apple apple" (topic common), then 5 that say apple once among other words
    (topic rare, older, an ``n`` of 5 to 9, each in a session of its own): they rank last for "apple"
    by BM25 and by vector."""
    loud = [
        make_record("apple apple apple", event=f"c{i}", metadata={"topic": "common"}, timestamp=1_700_000_000.0 + i)
        for i in range(1995)
    ]
    quiet = [
        make_record(
            f"an apple among walnuts pears plums figs and quinces number {i}",
            session=f"q{i}",
            event=f"r{i}",
            metadata={"topic": "rare", "n": 5 + i},
            timestamp=1_600_000_000.0 + i,
        )
        for i in range(5)
    ]
    return loud + quiet


SCALARS: list[Any] = [None, True, False, -3, -1, 0, 1, 2, 3, 0.0, 1.0, 1.5, -2.5, "a", "b", "travel", "Travel", "é"]


def metadata(rng: random.Random) -> dict[str, Any]:
    def value() -> Any:
        if rng.random() < 0.3:
            return [rng.choice(SCALARS) for _ in range(rng.randint(0, 3))]
        return rng.choice(SCALARS)

    meta: dict[str, Any] = {}
    for key in ("topic", "n"):
        if rng.random() < 0.7:
            meta[key] = value()
    if rng.random() < 0.6:
        meta["tags"] = [rng.choice(SCALARS) for _ in range(rng.randint(0, 3))]
    if rng.random() < 0.5:
        project: dict[str, Any] = {}
        if rng.random() < 0.7:
            project["phase"] = rng.choice(SCALARS)
        if rng.random() < 0.6:
            project["n"] = rng.randint(-3, 3)
        meta["project"] = project
    return meta


#: Shapes a random draw may miss: a path through a non-object, an object where a scalar is read,
#: 1 beside 1.0, an empty list and object, nothing at all.
EDGES: list[dict[str, Any]] = [
    {},
    {"project": "flat"},
    {"topic": {"nested": "travel"}},
    {"n": 1},
    {"n": 1.0},
    {"n": True},
    {"tags": [], "project": {}},
    {"topic": None, "n": [1, "1", None]},
]


def drawn_records(user: str) -> list[MemoryRecord]:
    rng = random.Random(44)
    out = []
    for i in range(40):
        out.append(
            make_record(
                f"note {i}",
                user=user,
                session=rng.choice(["s1", "s2", "x"]),
                event=f"e{i}",
                role=rng.choice(["user", "model", ""]),
                author=rng.choice(["alice", "x", ""]),
                timestamp=rng.choice([100.0, 101.0, 101.5, 102.0, 103.0, 104.0]),
                metadata=EDGES[i] if i < len(EDGES) else metadata(rng),
            )
        )
    return out


class Store:
    """One store of ``drawn_records`` (and the same for another user), kept for every drawn filter."""

    def __init__(self, backend: str, cfg: dict, *, vectors: bool = False) -> None:
        self.loop = asyncio.new_event_loop()
        embedder = HashingEmbedder(16) if vectors else None
        self.memory = LongTermMemory(backend=backend, backend_config=cfg, embedder=embedder, app_name="app")
        self.engine: Any = self.memory.backend_instance
        self.records = drawn_records("u1")
        self.run(self.engine.upsert([*self.records, *drawn_records("u2")]))

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def scan(self, where: Any) -> list[str]:
        async def read() -> list[str]:
            return [r.id async for r in self.engine.scan(SCOPE, batch_size=7, where=where)]

        return cast(list[str], self.run(read()))

    def pages(self, where: Any) -> list[str]:
        """The engine's own pages (no second look by the core)."""
        ids: list[str] = []
        cursor = None
        while True:
            records, cursor = self.engine._page(SCOPE, cursor, 7, where=where)
            ids += [r.id for r in records]
            if cursor is None:
                return ids

    def close(self) -> None:
        self.run(self.memory.close())
        self.loop.close()


def agrees_with_reference(memory: LongTermMemory, backend: Any, records: list[MemoryRecord], spec: Any) -> None:
    """``spec`` drawn over ``records`` (all of one user): the engine's scan, count and search pass
    exactly what ``core.filters.matches`` passes."""
    scope, where = memory.scope(records[0].app_name, records[0].user_id), where_of(spec)
    assert where is not None
    want = sorted(r.id for r in records if matches(where.filter, r))

    async def scanned() -> list[str]:
        return [r.id async for r in backend.scan(scope, where=where)]

    assert sorted(memory.portal.call(scanned())) == want, spec
    assert memory.portal.call(backend.count(scope, where=where)) == len(want), spec
    hits = memory.portal.call(backend.search(scope, "memory about the harbour", 40, where=where))
    assert sorted(h.record.id for h in hits) == want, spec


async def scanned(backend: Any, scope: Any, where: Any) -> list[MemoryRecord]:
    """Every record ``backend.scan`` gives under ``where``, read in small batches (pages meet)."""
    return [r async for r in backend.scan(scope, batch_size=7, where=where)]


async def pages(backend: Any, scope: Any, where: Any, newest_first: bool) -> list[MemoryRecord]:
    """Every record ``backend.page_by_time`` gives under ``where``, page after page of 6."""
    out: list[MemoryRecord] = []
    cursor = None
    while True:
        page, cursor = await backend.page_by_time(scope, cursor, 6, newest_first=newest_first, where=where)
        out.extend(page)
        if cursor is None:
            return out
