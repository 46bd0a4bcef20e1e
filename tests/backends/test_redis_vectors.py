"""A Redis store keeps its vectors whole, against the real Redis Stack server the test setup starts.

What a user notices: a memory opened without the store's embedder (one of the user's own, not
built in) saves text only, found by full text at once, and the next memory opened with the
embedder gives those records their vectors in the background; ``embed_later`` saves text first
and embeds after; a vector written straight into the store changed since it was read is never
written over the new words; a store holding a vector of the wrong size (which RediSearch leaves
out of its index whole: not even full text found that record) is repaired once when opened;
``longterm doctor`` counts the records without a vector and ``longterm reembed`` fills them.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import redis
from click.testing import CliRunner, Result

from longterm import LongTermMemory, Scope
from longterm.backends.redis import RedisBackend
from longterm.cli import cli
from longterm.retrieval.embedders import HashingEmbedder, Kind, registry
from tests.conftest import make_session


class Custom(HashingEmbedder):
    """A user's own embedder: its id names no built-in one (``--embedder custom`` on the CLI)."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__(dim)
        self.id = "custom-e"


class Gated(Custom):
    """Embeds passages only once ``gate`` is set (a slow model); queries at once."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate

    def embed(self, texts: list[str], kind: Kind = "passage") -> np.ndarray:
        if kind == "passage" and not self.gate.wait(30):
            raise TimeoutError("the test never opened the gate")
        return super().embed(texts, kind=kind)


@pytest.fixture(autouse=True)
def _custom(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._factories, "custom", Custom)


@pytest.fixture
def cfg(services, tmp_path: Path) -> dict[str, Any]:
    return cast(dict, services("redis").config(tmp_path))


def open_redis(cfg: dict[str, Any], embedder: object = None, **options: Any) -> LongTermMemory:
    return LongTermMemory(backend="redis", backend_config={**cfg, **options}, embedder=embedder, app_name="app")


def engine(memory: LongTermMemory) -> RedisBackend:
    return cast(RedisBackend, memory.backend_instance)


def client(cfg: dict[str, Any]) -> redis.Redis:
    return redis.Redis.from_url(cfg["url"], protocol=2)


async def save(memory: LongTermMemory, sid: str, text: str, user: str = "u1") -> None:
    await memory.add_session_to_memory(make_session(sid, user=user, turns=[("user", text)]))


async def arms(memory: LongTermMemory, query: str) -> dict[str, dict[str, float]]:
    """Each hit's text and the arms that found it (with their scores)."""
    res = await memory.search_memory(app_name="app", user_id="u1", query=query)
    return {m.content.parts[0].text: m.custom_metadata["arms"] for m in res.memories}


def sizes(r: redis.Redis, ns: str) -> dict[str, int]:
    """Each record's text and the size in bytes of its vector (0: none)."""
    out = {}
    for key in r.scan_iter(match=f"{ns}m:*"):
        out[json.loads(r.hget(key, "doc"))["text"]] = r.hstrlen(key, "embedding")
    return out


def waiting(r: redis.Redis, ns: str) -> int:
    return int(r.zcard(f"{ns}unembedded"))


async def drained(r: redis.Redis, ns: str) -> None:
    """Until the background embedder has emptied the list (its work, waited for without timing it)."""
    for _ in range(1000):
        if not waiting(r, ns):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{waiting(r, ns)} records still wait for their vectors")


async def test_a_save_without_the_stores_embedder_is_found_by_words_then_embedded_by_the_next_memory(cfg):
    made = open_redis(cfg, Custom())
    await save(made, "s1", "I bought a red bicycle")
    ns = engine(made).ns
    await made.close()
    r = client(cfg)

    plain = open_redis(cfg)  # as `LongTermMemory()` in another script, or `longterm import`: no embedder
    await save(plain, "s2", "my puppy chews shoes")  # was refused: "this memory has none"
    assert list(await arms(plain, "puppy")) == ["my puppy chews shoes"]  # full text finds it at once
    await plain.close()
    assert sizes(r, ns) == {"I bought a red bicycle": 128, "my puppy chews shoes": 0} and waiting(r, ns) == 1

    again = open_redis(cfg, Custom())  # not embed_later: it drains what waits all the same
    await again.count(app_name="app", user_id="u1")  # opened: the background embedder starts
    await drained(r, ns)
    assert sizes(r, ns) == {"I bought a red bicycle": 128, "my puppy chews shoes": 128}
    assert (await arms(again, "puppy shoes"))["my puppy chews shoes"]["vector"] > 0.5  # found by its vector
    await again.close()


async def test_embed_later_saves_text_first_and_embeds_in_the_background(cfg):
    gate = threading.Event()
    memory = open_redis(cfg, Gated(gate), embed_later=True)
    try:
        await asyncio.wait_for(save(memory, "s1", "my puppy chews shoes"), 10)  # never waits for the model
        r, ns = client(cfg), engine(memory).ns
        assert sizes(r, ns) == {"my puppy chews shoes": 0} and waiting(r, ns) == 1
        found = await arms(memory, "puppy")  # found by its words meanwhile, not by a vector
        assert list(found) == ["my puppy chews shoes"] and "vector" not in found["my puppy chews shoes"]
        gate.set()
        await drained(r, ns)
        assert sizes(r, ns) == {"my puppy chews shoes": 128}
        assert (await arms(memory, "puppy shoes"))["my puppy chews shoes"]["vector"] > 0.5
    finally:
        gate.set()
        await memory.close()


async def test_a_vector_made_from_words_since_changed_is_not_written_and_the_record_stays_listed(cfg):
    made = open_redis(cfg, Custom())
    await save(made, "s1", "I bought a red bicycle")
    await made.close()
    plain = open_redis(cfg)
    await save(plain, "s2", "my puppy chews shoes")
    backend = engine(plain)
    read = backend._unembedded(10)  # what the background embedder read
    assert [text for _, text in read] == ["my puppy chews shoes"]
    (record,) = [r async for r in backend.scan(Scope(app_name="app", user_id="u1")) if r.session_id == "s2"]
    await backend.upsert([record.model_copy(update={"text": "my kitten chews shoes"})])  # changed meanwhile
    backend._write_vectors([key for key, _ in read], Custom().embed(["my puppy chews shoes"]))
    r, ns = client(cfg), backend.ns
    assert sizes(r, ns)["my kitten chews shoes"] == 0 and waiting(r, ns) == 1  # still listed, no stale vector
    assert [text for _, text in backend._unembedded(10)] == ["my kitten chews shoes"]
    await plain.close()


def indexed(r: redis.Redis, ns: str) -> int:
    """How many records RediSearch holds in the store's index."""
    return int(r.execute_command("FT.SEARCH", f"{ns}search", "*", "LIMIT", 0, 0)[0])


def poison(r: redis.Redis, ns: str, text: str, floats: int) -> None:
    """What an earlier release left: ``text``'s vector of ``floats`` floats, in a store whose vectors were
    never checked against its index (no mark, no dimension recorded)."""
    (key,) = [k for k in r.scan_iter(match=f"{ns}m:*") if json.loads(r.hget(k, "doc"))["text"] == text]
    r.hset(key, "embedding", np.ones(floats, dtype=np.float32).tobytes())
    r.hdel(f"{ns}meta", "vector_sizes", "embedder_dim")


async def test_a_store_holding_a_vector_of_the_wrong_size_is_repaired_once_when_opened(cfg):
    made = open_redis(cfg, Custom())
    for sid, text in [("s1", "I bought a red bicycle"), ("s2", "my red bicycle has a bell"), ("s3", "my puppy")]:
        await save(made, sid, text)
    ns = engine(made).ns
    await made.close()
    r = client(cfg)
    assert r.hget(f"{ns}meta", "vector_sizes") == b"1"  # a store made now only notes it
    poison(r, ns, "my puppy", 48)
    assert indexed(r, ns) == 2  # RediSearch left the record out of its index whole: not even words found it

    again = open_redis(cfg, Custom())
    found = await arms(again, "puppy")  # its vector dropped on opening: its words find it again
    assert next(iter(found)) == "my puppy" and "fulltext" in found["my puppy"]
    assert indexed(r, ns) == 3
    await drained(r, ns)  # and its vector made again, in the background
    assert set(sizes(r, ns).values()) == {128}
    assert (await arms(again, "my puppy"))["my puppy"]["vector"] > 0.5
    await again.close()
    assert r.hmget(f"{ns}meta", "vector_sizes", "embedder_dim") == [b"1", b"32"]

    poison(r, ns, "my puppy", 48)  # once: behind its mark, a store is not read through again
    r.hset(f"{ns}meta", mapping={"vector_sizes": "1", "embedder_dim": "32"})
    third = open_redis(cfg, Custom())
    await third.count(app_name="app", user_id="u1")  # opened
    assert indexed(r, ns) == 2 and sizes(r, ns)["my puppy"] == 48 * 4
    await third.close()


def run(cfg: dict[str, Any], *args: str) -> Result:
    """``longterm --backend redis --config CFG ARGS`` in this process."""
    return CliRunner().invoke(cli, ["--backend", "redis", "--config", json.dumps(cfg), *args], catch_exceptions=False)


def doctor(cfg: dict[str, Any]) -> dict[str, dict[str, str]]:
    out = run(cfg, "--index", "app", "doctor", "--json")
    return {row["check"]: row for row in json.loads(out.stdout[out.stdout.index("[") :])}


def save_sync(memory: LongTermMemory, sid: str, text: str) -> None:
    try:
        memory.add_session_to_memory_sync(make_session(sid, turns=[("user", text)]))
    finally:
        memory.close_sync()


def test_doctor_counts_records_without_vectors_and_reembed_fills_them(cfg):  # the CLI runs its own loop
    save_sync(open_redis(cfg, Custom()), "s1", "I play the cello")
    save_sync(open_redis(cfg, Custom()), "s2", "My cello teacher is Ines")
    save_sync(open_redis(cfg, Custom()), "s3", "I practise daily")
    assert doctor(cfg)["vectors"]["status"] == "ok"
    r, ns = client(cfg), f"{cfg['prefix']}app:"
    for key in r.scan_iter(match=f"{ns}m:*"):  # what a save without the embedder left before: no vector, not listed
        if json.loads(r.hget(key, "doc"))["text"] != "I play the cello":
            r.hdel(key, "embedding")
    save_sync(open_redis(cfg), "s4", "I tune it every week")  # and one saved without it now: listed

    vectors = doctor(cfg)["vectors"]
    assert vectors["status"] == "fail", vectors  # two are not even waiting for one
    assert "3 memories have no vector" in vectors["found"] and "'custom-e'" in vectors["found"]
    assert "1 of them wait for one" in vectors["found"] and "longterm reembed" in vectors["fix"]

    refused = run(cfg, "reembed")  # the store's embedder is not built in: it must be named
    assert refused.exit_code == 1 and "'custom-e'" in refused.output and "--embedder" in refused.output
    out = run(cfg, "reembed", "--embedder", "custom")
    assert out.exit_code == 0, out.output
    assert "index 'app': 3 memories given their vectors" in out.output
    assert set(sizes(r, ns).values()) == {128} and waiting(r, ns) == 0
    assert doctor(cfg)["vectors"]["status"] == "ok"


def test_doctor_warns_of_records_that_wait_for_their_vectors(cfg):
    save_sync(open_redis(cfg, Custom()), "s1", "I play the cello")
    save_sync(open_redis(cfg), "s2", "My cello teacher is Ines")
    vectors = doctor(cfg)["vectors"]
    assert vectors["status"] == "warn", vectors  # waiting: the embedder embeds them when opened
    assert "1 memories have no vector" in vectors["found"] and "1 of them wait for one" in vectors["found"]
