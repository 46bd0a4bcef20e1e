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
from longterm.retrieval.embedders import HashingEmbedder
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
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg)
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
    first = LongTermMemory(backend="opensearch", backend_config=os_cfg)
    assert (await first.add_session_to_memory(big)).new_events == 10_050
    await first.close()
    monkeypatch.setenv("LONGTERM_HOME", str(tmp_path / "another-machine"))
    again = LongTermMemory(backend="opensearch", backend_config=os_cfg)
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
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg)
    await memory.count(app_name="app", user_id="u1")  # the index exists
    admin, index = OpenSearch(os_cfg["url"]), index_name(os_cfg["prefix"], "default_app")
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
    setup = LongTermMemory(backend="opensearch", backend_config=os_cfg)
    await setup.count(app_name="app", user_id="u1")  # learn the mappings the engine creates
    await setup.close()
    admin, index = OpenSearch(os_cfg["url"]), index_name(os_cfg["prefix"], "default_app")
    for name in (index, index + ".ledger"):
        mappings = admin.indices.get_mapping(index=name)[name]["mappings"]
        settings = admin.indices.get_settings(index=name)[name]["settings"]["index"]
        admin.indices.delete(index=name)
        kept = {k: settings[k] for k in ("analysis", "number_of_replicas") if k in settings}
        nowhere = {**kept, "routing": {"allocation": {"require": {"_name": "no-such-node"}}}}
        body = {"settings": {"index": nowhere}, "mappings": mappings}
        admin.indices.create(index=name, body=body, params={"wait_for_active_shards": "0"})
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg)
    save = asyncio.create_task(memory.add_session_to_memory(make_session()))
    await asyncio.sleep(1.5)
    assert not save.done(), save  # waiting for the shards, not failed
    for name in (index, index + ".ledger"):
        admin.indices.put_settings(index=name, body={"index.routing.allocation.require._name": None})
    assert (await save).saved == 1
    assert await memory.count(app_name="app", user_id="u1") == 1
    await memory.close()


async def test_one_memory_used_from_many_threads_and_loops(os_cfg: dict):
    """No client is bound to an event loop: threads with their own loops and the sync
    wrappers share one memory."""
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg)
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


def _delete_by_query(answers: list[dict[str, Any]]) -> Callable[[bytes], tuple[int, Any]]:
    def answer(body: bytes) -> tuple[int, Any]:
        given = answers.pop(0)
        status = given.pop("status", 200)
        return status, {"deleted": 0, "version_conflicts": 0, "failures": [], "timed_out": False, **given}

    return answer


def _count(n: int) -> Callable[[bytes], tuple[int, Any]]:
    return lambda body: (200, {"count": n, "_shards": {"total": 1, "successful": 1, "failed": 0}})


async def test_erase_goes_again_after_failures_and_conflicts(stub):
    failure = {"index": "longterm-app", "id": "x", "cause": {"type": "es_rejected_execution_exception"}, "status": 429}
    rounds = [
        {"deleted": 3, "failures": [failure], "status": 429},
        {"deleted": 1, "version_conflicts": 2},
        {"deleted": 2},
    ]
    server = stub({("POST", "/_delete_by_query"): _delete_by_query(rounds), ("POST", "/_count"): _count(1)})
    memory = LongTermMemory(backend="opensearch", backend_config={"url": server.url, "index": "app"})
    assert await memory.delete_memory(app_name="app", user_id="u1") == 6
    assert len(server.requests("/_delete_by_query")) == 3
    await memory.close()


async def test_an_erase_that_cannot_finish_says_so(stub):
    rounds = [{"deleted": 1, "version_conflicts": 1}] + [{"version_conflicts": 1}] * 20
    server = stub({("POST", "/_delete_by_query"): _delete_by_query(rounds), ("POST", "/_count"): _count(1)})
    memory = LongTermMemory(backend="opensearch", backend_config={"url": server.url, "index": "app"})
    with pytest.raises(BackendError, match=r"version conflicts.*still stored\. Erase again"):
        await memory.delete_memory(app_name="app", user_id="u1", session_id="s1")
    await memory.close()


@pytest.mark.parametrize("blob", ["a" * 40_000, "0123456789abcdef" * 2_500, "é" * 20_000, "中" * 20_000])
async def test_a_word_longer_than_lucene_takes_is_saved_and_the_rest_found(os_cfg: dict, blob: str):
    """A hex dump or a base64 blob is one 'word' of tens of KB: Lucene refuses terms over 32,766
    bytes, which failed every save of the session, forever."""
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg)
    await memory.add_session_to_memory(make_session(turns=[("user", f"{blob} findme")]))
    res = await memory.search_memory(app_name="app", user_id="u1", query="findme")
    assert _texts(res) == [f"{blob} findme"]
    await memory.close()
