"""LangGraph's own store tests, their logic run against ``LongTermStore`` on the local backend.

Attribution: the test logic below is ported from LangGraph (https://github.com/langchain-ai/langgraph,
MIT License, Copyright (c) 2024 LangChain, Inc.): ``libs/checkpoint/tests/test_store.py``
(list_namespaces, namespace validation, vector search with ``CharacterEmbeddings``),
``libs/checkpoint-sqlite/tests/test_store.py`` (batch order, batch get/put/search/list, basic
ops, search, its ``CharacterEmbeddings``) and ``libs/checkpoint-sqlite/tests/test_ttl.py``
(TTL), adapted to build a ``LongTermStore`` over a ``LongTermMemory`` in a tmp directory. Time
is moved with the memory's clock instead of sleeping.

Left out, with the reason: ``AsyncBatchedBaseStore``'s batching and deduplication mocks
(``test_async_batch_store``, ``test_async_batch_store_deduplication``: LangGraph's own batching
class, not a store); the ``MockAsyncBatchedStore`` half of ``test_cannot_put_empty_namespace``
and the put/delete/put race of ``test_async_batched_vector_search_concurrent`` (the batching
mock's deduplication of concurrent writes to one key); the sqlite store's SQL tables, query
plans, migrations and glob helpers; its sweeper thread (``start_ttl_sweeper``; ``sweep_ttl`` is
tested); ``omit_expired=False`` (longterm never returns an expired memory); the
``get_text_at_path`` helper tests (LangGraph's function, used as it is).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from longterm import LongTermMemory
from longterm.integrations.langgraph import LongTermStore


class CharacterEmbeddings(Embeddings):
    """Character-frequency embeddings by random projections (LangGraph's sqlite store tests')."""

    def __init__(self, dims: int = 50, seed: int = 42) -> None:
        self._rng = random.Random(seed)
        self.dims = dims
        self._proj: dict[str, list[float]] = defaultdict(
            lambda: [self._rng.gauss(0, 1 / math.sqrt(self.dims)) for _ in range(self.dims)]
        )

    def _one(self, text: str) -> list[float]:
        counts = Counter(text)
        total = sum(counts.values())
        if total == 0:
            return [0.0] * self.dims
        out = [0.0] * self.dims
        for ch, n in counts.items():
            for i, p in enumerate(self._proj[ch]):
                out[i] += n / total * p
        norm = math.sqrt(sum(x * x for x in out))
        return [x / norm for x in out] if norm > 0 else out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["local", "redis"])
def memory(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[LongTermMemory]:
    """The store's memory on the embedded default and on Redis (the real engine the suite starts)."""
    if request.param == "local":
        config: dict[str, Any] = {"path": str(tmp_path / "m.db")}
    else:
        config = request.getfixturevalue("services")("redis").config(tmp_path)
    m = LongTermMemory(app_name="lg", backend=request.param, backend_config=config, clock=clock)
    yield m
    m.close_sync()


@pytest.fixture
def store(memory: LongTermMemory) -> LongTermStore:
    return LongTermStore(memory)


@pytest.fixture
def vstore(memory: LongTermMemory) -> LongTermStore:
    return LongTermStore(memory, index={"dims": 50, "embed": CharacterEmbeddings(dims=50)})


# -- list_namespaces (libs/checkpoint/tests/test_store.py) -----------------------------------


def test_list_namespaces_basic(store: LongTermStore) -> None:
    namespaces = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})

    ab = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]
    assert sorted(store.list_namespaces(prefix=("a", "b"))) == ab
    assert sorted(store.list_namespaces(suffix=("f",))) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert sorted(store.list_namespaces(prefix=("a",), suffix=("f",))) == [("a", "b", "f"), ("a", "c", "f")]
    assert sorted(store.list_namespaces(prefix=("a", "b"), max_depth=3)) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert sorted(store.list_namespaces(prefix=("a", "*", "f"))) == [("a", "b", "f"), ("a", "c", "f")]
    assert sorted(store.list_namespaces(suffix=("*", "f"))) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]


def test_list_namespaces_with_wildcards(store: LongTermStore) -> None:
    namespaces = [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
        ("admin", "users", "789"),
        ("guests", "123"),
        ("guests", "456", "preferences"),
    ]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert sorted(store.list_namespaces(prefix=("users", "*"))) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert store.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    store.put(namespace=("admin", "users", "settings", "789"), key="foo", value={"data": "some_val"})
    assert store.list_namespaces(prefix=("*", "users"), suffix=("settings", "*")) == [
        ("admin", "users", "settings", "789")
    ]


async def test_list_namespaces_pagination_async(store: LongTermStore) -> None:
    for i in range(20):
        await store.aput(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": f"value_{i:02d}"})
    for offset in (0, 5, 15):
        got = await store.alist_namespaces(prefix=("namespace",), limit=5, offset=offset)
        assert got == [("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]


def test_list_namespaces_max_depth_no_conditions_empty(store: LongTermStore) -> None:
    assert store.list_namespaces() == []
    namespaces = [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"), ("h", "i", "j", "k")]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert sorted(store.list_namespaces(max_depth=2)) == [("a", "b"), ("a", "g"), ("h", "i")]
    assert sorted(store.list_namespaces()) == sorted(namespaces)


async def test_cannot_put_empty_namespace(store: LongTermStore) -> None:
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            await store.aput(bad, "foo", doc)

    ns = ("foo", "langgraph", "foo")
    await store.aput(ns, "bar", doc)
    assert (await store.aget(ns, "bar")).value == doc  # type: ignore[union-attr]
    assert (await store.asearch(ns))[0].value == doc
    await store.adelete(ns, "bar")
    assert await store.aget(ns, "bar") is None
    store.put(ns, "bar", doc)  # a put after a delete brings the key back
    assert store.get(ns, "bar").value == doc  # type: ignore[union-attr]
    assert store.search(ns)[0].value == doc
    store.delete(ns, "bar")
    assert store.get(ns, "bar") is None

    # past the public put api
    await store.abatch([PutOp(("langgraph", "foo"), "bar", doc)])
    assert (await store.aget(("langgraph", "foo"), "bar")).value == doc  # type: ignore[union-attr]
    assert (await store.asearch(("langgraph", "foo")))[0].value == doc
    await store.adelete(("langgraph", "foo"), "bar")
    assert await store.aget(("langgraph", "foo"), "bar") is None
    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])
    assert store.get(("langgraph", "foo"), "bar").value == doc  # type: ignore[union-attr]
    store.delete(("langgraph", "foo"), "bar")
    assert store.get(("langgraph", "foo"), "bar") is None


# -- batches, basic ops, search (libs/checkpoint-sqlite/tests/test_store.py) ----------------------


def test_batch_order(store: LongTermStore) -> None:
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    results = store.batch(
        [
            GetOp(namespace=("test", "foo"), key="key1"),
            PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
            SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            GetOp(namespace=("test",), key="key3"),
        ]
    )
    assert len(results) == 5
    assert isinstance(results[0], Item)
    assert results[0].value == {"data": "value1"} and results[0].key == "key1"
    assert results[0].namespace == ("test", "foo")
    assert results[1] is None
    assert [i.key for i in results[2]] == ["key1"] and results[2][0].value == {"data": "value1"}  # type: ignore[union-attr]
    assert ("test", "foo") in results[3] and ("test", "bar") in results[3]  # type: ignore[operator]
    assert results[4] is None

    reordered = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
            GetOp(namespace=("test", "bar"), key="key2"),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
            PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
            GetOp(namespace=("test", "foo"), key="key1"),
        ]
    )
    assert len(reordered[0]) >= 2  # type: ignore[arg-type]
    assert reordered[1].value == {"data": "value2"} and reordered[1].namespace == ("test", "bar")  # type: ignore[union-attr]
    assert len(reordered[2]) > 0  # type: ignore[arg-type]
    assert reordered[3] is None
    assert reordered[4].value == {"data": "value1"}  # type: ignore[union-attr]
    assert store.get(("test",), "key3").value == {"data": "value3"}  # type: ignore[union-attr]


def test_batch_get_put_search_list_ops(store: LongTermStore) -> None:
    assert store.batch(
        [
            PutOp(namespace=("test",), key="key1", value={"data": "value1"}),
            PutOp(namespace=("test",), key="key2", value={"data": "value2"}),
            PutOp(namespace=("test",), key="key3", value=None),
        ]
    ) == [None, None, None]
    got = store.batch([GetOp(("test",), "key1"), GetOp(("test",), "key2"), GetOp(("test",), "key3")])
    assert [g.key if g else None for g in got] == ["key1", "key2", None]  # type: ignore[union-attr]

    for ns, key, value in [
        (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
        (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
        (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]:
        store.put(ns, key, value)
    found = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter={"tag": "a"}, limit=10, offset=0),
            SearchOp(namespace_prefix=("test",), filter=None, limit=2, offset=0),
            SearchOp(namespace_prefix=("test", "foo"), filter=None, limit=10, offset=0),
        ]
    )
    assert len(found[0]) == 2 and all(i.value["tag"] == "a" for i in found[0])  # type: ignore[union-attr]
    assert len(found[1]) == 2  # type: ignore[arg-type]
    assert [i.namespace for i in found[2]] == [("test", "foo")]  # type: ignore[union-attr]

    listed = store.batch(
        [
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=1, limit=10, offset=0),
            ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("foo",)),), limit=10, offset=0),
        ]
    )
    assert sorted(listed[0]) == [("test",), ("test", "bar"), ("test", "baz"), ("test", "foo")]  # type: ignore[arg-type]
    assert listed[1] == [("test",)]
    assert listed[2] == [("test", "foo")]


async def test_basic_store_ops_sync_and_async(store: LongTermStore, clock: Clock) -> None:
    namespace, key = ("test", "documents"), "doc1"
    value = {"title": "Test Document", "content": "Hello, World!"}
    await store.aput(namespace, key, value)
    item = await store.aget(namespace, key)
    assert item and item.namespace == namespace and item.key == key and item.value == value
    clock.advance(5)
    updated = {"title": "Updated Document", "content": "Hello, Updated!"}
    store.put(namespace, key, updated)
    again = store.get(namespace, key)
    assert again and again.value == updated
    assert again.created_at == item.created_at and again.updated_at > item.updated_at
    assert store.get(("test", "other_documents"), key) is None
    store.delete(namespace, key)
    assert await store.aget(namespace, key) is None


def test_search_filters_and_paging(store: LongTermStore, clock: Clock) -> None:
    data = [
        (("test", "docs"), "doc1", {"title": "First Doc", "author": "Alice", "tags": ["important"], "n": 1}),
        (("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["draft"], "n": 2}),
        (("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"], "n": 3}),
    ]
    for ns, key, value in data:
        clock.advance(1)
        store.put(ns, key, value)
    assert len(store.search(("test",))) == 3
    docs = store.search(("test", "docs"))
    assert len(docs) == 2 and all(i.namespace == ("test", "docs") for i in docs)
    assert sorted(i.key for i in store.search(("test",), filter={"author": "Alice"})) == ["doc1", "img1"]
    assert len(store.search(("test",), limit=2)) == 2
    assert len(store.search(("test",), offset=2)) == 1
    # newest first (the order of LangGraph's database stores)
    assert [i.key for i in store.search(("test",))] == ["img1", "doc2", "doc1"]
    # operators, lists compared whole, nested objects
    assert [i.key for i in store.search(("test",), filter={"n": {"$gt": 1}})] == ["img1", "doc2"]
    assert [i.key for i in store.search(("test",), filter={"n": {"$lte": 1}})] == ["doc1"]
    assert [i.key for i in store.search(("test",), filter={"author": {"$ne": "Alice"}})] == ["doc2"]
    assert [i.key for i in store.search(("test",), filter={"tags": ["draft"]})] == ["doc2"]
    assert store.search(("test",), filter={"tags": "draft"}) == []
    store.put(("test", "nested"), "x", {"meta": {"lang": "en", "v": 2}})
    assert [i.key for i in store.search(("test",), filter={"meta": {"lang": "en"}})] == ["x"]
    assert store.search(("test",), filter={"meta": {"lang": "fr"}}) == []


def test_text_search_without_index_is_longterms_hybrid(store: LongTermStore) -> None:
    store.put(("docs",), "a", {"text": "The ferry to Porto leaves at nine"})
    store.put(("docs",), "b", {"text": "My passport expires in August"})
    store.put(("docs",), "c", {"text": "The ferry timetable changed"}, index=False)
    hits = store.search(("docs",), query="when does the ferry leave?")
    assert [h.key for h in hits][:1] == ["a"] and "c" not in [h.key for h in hits]
    assert hits[0].score is not None and 0 < hits[0].score <= 1


# -- vector search (libs/checkpoint/tests/test_store.py) ----------------------------------------


async def test_vector_insert_with_auto_embedding(vstore: LongTermStore) -> None:
    docs = [
        ("doc1", {"text": "short text"}),
        ("doc2", {"text": "longer text document"}),
        ("doc3", {"text": "longest text document here"}),
        ("doc4", {"description": "text in description field"}),
        ("doc5", {"content": "text in content field"}),
        ("doc6", {"body": "text in body field"}),
    ]
    for key, value in docs:
        await vstore.aput(("test",), key, value)
    keys = [r.key for r in await vstore.asearch(("test",), query="long text")]
    assert "doc2" in keys and "doc3" in keys


def test_vector_update_with_embedding(vstore: LongTermStore) -> None:
    vstore.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
    vstore.put(("test",), "doc2", {"text": "something about dogs"})
    vstore.put(("test",), "doc3", {"text": "text about birds"})
    initial = vstore.search(("test",), query="Zany Xerxes")
    assert initial[0].key == "doc1"
    initial_score = initial[0].score
    assert initial_score is not None
    vstore.put(("test",), "doc1", {"text": "new text about dogs"})
    after = vstore.search(("test",), query="Zany Xerxes")
    after_score = next((r.score for r in after if r.key == "doc1"), 0.0) or 0.0
    assert after_score < initial_score
    for r in vstore.search(("test",), query="new text about dogs"):
        if r.key == "doc1":
            assert (r.score or 0.0) > after_score
    vstore.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    assert not any(r.key == "doc4" for r in vstore.search(("test",), query="new text about dogs", limit=3))


async def test_vector_search_with_filters(vstore: LongTermStore) -> None:
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]
    for key, value in docs:
        vstore.put(("test",), key, value)
    results = vstore.search(("test",), query="apple", filter={"color": "red"})
    assert len(results) == 2 and results[0].key == "doc1"
    results = await vstore.asearch(("test",), query="car", filter={"color": "red"})
    assert len(results) == 2 and results[0].key == "doc2"
    results = vstore.search(("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}})
    assert len(results) == 3 and results[0].key == "doc4"
    results = vstore.search(("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [r.key for r in results] == ["doc3"]


async def test_vector_search_concurrent(vstore: LongTermStore) -> None:
    colors = ["red", "blue", "green", "yellow", "purple"]
    things = ["apple", "car", "house", "book", "phone"]
    scores = [3.0, 3.5, 4.0, 4.5, 5.0]
    for i in range(25):
        c, t, s = colors[i % 5], things[i % 5], scores[i % 5]
        await vstore.aput(("test",), f"doc{i}", {"text": f"{c} {t}", "color": c, "score": s, "index": i})
    queries: list[tuple[str, dict[str, Any]]] = [
        ("apple", {"color": "red"}),
        ("phone", {"score": {"$gt": 4.99}}),
        ("book", {"score": {"$lte": 3.5}}),
        ("car", {"score": {"$lt": 5.1}, "color": "blue"}),
        ("house", {"index": {"$gt": 12}}),
    ]
    answers = await asyncio.gather(*[vstore.asearch(("test",), query=q, filter=f) for q, f in queries])
    for results, (_, f) in zip(answers, queries, strict=True):
        assert results
        for r in results:
            if "color" in f:
                assert r.value["color"] == f["color"]
            for field in ("score", "index"):
                for op, v in (f.get(field) or {}).items():
                    x = r.value[field]
                    assert {"$gt": x > v, "$gte": x >= v, "$lt": x < v, "$lte": x <= v}[op]


def test_vector_search_pagination_and_edge_cases(vstore: LongTermStore) -> None:
    for i in range(5):
        vstore.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = vstore.search(("test",), query="test", limit=2)
    page2 = vstore.search(("test",), query="test", limit=2, offset=2)
    assert len(page1) == 2 and len(page2) == 2 and page1[0].key != page2[0].key
    assert len(vstore.search(("test",), query="test", limit=10)) == 5
    for q in ["", None, "test " * 100, "test!@#$%^&*()"]:
        assert len(vstore.search(("test",), query=q)) == 5


def test_vector_search_fields(memory: LongTermMemory) -> None:
    s = LongTermStore(memory, index={"dims": 50, "embed": CharacterEmbeddings(dims=50), "fields": ["key0"]})
    s.put(("test",), "doc1", {"key0": "aaa", "key1": "zzzz"})
    s.put(("test",), "doc2", {"key0": "zzzz", "key1": "aaa"})
    s.put(("test",), "doc3", {"key0": "zzzz", "key1": "aaa"}, index=["key1"])
    assert [r.key for r in s.search(("test",), query="aaa", limit=2)] in (["doc1", "doc3"], ["doc3", "doc1"])


# -- TTL (libs/checkpoint-sqlite/tests/test_ttl.py) --------------------------------------------


def test_ttl_basic_refresh_and_sweep(memory: LongTermMemory, clock: Clock) -> None:
    store = LongTermStore(memory, ttl={"default_ttl": 1.0, "refresh_on_read": True})
    assert store.supports_ttl
    store.put(("test",), "item1", {"value": "test"})
    assert store.get(("test",), "item1").value == {"value": "test"}  # type: ignore[union-attr]
    clock.advance(50)
    assert store.sweep_ttl() == 0
    assert store.get(("test",), "item1", refresh_ttl=True) is not None  # refreshed: 60 s from now
    clock.advance(50)
    assert store.sweep_ttl() == 0
    assert store.search(("test",)) != []  # refreshed again
    clock.advance(50)
    assert store.get(("test",), "item1", refresh_ttl=False) is not None
    clock.advance(15)
    assert store.get(("test",), "item1") is None  # never returned once expired, swept or not
    assert store.search(("test",)) == []
    assert store.list_namespaces() == []
    assert store.sweep_ttl() == 1


async def test_ttl_custom_and_override_default(memory: LongTermMemory, clock: Clock) -> None:
    store = LongTermStore(memory, ttl={"default_ttl": 5 / 60})
    await store.aput(("test",), "item1", {"value": "override"}, ttl=1 / 60)
    await store.aput(("test",), "item2", {"value": "default"})
    await store.aput(("test",), "item3", {"value": "permanent"}, ttl=None)
    clock.advance(2)
    await store.asweep_ttl()
    assert await store.aget(("test",), "item1") is None
    assert await store.aget(("test",), "item2") is not None
    assert await store.aget(("test",), "item3") is not None
    clock.advance(6)  # item2's read above refreshed it at t=2: gone at t=7
    await store.asweep_ttl()
    assert await store.aget(("test",), "item2") is None
    assert await store.aget(("test",), "item3") is not None
    found = await store.asearch(("test",), filter={"value": "permanent"})
    assert [i.key for i in found] == ["item3"]


# -- user_at: longterm's isolation -------------------------------------------------------------


async def test_user_at_two_users_never_meet(memory: LongTermMemory) -> None:
    store = LongTermStore(memory, user_at=0)
    await store.aput(("alice", "memories"), "k", {"text": "alice likes tea", "who": "alice"})
    await store.aput(("bob", "memories"), "k", {"text": "bob likes tea", "who": "bob"})
    assert (await store.aget(("alice", "memories"), "k")).value["who"] == "alice"  # type: ignore[union-attr]
    assert (await store.aget(("bob", "memories"), "k")).value["who"] == "bob"  # type: ignore[union-attr]
    for user in ("alice", "bob"):
        assert [i.value["who"] for i in await store.asearch((user,))] == [user]
        assert [i.value["who"] for i in await store.asearch((user,), query="likes tea")] == [user]
        assert [i.value["who"] for i in await store.asearch((user,), filter={"who": {"$ne": "x"}})] == [user]
        assert await store.alist_namespaces(prefix=(user,)) == [(user, "memories")]
    # the items are the users' own longterm memories
    assert memory.count_sync(app_name="lg", user_id="alice") == 1
    assert memory.count_sync(app_name="lg", user_id="bob") == 1
    # a shorter prefix searches the matching users
    assert sorted(await store.alist_namespaces()) == [("alice", "memories"), ("bob", "memories")]
    assert sorted(i.value["who"] for i in await store.asearch(())) == ["alice", "bob"]
    await store.adelete(("alice", "memories"), "k")
    assert await store.aget(("alice", "memories"), "k") is None
    assert (await store.aget(("bob", "memories"), "k")).value["who"] == "bob"  # type: ignore[union-attr]
    assert await store.asearch(("alice",)) == []
    assert await store.alist_namespaces(prefix=("alice",)) == []


def test_without_langgraph_the_module_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    from longterm import MissingDependencyError

    monkeypatch.delitem(sys.modules, "longterm.integrations.langgraph", raising=False)
    monkeypatch.setitem(sys.modules, "langgraph.store.base", None)
    with pytest.raises(MissingDependencyError) as caught:
        importlib.import_module("longterm.integrations.langgraph")
    assert "pip install 'longterm[langgraph]'" in str(caught.value) and "'langgraph'" in str(caught.value)


def test_import_longterm_does_not_import_langgraph() -> None:
    import subprocess
    import sys

    code = "import sys, longterm; print(any(m.split('.')[0] in ('langgraph', 'langchain_core') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- a graph: saves in one thread, recalls in another -------------------------------------------


async def test_a_graph_saves_in_one_thread_and_recalls_in_another(memory: LongTermMemory) -> None:
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        user: str
        said: str
        answer: str

    def node(state: State) -> dict[str, str]:
        store = get_store()
        ns = (state["user"], "memories")
        if state["said"].startswith("remember: "):
            fact = state["said"].removeprefix("remember: ")
            store.put(ns, f"m{len(store.search(ns)) + 1}", {"text": fact})
            return {"answer": "noted"}
        hits = store.search(ns, query=state["said"], limit=1)
        return {"answer": hits[0].value["text"] if hits else "nothing"}

    graph = (
        StateGraph(State)
        .add_node("node", node)
        .add_edge(START, "node")
        .add_edge("node", END)
        .compile(checkpointer=InMemorySaver(), store=LongTermStore(memory, user_at=0))
    )
    said = {"user": "alice", "said": "remember: I am allergic to shellfish", "answer": ""}
    first = await graph.ainvoke(said, {"configurable": {"thread_id": "t1"}})
    assert first["answer"] == "noted"
    ask = {"user": "alice", "said": "what am I allergic to?", "answer": ""}
    second = await graph.ainvoke(ask, {"configurable": {"thread_id": "t2"}})
    assert second["answer"] == "I am allergic to shellfish"
    other = await graph.ainvoke({**ask, "user": "bob"}, {"configurable": {"thread_id": "t3"}})
    assert other["answer"] == "nothing"
    # the sync graph API runs over the same store
    again = graph.invoke(ask, {"configurable": {"thread_id": "t4"}})
    assert again["answer"] == "I am allergic to shellfish"


def test_keys_and_namespaces_beyond_longterms_id_limits(memory: LongTermMemory) -> None:
    store = LongTermStore(memory, user_at=0)
    long_ns = ("u", "x" * 300, "y" * 300)  # its JSON is longer than a session id may be
    for ns, key in [(("u",), ""), (("u",), "k" * 600), (long_ns, "k")]:
        store.put(ns, key, {"v": key[:3]})
        assert store.get(ns, key).value == {"v": key[:3]}  # type: ignore[union-attr]
    assert len(store.search(("u",))) == 3
    assert store.list_namespaces(prefix=("u",), max_depth=2) == [("u",), ("u", "x" * 300)]
    # a namespace is returned as it was put, and matched exactly (the user is kept in NFC)
    store.put(("Jose\u0301", "m"), "k", {"v": 1})
    assert [i.namespace for i in store.search(("Jose\u0301",))] == [("Jose\u0301", "m")]
    assert store.search(("Jos\u00e9",)) == [] and store.get(("Jos\u00e9", "m"), "k") is None
    assert memory.count_sync(app_name="lg", user_id="Jos\u00e9") == 1


# -- LangMem's tools over the store ---------------------------------------------------------------


def test_langmems_tools_create_search_update_and_delete_over_the_store(store: LongTermStore) -> None:
    from langmem import create_manage_memory_tool, create_search_memory_tool

    manage = create_manage_memory_tool(namespace=("memories", "alice"), store=store)
    search = create_search_memory_tool(namespace=("memories", "alice"), store=store)
    created = manage.invoke({"content": "Alice prefers window seats on long flights", "action": "create"})
    assert "created" in str(created).lower()
    (item,) = store.search(("memories", "alice"))
    found = search.invoke({"query": "window seats"})
    assert "window seats" in str(found)
    manage.invoke({"content": "Alice prefers aisle seats now", "action": "update", "id": item.key})
    assert store.get(("memories", "alice"), item.key).value["content"] == "Alice prefers aisle seats now"
    manage.invoke({"action": "delete", "id": item.key})
    assert store.search(("memories", "alice")) == []
    assert store.search(("memories", "bob")) == []


# -- a search's cut comes after the whole filter ------------------------------------------------


@pytest.fixture
def local(tmp_path: Path, clock: Clock) -> Iterator[LongTermMemory]:
    m = LongTermMemory(app_name="lg", backend_config={"path": str(tmp_path / "local.db")}, clock=clock)
    yield m
    m.close_sync()


def test_a_query_counts_every_item_the_filter_admits_before_its_cut(local: LongTermMemory) -> None:
    store, reference = LongTermStore(local, user_at=0), InMemoryStore()
    for s in (store, reference):
        for i in range(30):
            value: dict[str, Any] = {"text": f"flight booking note {i}", "done": i % 2 == 0, "i": i}
            value |= {"tags": ["a"] if i % 3 == 0 else ["b"]} | ({} if i % 5 == 0 else {"n": None if i % 7 == 0 else i})
            s.put(("u", "docs"), f"k{i}", value)
    for f in (
        {"done": True},
        {"tags": ["a"]},
        {"done": {"$ne": False}},
        {"n": None},
        {"i": {"$gt": 20}, "tags": ["b"]},
        {"done": 1},  # LangGraph's (Python's) True == 1
    ):
        every = {i.key for i in reference.search(("u",), filter=f, limit=100)}
        assert len(store.search(("u",), query="flight booking", filter=f, limit=5)) == min(5, len(every)), f
        paged = [
            i.key
            for at in range(0, 30, 4)
            for i in store.search(("u",), query="flight booking", filter=f, limit=4, offset=at)
        ]
        assert sorted(paged) == sorted(every), f  # paging skips none and repeats none


async def test_a_query_over_every_namespace_is_not_crowded_out_by_the_users_other_memories(
    local: LongTermMemory,
) -> None:
    store = LongTermStore(local)
    for i in range(25):
        await local.add(f"a note about hiking boots, number {i}", user_id="langgraph", session_id=f"chat{i}")
    await store.aput(("prefs",), "boots", {"text": "I like hiking boots"})
    await store.aput(("prefs",), "tent", {"text": "I like hiking tents"})
    assert sorted(i.key for i in await store.asearch((), query="hiking boots", limit=2)) == ["boots", "tent"]


def test_a_negative_offset_or_limit_pages_as_langgraphs_in_memory_store(local: LongTermMemory) -> None:
    embed = CharacterEmbeddings(dims=50)
    vectors, reference = (
        LongTermStore(local, index={"dims": 50, "embed": embed}),
        InMemoryStore(index={"dims": 50, "embed": embed}),
    )
    words, by_words = LongTermStore(local), InMemoryStore()
    for i in range(8):
        for s in (vectors, reference):
            s.put(("docs",), f"d{i}", {"text": f"hiking trail {'x' * i}"}, index=False if i >= 6 else None)
        if i < 6:  # what a query of longterm's words finds: the items with words
            by_words.put(("docs",), f"d{i}", {"text": "hiking trail"})
    for offset, limit in ((-1, 10), (-3, 5), (-3, 100), (-2, 3), (-12, 4), (0, -1), (2, -1), (-2, -1)):
        at = {"offset": offset, "limit": limit}
        assert len(vectors.search(("docs",), **at)) == len(reference.search(("docs",), **at)), at
        assert len(words.search(("docs",), query="hiking trail", **at)) == len(by_words.search(("docs",), **at)), at
        mine, theirs = (
            vectors.search(("docs",), query="hiking", **at),
            reference.search(("docs",), query="hiking", **at),
        )
        assert [i.key for i in mine] == [i.key for i in theirs], at


VALUES: list[Any] = [None, True, False, 0, 1, 1.0, 2, -3.5, "", "a", "1", [], ["a"], ["a", "b"], [1], [True], [None]]
VALUES += [{"x": 1}, {"x": None}, {}, {"x": {"y": "a"}}]
WANTED: list[Any] = [None, True, False, 0, 1, 2.0, "a", "1", [], ["a"], ["a", "b"], [1], [None], [{"x": 1}]]
WANTED += [{"x": 1}, {"x": None}, {}, {"x": {"y": "a"}}, {"x": {"$ne": 1}}, {"$eq": "a"}, {"$eq": 1}, {"$eq": None}]
WANTED += [{"$eq": ["a"]}, {"$eq": {"x": 1}}, {"$ne": "a"}, {"$ne": 1}, {"$ne": True}, {"$ne": None}, {"$ne": ["a"]}]
WANTED += [{"$gt": 1}, {"$gte": 1}, {"$lt": 1.5}, {"$lte": 0}, {"$gt": 0, "$lt": 3}, {"$gt": "0"}, {"$ne": 2**60}]


def test_what_the_engine_is_handed_lets_every_item_langgraph_admits_through() -> None:
    from longterm.core.filters import matches, parse_filter
    from longterm.integrations import langgraph_items as items
    from longterm.records import MemoryRecord

    for wanted in WANTED:
        spec = items.where(("u",), {"f": wanted})
        parsed = parse_filter(spec)
        for value in [*VALUES, "missing"]:
            lg = {"ns": ["u"], "ns_0": "u", "key": "k", "value": {} if value == "missing" else {"f": value}}
            record = MemoryRecord(id="i", app_name="a", user_id="u", session_id="s", event_id="e", metadata={"lg": lg})
            if items.admits(record.metadata, ("u",), {"f": wanted}):
                assert matches(parsed, record), (wanted, value, spec)
    assert items.where((), None) == {"lg.key": {"$exists": True}}  # not the user's other memories
