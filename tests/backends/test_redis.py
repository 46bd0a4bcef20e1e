"""Redis-specific behaviour, against real redis-server processes started here."""

from __future__ import annotations

import asyncio
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
    memory = LongTermMemory(backend="redis", backend_config={**redis_cfg, "embedder": "hashing"})
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

    memory.backend_instance.embedder = BrokenQueries(256)
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
    memory = LongTermMemory(backend="redis", backend_config={**redis_cfg, "max_connections": 4})
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

    memory = LongTermMemory(backend="redis", backend_config={**redis_cfg, "embedder": HashingEmbedder(64)})
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
    assert await memory.delete_memory(app_name="app", user_id="u1") == 1200
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
    memory = LongTermMemory(backend="redis", backend_config=redis_cfg)
    session = make_session(turns=[("user", f"zebra fact {i}") for i in range(3)])
    await memory.add_session_to_memory(session)
    assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s1") == 3
    monkeypatch.setattr(memory.backend_instance, "_ledger_saved", lambda scope, session_id: set())
    assert (await memory.add_session_to_memory(session)).new_events == 3  # planned from a stale read
    assert await memory.count(app_name="app", user_id="u1") == 0
    assert (await memory.add_session_to_memory(session, reconsider=True)).saved == 3  # on purpose: back
    await memory.close()
