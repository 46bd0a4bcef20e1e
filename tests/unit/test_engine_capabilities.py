"""The capability flags decide the core's path: an engine declares them, the core reads them.

A tiny in-memory engine records which primitives the core calls. Declaring ``atomic_save``
False makes a save write the records and then mark the ledger, two primitives; True makes it
one ``_commit``; ``native_hybrid`` sends a search to the engine's own ``_search``; without
``keeps_ledger`` an engine with no side ledger is refused. Each test fails if its flag is
ignored (the path it asserts is not taken)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import pytest
from typing_extensions import Unpack, override

from longterm.config.hybrid import HybridOptions
from longterm.core.aliases import Ids, Records, Vectors
from longterm.core.capabilities import Capabilities, capabilities
from longterm.core.engine import Engine, Query
from longterm.errors import ConfigurationError
from longterm.records import Hit, MemoryRecord, Scope, record_id
from longterm.retrieval.embedders import HashingEmbedder

if TYPE_CHECKING:
    import numpy as np

S = Scope(app_name="a", user_id="u")


def rec(event: str, text: str = "kiwi smoothie") -> MemoryRecord:
    rid = record_id("a", "u", "s", event)
    return MemoryRecord(id=rid, app_name="a", user_id="u", session_id="s", event_id=event, role="user", text=text)


class Tiny(Engine):
    """Records in a dict, the ledger in a set; every primitive the core calls is logged."""

    name: ClassVar[str] = "tiny"

    def __init__(self, **hybrid: Unpack[HybridOptions]) -> None:
        self.calls: list[str] = []
        self.records: dict[str, MemoryRecord] = {}
        self.ledger: set[str] = set()
        self.meta: dict[str, str] = {}
        super().__init__(where="memory", store_id="tiny", **hybrid)

    @override
    def _write(self, records: Records, vectors: Vectors) -> None:
        self.calls.append("write")
        self.records.update((r.id, r) for r in records)

    @override
    def _commit(
        self, records: Records, vectors: Vectors, scope: Scope, session_id: str, event_ids: Ids, new_only: bool = False
    ) -> None:
        self.calls.append("commit")
        self.records.update((r.id, r) for r in records)
        self.ledger.update(event_ids)

    @override
    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        self.calls.append("ledger read")
        return set(self.ledger)

    @override
    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        self.calls.append("mark")
        self.ledger.update(event_ids)

    @override
    def _meta_get(self, key: str) -> str | None:
        return self.meta.get(key)

    @override
    def _meta_set(self, key: str, value: str) -> None:
        self.meta[key] = value

    @override
    def _fulltext(self, scope: Scope, query: Query, k: int) -> list[tuple[MemoryRecord, float]]:
        self.calls.append("fulltext")
        return [(r, 1.0) for r in self.records.values() if set(query.terms) & set(r.text.split())][:k]

    @override
    def _nearest(self, scope: Scope, vector: np.ndarray, k: int) -> list[tuple[MemoryRecord, float]]:
        self.calls.append("nearest")
        return [(r, 0.5) for r in self.records.values()][:k]

    @override
    def _search(self, scope: Scope, query: Query, vector: Vectors, k: int, degraded: str | None) -> list[Hit]:
        self.calls.append("native search")
        return [Hit(record=r, score=1.0) for r in self.records.values()][:k]


class Apart(Tiny):
    atomic_save = False


class Atomic(Tiny):
    atomic_save = True


async def test_an_engine_declaring_atomic_save_false_writes_the_records_then_marks_the_ledger() -> None:
    engine = Apart()
    await engine.save([rec("e1")], S, "s", ["e1", "dropped"])
    assert engine.calls == ["write", "mark"]
    assert set(engine.records) == {record_id("a", "u", "s", "e1")} and engine.ledger == {"e1", "dropped"}
    await engine.close()


async def test_an_engine_declaring_atomic_save_true_saves_in_one_commit() -> None:
    engine = Atomic()
    await engine.save([rec("e1")], S, "s", ["e1", "dropped"])
    assert engine.calls == ["commit"]
    assert set(engine.records) == {record_id("a", "u", "s", "e1")} and engine.ledger == {"e1", "dropped"}
    await engine.close()


async def test_a_new_only_save_apart_reads_the_ledger_first_and_leaves_out_what_it_holds() -> None:
    engine = Apart()
    engine.ledger.add("e1")  # saved (or erased) by another worker since the caller read the ledger
    await engine.save([rec("e1"), rec("e2", "mango")], S, "s", ["e1", "e2"], new_only=True)
    assert engine.calls == ["ledger read", "write", "mark"]
    assert [r.event_id for r in engine.records.values()] == ["e2"]
    await engine.close()


def test_capabilities_are_the_declared_flags_and_a_foreign_backend_declares_none() -> None:
    assert capabilities(Apart()) == Capabilities(keeps_ledger=True)
    assert capabilities(Atomic()).atomic_save

    class Foreign:  # a third party's Backend that is not an Engine
        atomic_save = True

    assert capabilities(Foreign()) == Capabilities(atomic_save=True)
    assert capabilities(object()) == Capabilities()


@pytest.mark.parametrize("native", [False, True])
async def test_native_hybrid_sends_a_search_to_the_engines_own_fusion(native: bool) -> None:
    cls = type("Native" if native else "Fused", (Apart,), {"native_hybrid": native})
    engine = cls(embedder=HashingEmbedder(16))
    await engine.upsert([rec("e1")])
    engine.calls.clear()
    hits = await engine.search(S, "kiwi", 5)
    assert len(hits) == 1
    assert engine.calls == (["native search"] if native else ["fulltext", "nearest"])
    await engine.close()


async def test_an_engine_keeping_no_ledger_of_its_own_needs_a_side_ledger() -> None:
    engine = type("Sideless", (Apart,), {"keeps_ledger": False})()
    with pytest.raises(ConfigurationError, match="keeps no ledger of its own but set no side_ledger"):
        await engine.count(S)
    await engine.close()
