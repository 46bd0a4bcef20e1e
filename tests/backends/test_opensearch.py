"""OpenSearch-specific behaviour against the real node the test setup starts.

A scripted HTTP stub stands in for the cluster in two places only, to provoke what a
healthy node will not do on demand: a 413 for a large bulk request (a 10 MB limit, as on
small AWS domains) and ``delete_by_query`` reporting failures or version conflicts.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from longterm import BackendError, BackendUnavailableError, ConfigurationError, LongTermMemory
from longterm.backends.opensearch import OpenSearchBackend, index_name
from longterm.config.backends import OpenSearchConfig, resolve_hosts
from longterm.core.erasures import Erasure
from longterm.records import Scope
from longterm.retrieval.embedders import HashingEmbedder
from longterm.testing import make_record
from tests.conftest import make_session
from tests.services.redis_server import free_port


@pytest.fixture
def os_cfg(services, tmp_path: Path) -> dict:
    return services("opensearch").config(tmp_path)


def _texts(res: Any) -> list[str]:
    return [m.content.parts[0].text for m in res.memories]


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
async def test_hybrid_search_with_knn(os_cfg: dict, fusion: str):
    cfg = {**os_cfg, "fusion": fusion}
    memory = LongTermMemory(backend="opensearch", backend_config=cfg, embedder=HashingEmbedder(64))
    await memory.add_session_to_memory(make_session(turns=[("user", "bees make honey in summer"), ("user", "car")]))
    await memory.add_session_to_memory(make_session(user="other", turns=[("user", "other user's bees and honey")]))
    res = await memory.search_memory(app_name="app", user_id="u1", query="honey bees")
    assert res.memories[0].content.parts[0].text == "bees make honey in summer"
    assert set(res.memories[0].custom_metadata["arms"]) == {"fulltext", "vector"}
    assert all("other user" not in t for t in _texts(res))
    await memory.close()


async def test_any_user_id_shares_one_index(os_cfg: dict):
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    for user in ["Alice", "a@b.com", "user 1", "ÜNÏCØDÉ"]:
        await memory.add_session_to_memory(make_session(user=user, turns=[("user", f"note of {user}")]))
    for user in ["Alice", "a@b.com", "user 1", "ÜNÏCØDÉ"]:
        assert _texts(await memory.search_memory(app_name="app", user_id=user, query="note")) == [f"note of {user}"]
    await memory.close()


async def test_embedder_change_is_refused(os_cfg: dict):
    m = LongTermMemory(backend="opensearch", backend_config=os_cfg, embedder=HashingEmbedder(64))
    await m.add_session_to_memory(make_session())
    await m.close()
    other = LongTermMemory(backend="opensearch", backend_config=os_cfg, embedder=HashingEmbedder(32))
    with pytest.raises(ConfigurationError, match="Vectors of different embedders never mix"):
        await other.count(app_name="app", user_id="u1")
    await other.close()


async def test_unreachable_cluster_is_a_clear_error():
    cfg = {"url": f"http://127.0.0.1:{free_port()}", "timeout": 2}
    memory = LongTermMemory(backend="opensearch", backend_config=cfg)
    with pytest.raises(BackendUnavailableError, match=r"cannot reach opensearch at http://127\.0\.0\.1:\d+"):
        await memory.search_memory(app_name="a", user_id="u", query="hello")
    await memory.close()


def test_configuration(monkeypatch: pytest.MonkeyPatch):
    for var in ("LONGTERM_OPENSEARCH_URL", "DATABASE_OPENSEARCH_HOST", "DATABASE_OPENSEARCH_PORT"):
        monkeypatch.delenv(var, raising=False)
    assert resolve_hosts(OpenSearchConfig()) == ["http://127.0.0.1:9200"]
    monkeypatch.setenv("DATABASE_OPENSEARCH_HOST", "search.internal")
    assert resolve_hosts(OpenSearchConfig()) == ["https://search.internal:9200"]
    monkeypatch.setenv("LONGTERM_OPENSEARCH_URL", "https://os:9243")
    assert resolve_hosts(OpenSearchConfig()) == ["https://os:9243"]
    two = ["http://a:9200", "http://b:9200"]
    assert resolve_hosts(OpenSearchConfig(hosts=two)) == two
    monkeypatch.setenv("DATABASE_OPENSEARCH_USERNAME", "admin")
    b = OpenSearchBackend(password="pw")
    assert b.auth == ("admin", "pw") and b.verify_certs is True
    with pytest.raises(ConfigurationError, match="'indx'"):
        OpenSearchBackend(indx="typo")


def test_index_names_are_valid_and_distinct():
    """A changed or cut name keeps its digest: two long names that differ only past 200
    characters, or only in case, get two indices; every name fits OpenSearch's 255 bytes
    with the ledger's suffix, is lower case and starts with a letter or digit."""
    assert index_name("longterm-", "shop") == "longterm-shop"
    long = "a" * 300
    names = {index_name("longterm-", x) for x in (long + "1", long + "2", "My App", "my_app", "MY APP", "_x", "-x")}
    assert len(names) == 7
    for name in names:
        assert len((name + ".ledger").encode()) <= 255 and name == name.lower() and name[0].isalnum()


async def test_long_index_names_differing_past_200_characters_do_not_share_data(os_cfg: dict):
    first, second = ("a" * 240 + "-first", "a" * 240 + "-second")
    one = LongTermMemory(backend="opensearch", backend_config={**os_cfg, "index": first})
    two = LongTermMemory(backend="opensearch", backend_config={**os_cfg, "index": second})
    await one.add_session_to_memory(make_session(turns=[("user", "the first index holds bees")]))
    assert _texts(await one.search_memory(app_name="app", user_id="u1", query="bees")) == ["the first index holds bees"]
    assert _texts(await two.search_memory(app_name="app", user_id="u1", query="bees")) == []
    assert (await two.add_session_to_memory(make_session(turns=[("user", "the second one")]))).new_events == 1
    await one.close()
    await two.close()


async def test_the_ledger_lives_in_the_store_and_reads_past_10k_events(
    os_cfg: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Another machine (another LONGTERM_HOME) on the same index knows what was saved, even
    for a session of over 10,000 events; another index does not inherit it; erasing
    memories leaves the ledger, so what a user erased stays erased."""
    big = make_session("big", turns=[("user", f"fact number {i} about tulips") for i in range(10_050)])
    first = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    assert (await first.add_session_to_memory(big)).new_events == 10_050
    await first.close()
    monkeypatch.setenv("LONGTERM_HOME", str(tmp_path / "another-machine"))
    again = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    res = await again.add_session_to_memory(big)
    assert (res.new_events, res.saved) == (0, 0)
    assert await again.delete_memory(app_name="app", user_id="u1", session_id="big") == 10_050
    assert (await again.add_session_to_memory(big)).saved == 0
    assert await again.count(app_name="app", user_id="u1") == 0
    await again.close()
    other = LongTermMemory(backend="opensearch", backend_config={**os_cfg, "index": "another"})
    small = make_session("big", turns=[("user", "fact number 1 about tulips")])
    assert (await other.add_session_to_memory(small)).saved == 1
    await other.close()


async def test_a_failed_write_names_the_event_and_leaves_the_ledger(os_cfg: dict):
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    await memory.count(app_name="app", user_id="u1")  # the index exists
    admin, index = OpenSearch(os_cfg["url"]), index_name(os_cfg["prefix"], "app")
    admin.indices.put_settings(index=index, body={"index.blocks.write": True})
    with pytest.raises(BackendUnavailableError, match=r"event 's1-e0' of session 's1': cluster_block_exception"):
        await memory.add_session_to_memory(make_session())
    admin.indices.put_settings(index=index, body={"index.blocks.write": False})
    assert (await memory.add_session_to_memory(make_session())).saved == 1
    assert await memory.count(app_name="app", user_id="u1") == 1
    await memory.close()


async def test_a_save_waits_for_an_index_another_worker_just_created(os_cfg: dict):
    """Another worker created the index a moment ago and its shards are not started yet:
    opening it waits for them instead of failing the save with a 503 (a CI flake: two
    processes saving the same session into a fresh index)."""
    setup = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    await setup.count(app_name="app", user_id="u1")  # learn the mappings the engine creates
    await setup.close()
    admin, index = OpenSearch(os_cfg["url"]), index_name(os_cfg["prefix"], "app")
    for name in (index, index + ".ledger"):
        mappings = admin.indices.get_mapping(index=name)[name]["mappings"]
        settings = admin.indices.get_settings(index=name)[name]["settings"]["index"]
        admin.indices.delete(index=name)
        kept = {k: settings[k] for k in ("analysis", "number_of_replicas") if k in settings}
        nowhere = {**kept, "routing": {"allocation": {"require": {"_name": "no-such-node"}}}}
        body = {"settings": {"index": nowhere}, "mappings": mappings}
        admin.indices.create(index=name, body=body, params={"wait_for_active_shards": "0"})
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    save = asyncio.create_task(memory.add_session_to_memory(make_session()))
    await asyncio.sleep(1.5)
    assert not save.done(), save  # waiting for the shards, not failed
    for name in (index, index + ".ledger"):
        admin.indices.put_settings(index=name, body={"index.routing.allocation.require._name": None})
    assert (await save).saved == 1
    assert await memory.count(app_name="app", user_id="u1") == 1
    await memory.close()


async def test_a_search_whose_shards_are_not_started_waits_for_them(os_cfg: dict):
    """The engine is open, but a shard it searches is not started (the index re-created by another
    worker, a node restarting): reading the ledger waited for nothing and failed the save with a
    503 "all shards failed" (the client's own retries come at once); it now waits for the shards."""
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    await memory.count(app_name="app", user_id="u1")  # open: past the open-time wait
    admin, index = OpenSearch(os_cfg["url"]), index_name(os_cfg["prefix"], "app")
    name = index + ".ledger"
    mappings = admin.indices.get_mapping(index=name)[name]["mappings"]
    settings = admin.indices.get_settings(index=name)[name]["settings"]["index"]
    admin.indices.delete(index=name)
    kept = {k: settings[k] for k in ("number_of_replicas",) if k in settings}
    nowhere = {**kept, "routing": {"allocation": {"require": {"_name": "no-such-node"}}}}
    admin.indices.create(
        index=name, body={"settings": {"index": nowhere}, "mappings": mappings}, params={"wait_for_active_shards": "0"}
    )
    save = asyncio.create_task(memory.add_session_to_memory(make_session()))
    await asyncio.sleep(1.5)
    assert not save.done(), save  # waiting for the shards, not failed
    admin.indices.put_settings(index=name, body={"index.routing.allocation.require._name": None})
    assert (await save).saved == 1
    await memory.close()


async def test_one_memory_used_from_many_threads_and_loops(os_cfg: dict):
    """No client is bound to an event loop: threads with their own loops and the sync
    wrappers share one memory."""
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    memory.add_session_to_memory_sync(make_session(turns=[("user", "shared bees")]))
    results: list[list[str]] = []

    def worker(i: int) -> None:
        async def go() -> list[str]:
            await memory.add_session_to_memory(make_session(f"t{i}", user=f"user{i}", turns=[("user", f"bees {i}")]))
            return _texts(await memory.search_memory(app_name="app", user_id=f"user{i}", query="bees"))

        results.append(asyncio.run(go()))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == sorted([[f"bees {i}"] for i in range(8)])
    assert _texts(memory.search_memory_sync(app_name="app", user_id="u1", query="bees")) == ["shared bees"]
    memory.close_sync()


# -- a scripted stub cluster, for what a real node will not do on demand -------------------


class Stub:
    """An HTTP server answering OpenSearch requests from ``routes``: ``(method, path tail)``
    to a function of the request body returning ``(status, json)``; everything is logged."""

    def __init__(self, routes: dict[tuple[str, str], Callable[[bytes], tuple[int, Any]]]) -> None:
        self.routes, self.log = routes, []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                stub.log.append((self.command, path, body))
                routes = [f for (m, tail), f in stub.routes.items() if m == self.command and path.endswith(tail)]
                status, answer = routes[0](body) if routes else (200, {"acknowledged": True})
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def requests(self, tail: str) -> list[bytes]:
        return [body for _, path, body in self.log if path.endswith(tail)]


DEFAULTS: dict[tuple[str, str], Callable[[bytes], tuple[int, Any]]] = {
    ("GET", "/_mapping"): lambda body: (200, {"longterm-app": {"mappings": {"_meta": {"embedder": ""}}}}),
    ("POST", "/_search"): lambda body: (200, {"hits": {"hits": []}}),
    # Reads and the erasure marks (none here) go by ``_msearch``; an erase moves the clock document.
    ("POST", "/_msearch"): lambda body: (200, {"responses": [{"hits": {"hits": []}}] * (body.count(b"\n") // 2)}),
    ("PUT", "/_doc/~clock"): lambda body: (200, {"_version": 1}),
}


@pytest.fixture
def stub() -> Iterator[Callable[..., Stub]]:
    made: list[Stub] = []

    def make(routes: dict[tuple[str, str], Callable[[bytes], tuple[int, Any]]]) -> Stub:
        made.append(Stub({**DEFAULTS, **routes}))
        return made[-1]

    yield make
    for s in made:
        s.server.shutdown()


def _bulk_with_a_10mb_limit(body: bytes) -> tuple[int, Any]:
    if len(body) > 10 * 1024 * 1024:
        return 413, {"error": "Request Entity Too Large"}
    docs = body.count(b"\n") // 2
    return 200, {"errors": False, "items": [{"index": {"status": 201}}] * docs}


async def test_a_large_session_is_sent_in_bulk_requests_the_cluster_accepts(stub):
    """A session of 12 MB (24 events of 500 KB, and 1,500 small ones) is saved whole into a
    cluster that refuses requests over 10 MB: no request carries over 5 MB or 1,000 documents."""
    server = stub({("POST", "/_bulk"): _bulk_with_a_10mb_limit})
    turns = [("user", f"chapter {i} " + "lorem ipsum " * 42_000) for i in range(24)]
    turns += [("user", f"small fact {i}") for i in range(1_500)]
    memory = LongTermMemory(backend="opensearch", backend_config={"url": server.url, "index": "app"})
    assert (await memory.add_session_to_memory(make_session(turns=turns))).saved == 1_524
    bulks = server.requests("/_bulk")
    assert sum(b.count(b"\n") // 2 for b in bulks) == 2 * 1_524  # the records and their ledger entries
    assert all(len(b) <= 5 * 1024 * 1024 and b.count(b"\n") // 2 <= 1_000 for b in bulks)
    await memory.close()


def _erase_rounds(pages: list[list[str]], bulks: list[list[int]]) -> dict[tuple[str, str], Any]:
    """An erase's routes: each ``_search`` answers the next page of record ids, each ``_bulk`` the
    next list of item statuses (201: tombstoned, 409: changed since read, 429: rejected)."""

    def search(body: bytes) -> tuple[int, Any]:
        ids = pages.pop(0) if pages else []
        hits = [{"_id": i, "_seq_no": 1, "_primary_term": 1, "sort": [i]} for i in ids]
        return 200, {"hits": {"hits": hits}}

    def bulk(body: bytes) -> tuple[int, Any]:
        statuses = bulks.pop(0)
        items = [{"index": {"status": st, **({"error": {"type": "x"}} if st >= 300 else {})}} for st in statuses]
        return 200, {"errors": any(st >= 300 for st in statuses), "items": items}

    return {("POST", "/_search"): search, ("POST", "/_bulk"): bulk}


async def test_erase_goes_again_after_conflicts_and_rejections_and_counts_each_memory_once(stub):
    pages = [["a", "b", "c"], ["b", "c"], ["c"], []]
    server = stub(_erase_rounds(pages, [[201, 409, 429], [201, 409], [201]]))
    memory = LongTermMemory(backend="opensearch", backend_config={"url": server.url, "index": "app"})
    assert await memory.delete_memories(app_name="app", user_id="u1") == 3
    tombstones = [b for b in server.requests("/_bulk")]
    assert len(tombstones) == 3 and all(b'"if_seq_no"' in b and b'{"erased": true}' in b for b in tombstones)
    await memory.close()


async def test_an_erase_that_cannot_finish_says_so(stub):
    server = stub(_erase_rounds([["x"]] * 20, [[409]] * 20))
    memory = LongTermMemory(backend="opensearch", backend_config={"url": server.url, "index": "app"})
    with pytest.raises(BackendError, match=r"changed while erasing.*still stored\. Erase again"):
        await memory.delete_memory(app_name="app", user_id="u1", session_id="s1")
    await memory.close()


@pytest.mark.parametrize("blob", ["a" * 40_000, "0123456789abcdef" * 2_500, "é" * 20_000, "中" * 20_000])
async def test_a_word_longer_than_lucene_takes_is_saved_and_the_rest_found(os_cfg: dict, blob: str):
    """A hex dump or a base64 blob is one 'word' of tens of KB: Lucene refuses terms over 32,766
    bytes, which failed every save of the session, forever."""
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    await memory.add_session_to_memory(make_session(turns=[("user", f"{blob} findme")]))
    res = await memory.search_memory(app_name="app", user_id="u1", query="findme")
    assert _texts(res) == [f"{blob} findme"]
    await memory.close()


# -- exactly once under erases ---------------------------------------------------------------------


def _race_session(sid: str, n: int = 600) -> dict[str, Any]:
    return make_session(sid, turns=[("user", f"racing fact {i} of {sid}") for i in range(n)])


async def _live(memory: LongTermMemory, sid: str) -> tuple[int, int]:
    """(memories the user has, hits for the session's words)."""
    found = await memory.search_memory(app_name="app", user_id="u1", query=f"racing fact {sid}")
    return await memory.count(app_name="app", user_id="u1"), len(found.memories)


@pytest.mark.parametrize("pause", ["after-the-ledger-read", "between-bulk-chunks"])
async def test_a_save_paused_across_an_erase_brings_nothing_back(
    os_cfg: dict, monkeypatch: pytest.MonkeyPatch, pause: str
):
    """Worker B read the ledger (nothing saved yet) and is held there, or after its first bulk
    chunk; worker A saves the 600 events and the user erases them; then B goes on. Today's main
    wrote B's records over the erase (600, or 500, memories back)."""
    import longterm.backends.opensearch.bulk as engine

    monkeypatch.setattr(engine, "BULK_DOCS", 100)  # six chunks of records
    a, b = (LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app") for _ in range(2))
    reached, go = threading.Event(), threading.Event()
    backend = b.backend_instance
    if pause == "after-the-ledger-read":
        read = backend._ledger_saved

        def held_read(scope: Any, session_id: str) -> set[str]:
            saved = read(scope, session_id)
            reached.set()
            go.wait(30)
            return saved

        monkeypatch.setattr(backend, "_ledger_saved", held_read)
    else:
        send, sent = backend._send, []

        def held_send(chunk: Any, *args: Any, **kwargs: Any) -> list[int]:
            statuses = send(chunk, *args, **kwargs)
            sent.append(len(chunk))
            if len(sent) == 1:
                reached.set()
                go.wait(30)
            return statuses

        monkeypatch.setattr(backend, "_send", held_send)
    session = _race_session("s1")

    async def scenario() -> None:
        slow = asyncio.create_task(b.add_session_to_memory(session))
        assert await asyncio.get_running_loop().run_in_executor(None, reached.wait, 30)
        assert (await a.add_session_to_memory(session)).new_events == 600
        assert await a.delete_memory(app_name="app", user_id="u1", session_id="s1") == 600
        go.set()
        await slow
        assert await _live(a, "s1") == (0, 0)
        assert (await a.add_session_to_memory(session)).new_events == 0  # and the ledger holds them all

    try:
        await asyncio.wait_for(scenario(), 120)
    finally:
        go.set()
        await a.close()
        await b.close()


async def test_two_workers_racing_an_erase_bring_nothing_back_and_the_count_is_exact(os_cfg: dict):
    """The attack of issue 25, bounded: two workers save one 600-event session at once, the user
    erases it as soon as one of them returned, then the other finishes. Every trial: the erase
    reports the 600 memories it took (never more, as when rounds of delete_by_query counted
    re-indexed records again), and none comes back."""
    a, b = (LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app") for _ in range(2))

    async def trial(sid: str) -> tuple[int, tuple[int, int]]:
        session = _race_session(sid)
        tasks = {asyncio.create_task(m.add_session_to_memory(session)) for m in (a, b)}
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            t.result()
        deleted = await a.delete_memory(app_name="app", user_id="u1", session_id=sid)
        await asyncio.gather(*pending)
        return deleted, await _live(a, sid)

    try:
        for i in range(4):
            assert await asyncio.wait_for(trial(f"t{i}"), 60) == (600, (0, 0)), f"trial {i}"
    finally:
        await a.close()
        await b.close()


# -- listing, fork, purge -----------------------------------------------------------------------


async def test_indices_are_named_as_the_caller_named_them_and_old_indices_by_their_physical_name(os_cfg: dict):
    named = LongTermMemory(backend="opensearch", backend_config={**os_cfg, "index": "Travel Bookings"})
    await named.add_session_to_memory(make_session(turns=[("user", "a trip to Porto")]))
    old = LongTermMemory(backend="opensearch", backend_config={**os_cfg, "index": "legacy"})
    await old.add_session_to_memory(make_session(turns=[("user", "an old memory")]))
    empty = LongTermMemory(backend="opensearch", backend_config={**os_cfg, "index": "empty"})
    await empty.count(app_name="app", user_id="u1")  # made, holds nothing
    # As an earlier release left it: a mapping whose _meta names no index.
    old.backend_instance.client.indices.put_mapping(index=old.backend_instance.index, body={"_meta": {"embedder": ""}})
    assert await empty.indices() == sorted(["Travel Bookings", "legacy"])
    longer = LongTermMemory(backend="opensearch", backend_config={**os_cfg, "prefix": os_cfg["prefix"] + "x-"})
    assert await longer.indices() == []  # another prefix (here one that starts with this one) lists its own
    for m in (named, old, empty, longer):
        await m.close()


def test_after_fork_the_child_opens_its_own_client_and_the_parents_stays_good(os_cfg: dict):
    from longterm.records import MemoryRecord, Scope, record_id
    from tests.backends.test_redis import in_a_forked_child

    backend = OpenSearchBackend(**os_cfg)

    def rec(i: int) -> MemoryRecord:
        return MemoryRecord(
            id=record_id("app", "u1", "s", f"e{i}"), app_name="app", user_id="u1", session_id="s",
            event_id=f"e{i}", role="user", text=f"forked fact {i}", timestamp=float(i),
        )  # fmt: skip

    scope = Scope(app_name="app", user_id="u1")
    backend.runner.call("saving", backend._write, ([rec(0)], None))
    parent = backend.client

    def child() -> int:
        backend._forget_after_fork()
        assert backend.client is not parent
        backend.runner.call("saving", backend._write, ([rec(1)], None))
        return 0 if backend.runner.call("counting", backend._count, (scope,)) == 2 else 1

    assert in_a_forked_child(child) == 0
    assert backend.client is parent and parent.ping()
    assert backend.runner.call("counting", backend._count, (scope,)) == 2
    asyncio.run(backend.close())


async def test_purge_merges_the_erased_documents_away(os_cfg: dict):
    """Lucene keeps a deleted (or overwritten) document in its segment until a merge, and a
    retention lease keeps it past a merge until the lease renews (about 30 s): ``purge`` waits
    for the lease and merges again, so no deleted document is left."""
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app")
    for i in range(3):
        await memory.add_session_to_memory(make_session(f"s{i}", turns=[("user", f"purged secret {i}")]))
    assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s0") == 1
    backend = memory.backend_instance
    stats = lambda: backend.client.indices.stats(index=backend.index)["indices"][backend.index]["total"]  # noqa: E731
    assert stats()["docs"]["deleted"] >= 1  # the erased record's old version, text and all, in a segment
    await asyncio.get_running_loop().run_in_executor(None, backend.runner.call, "purging", backend._purge, ())
    assert stats()["docs"]["deleted"] == 0
    segments = backend.client.indices.segments(index=backend.index)["indices"][backend.index]["shards"]
    assert [len(copy["segments"]) for shard in segments.values() for copy in shard] == [1]
    assert await memory.count(app_name="app", user_id="u1") == 2
    assert [
        m.content.parts[0].text
        for m in (await memory.search_memory(app_name="app", user_id="u1", query="purged secret 1")).memories
    ][0] == "purged secret 1"
    await memory.close()


async def test_a_scope_of_an_older_store_with_an_erase_under_way_is_counted_as_stored(os_cfg: dict):
    """A user id an earlier release stored decomposed (NFD), beside its NFC twin: while an erase of
    one of its sessions is under way, the listing of users counts that scope's own records left."""
    nfd, nfc = "Jose\u0301", "Jos\u00e9"
    async with LongTermMemory(backend="opensearch", backend_config=os_cfg, app_name="app") as memory:
        engine: Any = memory.backend_instance
        old = [make_record(f"old {i}", user=nfd, session=f"s{i % 2}", event=f"e{i}") for i in range(5)]
        await engine.save(old, Scope.stored("app", nfd), "s0", [])
        await engine.save([make_record("twin", user=nfc, event="t")], Scope(app_name="app", user_id=nfc), "s0", [])
        await asyncio.to_thread(engine._erasure_begin, Erasure("app", nfd, "s0"))  # killed before its deletes
        counts = {user: n for _, user, n in await asyncio.to_thread(engine._scopes)}  # the engine's listing
        assert counts == {nfd: 2, nfc: 1}  # s1's two records; the twin's own one
