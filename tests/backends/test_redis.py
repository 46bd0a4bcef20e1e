"""Redis-specific behaviour, against real redis-server processes started here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from longterm import BackendUnavailableError, ConfigurationError, LongTermMemory
from longterm.backends.redis import RedisBackend
from longterm.config.backends import RedisConfig, resolve_url
from longterm.retrieval.embedders import HashingEmbedder
from tests.conftest import make_session
from tests.services.redis_server import RedisServer, free_port


@pytest.fixture
def redis_cfg(services, tmp_path: Path) -> dict:
    return services("redis").config(tmp_path)


async def test_outage_mid_run_loses_nothing_and_duplicates_nothing(tmp_path: Path):
    server = RedisServer(persist=True)
    server.start(tmp_path)
    try:
        memory = LongTermMemory(backend="redis", backend_config={"url": server.url, "socket_timeout": 2})
        session = make_session(turns=[])
        failures = 0
        for i in range(30):
            session["events"].append(
                {"id": f"e{i}", "author": "user", "content": {"role": "user", "parts": [{"text": f"fact number {i}"}]}}
            )
            if i == 10:
                server.stop()
            if i == 20:
                server.restart()
            try:
                await memory.add_session_to_memory(session)
            except BackendUnavailableError as exc:
                assert server.url in str(exc) and "LONGTERM_REDIS_URL" in str(exc)
                failures += 1
        assert failures == 10
        assert await memory.count(app_name="app", user_id="u1") == 30
        ids = [r.event_id async for r in memory.iter_records(app_name="app", user_id="u1")]
        assert sorted(ids) == sorted(f"e{i}" for i in range(30))
        assert (await memory.add_session_to_memory(session)).saved == 0
        await memory.close()
    finally:
        server.stop()


async def test_unreachable_server_is_a_clear_error():
    memory = LongTermMemory(
        backend="redis", backend_config={"url": f"redis://127.0.0.1:{free_port()}/0", "socket_timeout": 1}
    )
    with pytest.raises(BackendUnavailableError, match=r"redis at redis://127\.0\.0\.1:\d+/0.*LONGTERM_REDIS_URL"):
        await memory.search_memory(app_name="a", user_id="u", query="hello")
    await memory.close()


async def test_redis_without_redisearch_says_how_to_start_one(tmp_path: Path):
    server = RedisServer(modules=False)
    server.start(tmp_path)
    try:
        memory = LongTermMemory(backend="redis", backend_config={"url": server.url})
        with pytest.raises(BackendUnavailableError, match="no RediSearch module.*--loadmodule"):
            await memory.add_session_to_memory(make_session())
        await memory.close()
    finally:
        server.stop()


async def test_password_is_never_printed():
    memory = LongTermMemory(
        backend="redis", backend_config={"url": f"redis://me:hunter2@127.0.0.1:{free_port()}/0", "socket_timeout": 1}
    )
    with pytest.raises(BackendUnavailableError) as err:
        await memory.count(app_name="a", user_id="u")
    assert "hunter2" not in str(err.value) and "***" in str(err.value)
    await memory.close()


async def test_another_embedder_is_a_clear_error_and_no_embedder_reads_full_text(redis_cfg: dict):
    with_vectors = LongTermMemory(backend="redis", backend_config={**redis_cfg, "embedder": HashingEmbedder(64)})
    await with_vectors.add_session_to_memory(make_session())
    await with_vectors.close()
    other = LongTermMemory(backend="redis", backend_config={**redis_cfg, "embedder": HashingEmbedder(32)})
    with pytest.raises(ConfigurationError, match="Vectors of different embedders never mix"):
        await other.search_memory(app_name="app", user_id="u1", query="hiking")
    await other.close()
    plain = LongTermMemory(backend="redis", backend_config=redis_cfg)
    res = await plain.search_memory(app_name="app", user_id="u1", query="hiking")
    assert [m.content.parts[0].text for m in res.memories] == ["I love hiking"]
    await plain.close()


async def test_hybrid_search_fuses_both_arms_and_degrades_visibly(redis_cfg: dict):
    memory = LongTermMemory(backend="redis", backend_config={**redis_cfg, "embedder": "hashing"}, app_name="app")
    turns = [
        ("user", "I keep bees and sell honey at the market"),
        ("user", "My car is a blue hatchback"),
        ("user", "unrelated words here"),
    ]
    await memory.add_session_to_memory(make_session(turns=turns))
    res = await memory.search_memory(app_name="app", user_id="u1", query="bees honey")
    top = res.memories[0]
    assert top.content.parts[0].text.startswith("I keep bees")
    assert set(top.custom_metadata["arms"]) == {"fulltext", "vector"}

    class BrokenQueries(HashingEmbedder):
        def embed(self, texts, *, kind="passage"):
            if kind == "query":
                raise TimeoutError("embedding service timed out")
            return super().embed(texts, kind=kind)

    memory.backend_instance.embedding.embedder = BrokenQueries(256)
    res = await memory.search_memory(app_name="app", user_id="u1", query="bees honey")
    assert res.memories[0].content.parts[0].text.startswith("I keep bees")
    assert "query embedding failed" in res.memories[0].custom_metadata["degraded"]
    await memory.close()


async def test_ledger_is_shared_between_hosts(redis_cfg: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    session = make_session(turns=[("user", f"fact {i}") for i in range(5)])
    monkeypatch.setenv("LONGTERM_HOME", str(tmp_path / "host-a"))
    a = LongTermMemory(backend="redis", backend_config=redis_cfg)
    assert (await a.add_session_to_memory(session)).saved == 5
    monkeypatch.setenv("LONGTERM_HOME", str(tmp_path / "host-b"))
    b = LongTermMemory(backend="redis", backend_config=redis_cfg)
    assert (await b.add_session_to_memory(session)).saved == 0
    assert not (tmp_path / "host-b").exists()
    await a.close()
    await b.close()


async def test_one_connection_pool_per_memory(redis_cfg: dict):
    import redis

    probe = redis.Redis.from_url(redis_cfg["url"])
    before = probe.execute_command("CLIENT", "LIST").decode().count("\n")
    memory = LongTermMemory(backend="redis", backend_config={**redis_cfg, "max_connections": 4}, app_name="app")
    await memory.add_session_to_memory(make_session())
    res = await asyncio.gather(*(memory.search_memory(app_name="app", user_id="u1", query="hiking") for _ in range(50)))
    assert all(r.memories for r in res)
    assert probe.execute_command("CLIENT", "LIST").decode().count("\n") <= before + 4
    probe.close()
    await memory.close()


def test_configuration_sources(monkeypatch: pytest.MonkeyPatch):
    database = (f"DATABASE_REDIS_{v}" for v in ("HOST", "PORT", "USERNAME", "PASSWORD", "DB"))
    for var in ("LONGTERM_REDIS_URL", "REDIS_URL", *database):
        monkeypatch.delenv(var, raising=False)
    assert resolve_url(RedisConfig()) == "redis://127.0.0.1:6379/0"
    assert resolve_url(RedisConfig(host="h", port=1, password="p w", db=2)) == "redis://:p%20w@h:1/2"
    monkeypatch.setenv("LONGTERM_REDIS_URL", "redis://env:6380/1")
    assert resolve_url(RedisConfig()) == "redis://env:6380/1"
    monkeypatch.setenv("DATABASE_REDIS_HOST", "veadk-host")
    monkeypatch.setenv("DATABASE_REDIS_PASSWORD", "secret")
    assert resolve_url(RedisConfig()) == "redis://:secret@veadk-host:6379/0"
    with pytest.raises(ConfigurationError, match="'hots'.*Known keys:.*url, host"):
        LongTermMemory(backend="redis", backend_config={"hots": "x"})


async def test_vectors_are_float32_of_the_embedder_dim(redis_cfg: dict):
    import redis

    memory = LongTermMemory(
        backend="redis", backend_config={**redis_cfg, "embedder": HashingEmbedder(64)}, app_name="app"
    )
    await memory.add_session_to_memory(make_session())
    backend = memory.backend_instance
    assert isinstance(backend, RedisBackend)
    probe = redis.Redis.from_url(redis_cfg["url"])
    [key] = probe.keys(f"{backend.ns}m:*")
    vector = np.frombuffer(probe.hget(key, "embedding"), dtype=np.float32)
    assert vector.shape == (64,) and abs(float(np.linalg.norm(vector)) - 1) < 1e-5
    probe.close()
    await memory.close()


@pytest.mark.parametrize("embedder", [None, "hashing"])
async def test_a_large_write_over_several_scopes_lands_whole_in_each_scope(redis_cfg: dict, embedder):
    """One upsert of 2,345 records (three script calls; 750 of each 1,000 for one user, so
    scope sets fill in several batches) over three users: every record indexed, counted
    and found in its own scope only, and a replay duplicates nothing."""
    from longterm.records import MemoryRecord, record_id

    cfg = {**redis_cfg, **({"embedder": embedder} if embedder else {})}
    memory = LongTermMemory(backend="redis", backend_config=cfg)
    users = ["u1", "u2", "u3 {x}|@scope"]
    owner = [users[0] if i % 4 else users[1 + (i // 4) % 2] for i in range(2345)]
    records = [
        MemoryRecord(
            id=record_id("app", owner[i], "s", f"e{i}"),
            app_name="app",
            user_id=owner[i],
            session_id="s",
            event_id=f"e{i}",
            role="user",
            text=f"marker{i} note for {owner[i]}",
            timestamp=float(i),
        )
        for i in range(2345)
    ]
    for _ in range(2):  # the second is a replay: overwrites, never duplicates
        await memory.backend_instance.upsert(records)
        for user in users:
            mine = [i for i in range(2345) if owner[i] == user]
            assert await memory.count(app_name="app", user_id=user) == len(mine)
            for i in (mine[0], mine[len(mine) // 2], mine[-1]):
                res = await memory.search_memory(app_name="app", user_id=user, query=f"marker{i}")
                assert res.memories[0].content.parts[0].text == f"marker{i} note for {user}"
            theirs = next(i for i in range(2345) if owner[i] != user)
            res = await memory.search_memory(app_name="app", user_id=user, query=f"marker{theirs}")
            assert all(m.content.parts[0].text.endswith(f"for {user}") for m in res.memories)
    await memory.close()


async def test_a_server_that_stops_answering_is_a_clear_error_and_no_reply_goes_astray(tmp_path: Path):
    """A frozen server (SIGSTOP): the call fails within socket_timeout saying so; once it
    answers again, the next calls get their own replies, not the abandoned one's."""
    import os
    import signal

    server = RedisServer()
    server.start(tmp_path)
    try:
        memory = LongTermMemory(backend="redis", backend_config={"url": server.url, "socket_timeout": 1})
        await memory.add_session_to_memory(make_session(turns=[("user", "I keep bees"), ("user", "My car is blue")]))
        assert server.proc is not None
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            with pytest.raises(BackendUnavailableError, match=r"did not answer within 1 s while searching"):
                await memory.search_memory(app_name="app", user_id="u1", query="bees")
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        for query, text in [("car", "My car is blue"), ("bees", "I keep bees"), ("car", "My car is blue")]:
            res = await memory.search_memory(app_name="app", user_id="u1", query=query)
            assert [m.content.parts[0].text for m in res.memories] == [text]
        await memory.close()
    finally:
        server.stop()


async def test_an_index_name_with_a_colon_cannot_see_another_index(redis_cfg: dict):
    """Index "a" indexes keys under "<prefix>a:m:"; index "a:m" must not write there."""
    outer = LongTermMemory(backend="redis", backend_config={**redis_cfg, "index": "a"})
    inner = LongTermMemory(backend="redis", backend_config={**redis_cfg, "index": "a:m"})
    await inner.add_session_to_memory(make_session(turns=[("user", "inner index secret")]))
    await outer.add_session_to_memory(make_session(turns=[("user", "outer index note")]))
    assert [
        m.content.parts[0].text
        for m in (await outer.search_memory(app_name="app", user_id="u1", query="index secret note")).memories
    ] == ["outer index note"]
    assert [
        m.content.parts[0].text
        for m in (await inner.search_memory(app_name="app", user_id="u1", query="index secret note")).memories
    ] == ["inner index secret"]
    assert inner.backend_instance.ns.count(":") == redis_cfg.get("prefix", "longterm:").count(":") + 1
    await outer.close()
    await inner.close()


async def test_erasing_a_session_or_a_user_over_many_batches_takes_exactly_those_memories(redis_cfg: dict):
    """2,400 memories of one user in two sessions (several erase and scan batches): scanning
    yields each once; erasing one session leaves exactly the other; erasing the user leaves
    nothing, while another user's memories stay."""
    from longterm.records import MemoryRecord, record_id

    memory = LongTermMemory(backend="redis", backend_config=redis_cfg)
    records = [
        MemoryRecord(
            id=record_id("app", user, f"s{i % 2}", f"e{i}"),
            app_name="app",
            user_id=user,
            session_id=f"s{i % 2}",
            event_id=f"e{i}",
            role="user",
            text=f"marker{i} of session s{i % 2}",
            timestamp=float(i),
        )
        for user, n in (("u1", 2400), ("u2", 3))
        for i in range(n)
    ]
    await memory.backend_instance.upsert(records)
    ids = [r.id async for r in memory.iter_records(app_name="app", user_id="u1")]
    assert len(ids) == len(set(ids)) == 2400
    assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s0") == 1200
    left = [r async for r in memory.iter_records(app_name="app", user_id="u1")]
    assert len(left) == 1200 and {r.session_id for r in left} == {"s1"}
    assert (await memory.search_memory(app_name="app", user_id="u1", query="marker2")).memories == []
    assert await memory.delete_memories(app_name="app", user_id="u1") == 1200
    assert await memory.count(app_name="app", user_id="u1") == 0
    assert (await memory.search_memory(app_name="app", user_id="u1", query="marker1")).memories == []
    assert await memory.count(app_name="app", user_id="u2") == 3
    await memory.close()


async def test_a_save_leaves_out_events_the_ledger_holds_when_its_script_runs(
    redis_cfg: dict, monkeypatch: pytest.MonkeyPatch
):
    """Another worker saved a session and the user erased it after this worker read the ledger
    (here: every read of it saw nothing yet). The save script itself leaves out the events the
    ledger holds, so no erase can slip between the last read and the write."""
    memory = LongTermMemory(backend="redis", backend_config=redis_cfg, app_name="app")
    session = make_session(turns=[("user", f"zebra fact {i}") for i in range(3)])
    await memory.add_session_to_memory(session)
    assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s1") == 3
    monkeypatch.setattr(memory.backend_instance, "_ledger_saved", lambda scope, session_id: set())
    assert (await memory.add_session_to_memory(session)).new_events == 3  # planned from a stale read
    assert await memory.count(app_name="app", user_id="u1") == 0
    assert (await memory.add_session_to_memory(session, reconsider=True)).saved == 3  # on purpose: back
    await memory.close()


# -- prefixes of several segments ----------------------------------------------------------------

#: (prefix, index) pairs whose keys would overlap in a naive ``prefix index:`` layout: the second's
#: namespace starts with the first's, or its records' keys fall under the first's RediSearch PREFIX.
OVERLAPPING = [
    (("{p}:", "i"), ("{p}:i:m:", "i")),  # a one-segment store, and a prefix under its ``p:i:m:`` PREFIX
    (("{p}:a:", "mem"), ("{p}:a:mem:", "m")),  # ``p:a:mem:m:`` against ``p:a:`` + ``mem`` + ``:m:``
    (("{p}:", "a"), ("{p}:a:", "a")),  # one a prefix of the other
]


@pytest.mark.parametrize("pair", OVERLAPPING, ids=["legacy-under-prefix", "nested", "prefix-of-prefix"])
async def test_stores_with_prefixes_of_several_segments_never_see_each_others_keys(redis_cfg: dict, pair):
    """Same app, user, session and event ids (so the same record ids) in two stores whose
    prefixes overlap: saves, searches, counts, scopes, indices and ledgers stay apart, and
    erasing one leaves the other whole. Today's main refuses ``myapp:memory:`` outright."""
    import uuid

    p = f"t{uuid.uuid4().hex[:8]}"
    stores = []
    for prefix, index in pair:
        cfg = {"url": redis_cfg["url"], "prefix": prefix.format(p=p), "index": index}
        stores.append(LongTermMemory(backend="redis", backend_config=cfg))
    words = ("alpha", "omega")
    turns = lambda w: [("user", f"shared {w} fact {i}") for i in range(3)]  # noqa: E731
    for memory, word in zip(stores, words, strict=True):
        assert (await memory.add_session_to_memory(make_session(turns=turns(word)))).saved == 3

    async def texts(memory: LongTermMemory) -> set[str]:
        found = await memory.search_memory(app_name="app", user_id="u1", query="shared fact alpha omega")
        return {m.content.parts[0].text for m in found.memories}

    for memory, word, (_, index) in zip(stores, words, pair, strict=True):
        assert await texts(memory) == {f"shared {word} fact {i}" for i in range(3)}
        assert await memory.count(app_name="app", user_id="u1") == 3
        assert await memory.scopes() == [("app", "u1", 3)]
        assert await memory.indices() == [index]
    # Erase the first: the second keeps every memory, and its ledger still holds its own events.
    assert await stores[0].delete_memories(app_name="app", user_id="u1") == 3
    assert await stores[0].count(app_name="app", user_id="u1") == 0
    assert await stores[0].scopes() == []
    assert await texts(stores[1]) == {f"shared omega fact {i}" for i in range(3)}
    assert await stores[1].count(app_name="app", user_id="u1") == 3
    assert (await stores[1].add_session_to_memory(make_session(turns=turns("omega")))).saved == 0
    # And the other way round, with the first saved again.
    assert (await stores[0].add_session_to_memory(make_session(turns=turns("alpha")), reconsider=True)).saved == 3
    assert await stores[1].delete_memories(app_name="app", user_id="u1") == 3
    assert await texts(stores[0]) == {f"shared alpha fact {i}" for i in range(3)}
    for memory in stores:
        await memory.close()


def test_prefixes_of_several_segments_are_accepted_and_keys_keep_one_layout_each():
    assert RedisConfig(prefix="myapp:memory:").prefix == "myapp:memory:"
    assert RedisBackend(prefix="myapp:memory:", index="travel").ns == "myapp:memory:{travel}:"
    assert RedisBackend(prefix="longterm:", index="travel").ns == "longterm:travel:"  # the previous release's
    for bad in ("myapp:memory", "my{app}:", "a::", ":"):
        with pytest.raises(ConfigurationError, match="prefix"):
            LongTermMemory(backend="redis", backend_config={"prefix": bad})


# -- fork --------------------------------------------------------------------------------------


def in_a_forked_child(child: Callable[[], int], seconds: float = 15.0) -> int:
    """Run ``child`` in an ``os.fork()`` child; its exit code (``child``'s return), killed past ``seconds``."""
    import os
    import signal
    import time

    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 99
        try:
            code = child()
        finally:
            os._exit(code)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"the forked child did not finish within {seconds:g} s (a hang)")


def test_after_fork_the_child_opens_its_own_connections_and_the_parents_stay_good(redis_cfg: dict):
    """A memory used, then fork: the child (after the hook) saves and counts on connections of
    its own; the parent's pooled connections were neither closed nor shared, and still answer."""
    import asyncio as aio

    backend = RedisBackend(**redis_cfg)
    from longterm.records import MemoryRecord, Scope, record_id

    def rec(i: int) -> MemoryRecord:
        return MemoryRecord(
            id=record_id("app", "u1", "s", f"e{i}"), app_name="app", user_id="u1", session_id="s",
            event_id=f"e{i}", role="user", text=f"forked fact {i}", timestamp=float(i),
        )  # fmt: skip

    scope = Scope(app_name="app", user_id="u1")
    backend.runner.call("saving", backend._write, ([rec(0)], None))
    parent_pool = backend._r.connection_pool
    before = set(map(id, parent_pool._connections))

    def child() -> int:
        backend._forget_after_fork()
        assert backend._r.connection_pool is not parent_pool
        backend.runner.call("saving", backend._write, ([rec(1)], None))
        return 0 if backend.runner.call("counting", backend._count, (scope,)) == 2 else 1

    assert in_a_forked_child(child) == 0
    assert set(map(id, parent_pool._connections)) == before  # nothing of the parent's was touched
    assert backend.runner.call("counting", backend._count, (scope,)) == 2
    assert backend._r.ping()
    aio.run(backend.close())


# -- purge ---------------------------------------------------------------------------------------


async def test_purge_rewrites_the_aof_so_erased_words_leave_the_files(tmp_path: Path):
    """Redis appends every write to its AOF: an erased memory's words stay in the file until the
    AOF is rewritten. ``purge`` rewrites it (and waits): then no file of the server holds them."""
    server = RedisServer(persist=True)
    server.start(tmp_path)
    try:
        memory = LongTermMemory(backend="redis", backend_config={"url": server.url})
        await memory.add_session_to_memory(make_session(turns=[("user", "my pin is zqxjvorpal")]))
        await memory.add_session_to_memory(make_session("s2", turns=[("user", "I keep bees")]))
        assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s1") == 1

        def files_with(word: bytes) -> list[str]:
            return [str(f) for f in tmp_path.rglob("*") if f.is_file() and word in f.read_bytes()]

        assert files_with(b"zqxjvorpal")  # what the erase left behind
        await memory.backend_instance._run("purging", memory.backend_instance._purge)
        assert files_with(b"zqxjvorpal") == []
        await memory.close()
        server.kill()  # what was not erased is still persisted: a crash and a restart keep it
        server.restart()
        again = LongTermMemory(backend="redis", backend_config={"url": server.url})
        assert await again.count(app_name="app", user_id="u1") == 1
        assert [
            m.content.parts[0].text
            for m in (await again.search_memory(app_name="app", user_id="u1", query="bees")).memories
        ] == ["I keep bees"]
        await again.close()
    finally:
        server.stop()


async def test_a_store_written_before_session_tags_gets_them_once_and_reads_neighbours(redis_cfg: dict):
    """A store as the previous release left it (an index without the ``session`` field, records
    without their tags, ``ns meta`` not noting them): opened, every record is tagged once, and a
    session of 2,500 turns (three pages of its query) reads its neighbours; the note is kept."""
    from longterm.backends.redis.scripts import INDEX_ON, SCHEMA, SESSION_FIELD
    from longterm.backends.redis.upgrade import SESSIONS_KEY
    from longterm.records import MemoryRecord, Scope, record_id

    def turn(sid: str, i: int) -> MemoryRecord:
        rid = record_id("app", "u1", sid, f"e{i:04}")
        return MemoryRecord(id=rid, app_name="app", user_id="u1", session_id=sid, event_id=f"e{i:04}", text=f"t{i}")

    old = RedisBackend(**redis_cfg)
    await old.upsert([turn("long", i).model_copy(update={"timestamp": float(i)}) for i in range(2500)])
    await old.upsert([turn("short", i) for i in range(3)])
    r, ns, index = old._r, old.ns, old.index_name
    r.execute_command("FT.DROPINDEX", index)  # the records stay
    old_schema = SCHEMA[: len(SCHEMA) - len(SESSION_FIELD)]
    r.execute_command("FT.CREATE", index, *INDEX_ON, ns + "m:", *old_schema)
    for key in r.scan_iter(match=ns + "m:*", count=1000):
        r.hdel(key, "session")
    r.hdel(ns + "meta", SESSIONS_KEY)
    await old.close()

    store = RedisBackend(**redis_cfg)
    scope = Scope(app_name="app", user_id="u1")
    anchors = [turn("long", 0), turn("long", 1700), turn("long", 2499), turn("short", 1)]
    got = await store.neighbours(scope, anchors, 2, 2)
    assert [([b.event_id for b in before], [a.event_id for a in after]) for before, after in got] == [
        ([], ["e0001", "e0002"]),
        (["e1698", "e1699"], ["e1701", "e1702"]),
        (["e2497", "e2498"], []),
        (["e0000"], ["e0002"]),
    ]
    assert r.hget(ns + "meta", SESSIONS_KEY) == b"1"
    assert all(r.hexists(key, "session") for key in r.scan_iter(match=ns + "m:*", count=1000))
    await store.close()
