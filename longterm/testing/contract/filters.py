"""The contract's filters: applied before the top-k cut, meaning on every engine what the reference means.

The seam: ``Filters``, a mixin of test methods over ``Fixtures``' ``open_memory``, and two
fixtures an engine's test class may override: ``filters_partial`` (True for an engine that
expresses only part of the syntax and refuses the rest by name, as mem0 does) and
``refused_filters`` (the filters such an engine must refuse, each with a word its refusal
names). The reference is ``longterm.core.filters.matches``.

Why 2,000 memories with the five that pass ranked below a thousand that do not: a filter
applied after the engine's cut (the most common complaint about memory libraries' filters)
returns fewer than ``top_k`` there, or none; applied before it, the five come back. Why
hypothesis over one fixed store: every operator, nested paths, lists, ints beside floats,
booleans and missing keys meet, and each drawn filter is one listing, so an engine is held to
the reference on hundreds of cases in seconds.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from ... import InvalidInputError, LongTermMemory
from ...core.filters import MAX_DEPTH, matches, parse_filter
from ...records import MemoryRecord
from .. import make_record
from ..filter_strategies import filters

APP, USER = "filters-app", "filters-user"
#: The records every drawn filter is checked against (drawn once, from the strategies' values).
_VALUES: list[Any] = [None, True, False, 0, 1, 1.0, 1.5, -2.5, 3, "a", "b", "travel", "Travel", "é"]


def corpus(n: int = 40, seed: int = 20261204) -> list[MemoryRecord]:
    """``n`` records of (APP, USER) with metadata as ``filter_strategies.metadata`` draws it."""
    rng = random.Random(seed)

    def value() -> Any:
        return [rng.choice(_VALUES) for _ in range(rng.randint(0, 3))] if rng.random() < 0.25 else rng.choice(_VALUES)

    out = []
    for i in range(n):
        meta: dict[str, Any] = {}
        for key in ("topic", "n", "tags"):
            if rng.random() < 0.7:
                meta[key] = value() if key != "tags" else [rng.choice(_VALUES) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.6:
            meta["project"] = {k: value() for k in ("phase", "n") if rng.random() < 0.7}
        out.append(
            make_record(
                f"memory {i} about the harbour",
                app=APP,
                user=USER,
                session=rng.choice(["s1", "s2"]),
                event=f"e{i}",
                role=rng.choice(["user", "model"]),
                author=rng.choice(["alice", "x", "model"]),
                timestamp=rng.choice([100.0, 101.0, 102.0, 103.0]),
                metadata=meta,
            )
        )
    return out


def listed(memory: LongTermMemory, spec: Any) -> list[str]:
    """The ids ``get_all`` lists under ``spec``, every page."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page = memory.get_all_sync(user_id=USER, limit=100, cursor=cursor, filters=spec)
        ids.extend(m.id for m in page.memories if m.id is not None)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


class Filters:
    """Filters on every engine (module docstring)."""

    @pytest.fixture
    def filters_partial(self) -> bool:
        """True for an engine that refuses part of the syntax by name (``refused_filters``)."""
        return False

    @pytest.fixture
    def refused_filters(self) -> list[tuple[dict[str, Any], str]]:
        """(filter, a word its refusal names) an engine with ``filters_partial`` must refuse."""
        return []

    @pytest.fixture
    def filtered(self, open_memory: Callable[..., LongTermMemory]) -> tuple[LongTermMemory, list[MemoryRecord]]:
        memory, records = open_memory(app_name=APP), corpus()
        memory.upsert_records_sync(records)
        return memory, records

    def test_a_filtered_search_finds_the_five_that_pass_below_a_thousand_that_do_not(
        self, open_memory: Callable[..., LongTermMemory]
    ) -> None:
        memory = open_memory(app_name=APP)
        loud = [
            make_record(
                "lighthouse lighthouse keeper at the lighthouse",
                app=APP,
                user=USER,
                session=f"loud{i % 20}",
                event=f"l{i}",
                metadata={"topic": "work"},
                timestamp=2_000.0 + i,
            )
            for i in range(1_000)
        ]
        quiet = [
            make_record(
                f"unrelated note number {i}",
                app=APP,
                user=USER,
                session=f"quiet{i % 20}",
                event=f"q{i}",
                metadata={"topic": "misc"},
                timestamp=5_000.0 + i,
            )
            for i in range(995)
        ]
        wanted = [
            make_record(
                f"a postcard mentioning a lighthouse and {word} weather",
                app=APP,
                user=USER,
                session="trip",
                event=f"w{i}",
                metadata={"topic": "travel", "trip": {"year": 2024}},
                timestamp=1_000.0 + i,
            )
            for i, word in enumerate(["sunny", "rainy", "windy", "foggy", "stormy"])
        ]
        memory.upsert_records_sync([*loud, *quiet, *wanted])
        want = {r.id for r in wanted}
        unfiltered = memory.search_sync("lighthouse", user_id=USER, top_k=5)
        assert not {m.id for m in unfiltered} & want, "the five must rank below the others unfiltered"
        for spec in ({"topic": "travel"}, {"trip.year": {"$gte": 2024}}, {"timestamp": {"$lt": 1_500}}):
            got = memory.search_sync("lighthouse", user_id=USER, top_k=5, filters=spec)
            assert {m.id for m in got} == want, spec

    def test_a_filtered_search_of_several_words_finds_every_memory_holding_them(
        self, open_memory: Callable[..., LongTermMemory]
    ) -> None:
        """RediSearch 2.10 returned one of six: a union of (scope, word) clauses ANDed with the
        filter's clause (a double negation, so a tag adds nothing to BM25)."""
        memory = open_memory(app_name=APP)
        for i in range(6):
            memory.add_sync(f"flight booking note {i}", user_id=USER, metadata={"g": "x"})
        for query in ("flight booking", "note"):
            got = memory.search_sync(query, user_id=USER, top_k=10, filters={"g": "x"})
            assert len(got) == 6, query

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(spec=filters())
    def test_a_filter_lists_and_counts_what_the_reference_passes(
        self, filtered: tuple[LongTermMemory, list[MemoryRecord]], filters_partial: bool, spec: dict[str, Any]
    ) -> None:
        memory, records = filtered
        want = sorted(r.id for r in records if matches(parse_filter(spec), r))
        try:
            got = listed(memory, spec)
        except InvalidInputError:
            if filters_partial:
                return  # refused by name before anything was read (``test_..._refused_by_name``)
            raise
        assert sorted(got) == want, spec
        assert len(got) == len(set(got)), "each memory listed once"
        count = memory.portal.call(memory.count(app_name=APP, user_id=USER, filters=spec))
        assert count == len(want), spec

    def test_a_filter_nested_as_deep_as_allowed_lists_and_counts_what_the_reference_passes(
        self, filtered: tuple[LongTermMemory, list[MemoryRecord]]
    ) -> None:
        """SQLite's parser overflowed at 16 levels of ``$and`` and ``$or`` in the local count."""
        memory, records = filtered
        spec: dict[str, Any] = {"session_id": "s1"}
        for i in range(MAX_DEPTH - 1):
            spec = {"$or": [spec, {"n": 100 + i}]} if i % 2 else {"$and": [spec, {"n": {"$ne": 100 + i}}]}
        want = sorted(r.id for r in records if matches(parse_filter(spec), r))
        assert want and sorted(listed(memory, spec)) == want
        assert memory.portal.call(memory.count(app_name=APP, user_id=USER, filters=spec)) == len(want)

    def test_a_filter_narrows_a_search_as_it_narrows_a_listing(
        self, filtered: tuple[LongTermMemory, list[MemoryRecord]]
    ) -> None:
        memory, records = filtered
        for spec in ({"session_id": "s1", "role": "user"}, {"project.phase": {"$exists": True}}):
            want = {r.id for r in records if matches(parse_filter(spec), r)}
            hits = memory.search_sync("harbour memory", user_id=USER, top_k=40, filters=spec)
            assert {m.id for m in hits} == want, spec

    @pytest.mark.parametrize(
        ("spec", "named"),
        [
            ({"topic": {"$regex": "tr"}}, "$regex"),
            ({"n": {"$gt": [1]}}, "$gt"),
            ({"$or": []}, "$or"),
            ({"timestamp": "yesterday"}, "timestamp"),
        ],
    )
    def test_a_malformed_filter_is_refused_by_name(
        self, filtered: tuple[LongTermMemory, list[MemoryRecord]], spec: dict[str, Any], named: str
    ) -> None:
        memory, _ = filtered
        with pytest.raises(InvalidInputError, match="^filters") as refused:
            memory.search_sync("harbour", user_id=USER, filters=spec)
        assert named in str(refused.value)
        with pytest.raises(InvalidInputError, match="^filters"):
            memory.get_all_sync(user_id=USER, filters=spec)

    def test_what_an_engine_cannot_express_is_refused_by_name(
        self,
        filtered: tuple[LongTermMemory, list[MemoryRecord]],
        filters_partial: bool,
        refused_filters: list[tuple[dict[str, Any], str]],
    ) -> None:
        memory, _ = filtered
        if not filters_partial:
            assert refused_filters == [], "an engine that refuses nothing lists no refusals"
            return
        assert refused_filters, "an engine that refuses part of the syntax lists what it refuses"
        for spec, named in refused_filters:
            with pytest.raises(InvalidInputError) as refused:
                memory.search_sync("harbour", user_id=USER, filters=spec)
            assert named in str(refused.value), (spec, str(refused.value))
