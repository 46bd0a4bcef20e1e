"""Hybrid search in the local backend: vectors in the same file, fused by RRF, one
embedder per store, visible degradation, and other processes' writes seen."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from longterm import ConfigurationError, LongTermMemory
from longterm.backends.local import LocalBackend
from longterm.retrieval.embedders import HashingEmbedder, normalize
from tests.conftest import make_session

SYNONYMS = {"car": 0, "automobile": 0, "vehicle": 0, "dog": 1, "puppy": 1, "tax": 2}


class SynonymEmbedder:
    """Knows that car = automobile: a tiny stand-in for a semantic model."""

    id = "synonyms-test"
    dim = 8

    def embed(self, texts, *, kind="passage"):
        out = np.full((len(texts), self.dim), 0.01, dtype=np.float32)
        for i, t in enumerate(texts):
            for word, axis in SYNONYMS.items():
                if word in t.lower():
                    out[i, axis] += 1.0
        return normalize(out)


async def test_vector_arm_finds_what_words_cannot(tmp_path: Path):
    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, embedder=SynonymEmbedder())
    await m.add_session_to_memory(
        make_session(turns=[("user", "I just bought a new automobile"), ("user", "My tax form is late")])
    )
    res = await m.search_memory(app_name="app", user_id="u1", query="which car do I have?")
    assert res.memories[0].content.parts[0].text == "I just bought a new automobile"
    assert res.memories[0].custom_metadata["arms"].keys() == {"vector"}
    plain = LongTermMemory(backend_config={"path": str(tmp_path / "plain.db")})
    await plain.add_session_to_memory(make_session(turns=[("user", "I just bought a new automobile")]))
    assert (await plain.search_memory(app_name="app", user_id="u1", query="which car do I have?")).memories == []


async def test_both_arms_are_reported(tmp_path: Path):
    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db"), "embedder": "hashing"})
    await m.add_session_to_memory(make_session(turns=[("user", "bees make honey"), ("user", "cars need fuel")]))
    top = (await m.search_memory(app_name="app", user_id="u1", query="honey bees")).memories[0]
    assert top.content.parts[0].text == "bees make honey"
    assert set(top.custom_metadata["arms"]) == {"fulltext", "vector"}


async def test_another_embedder_is_refused(tmp_path: Path):
    path = str(tmp_path / "m.db")
    m = LongTermMemory(backend_config={"path": path}, embedder=HashingEmbedder(64))
    await m.add_session_to_memory(make_session())
    await m.close()
    other = LongTermMemory(backend_config={"path": path}, embedder=HashingEmbedder(128))
    with pytest.raises(ConfigurationError, match="Vectors of different embedders never mix"):
        await other.search_memory(app_name="app", user_id="u1", query="hiking")
    await other.close()
    # the same store stays usable for full text without an embedder, and in another index
    assert (
        await LongTermMemory(backend_config={"path": path}).search_memory(app_name="app", user_id="u1", query="hiking")
    ).memories
    ok = LongTermMemory(backend_config={"path": path, "index": "v128"}, embedder=HashingEmbedder(128))
    await ok.add_session_to_memory(make_session())
    await ok.close()


async def test_query_embedding_failure_degrades_visibly(tmp_path: Path):
    class Flaky(HashingEmbedder):
        def embed(self, texts, *, kind="passage"):
            if kind == "query":
                raise TimeoutError("model server timed out")
            return super().embed(texts, kind=kind)

    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, embedder=Flaky(64))
    await m.add_session_to_memory(make_session(turns=[("user", "bees make honey")]))
    res = await m.search_memory(app_name="app", user_id="u1", query="honey")
    assert res.memories[0].content.parts[0].text == "bees make honey"
    assert "query embedding failed" in res.memories[0].custom_metadata["degraded"]


async def test_writes_of_another_process_are_seen_and_deletes_forgotten(tmp_path: Path):
    path = tmp_path / "m.db"
    a = LocalBackend(path, embedder=SynonymEmbedder())
    b = LocalBackend(path, embedder=SynonymEmbedder())
    ma, mb = LongTermMemory(backend=a), LongTermMemory(backend=b)
    await ma.add_session_to_memory(make_session("s1", turns=[("user", "my dog is called Rex")]))
    assert (
        len((await ma.search_memory(app_name="app", user_id="u1", query="automobile")).memories) == 1
    )  # caches the matrix
    await mb.add_session_to_memory(make_session("s2", turns=[("user", "I drive a vehicle to work")]))
    res = await ma.search_memory(app_name="app", user_id="u1", query="automobile")
    assert res.memories[0].content.parts[0].text == "I drive a vehicle to work"
    await mb.delete_memory(app_name="app", user_id="u1", memory_id=res.memories[0].id)
    res = await ma.search_memory(app_name="app", user_id="u1", query="automobile")
    assert all(m.content.parts[0].text != "I drive a vehicle to work" for m in res.memories)
    await ma.close()
    await mb.close()


async def test_vectors_stay_in_scope(tmp_path: Path):
    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, embedder=SynonymEmbedder())
    await m.add_session_to_memory(make_session(user="victim", turns=[("user", "victim owns an automobile")]))
    await m.add_session_to_memory(make_session(user="me", turns=[("user", "I like tax law")]))
    res = await m.search_memory(app_name="app", user_id="me", query="car")
    assert all("victim" not in x.content.parts[0].text for x in res.memories)


async def test_a_store_another_memory_first_wrote_without_vectors_answers_from_full_text(tmp_path):
    """Both open an empty store (nothing recorded yet); the one without an embedder writes first.
    The other's first write judges its embedder as opening does: full text, said in every hit
    (it raised a ConfigurationError there, while opening that store says 'full text only')."""
    from longterm import LongTermMemory

    config = {"path": str(tmp_path / "m.db")}
    with_vectors = LongTermMemory(backend_config=config, embedder={"name": "hashing", "dim": 16}, app_name="a")
    plain = LongTermMemory(backend_config=config, app_name="a")
    try:
        assert await with_vectors.count(app_name="a", user_id="u") == 0  # opened: nothing recorded
        await plain.add("written first, without vectors", user_id="u")
        assert (await with_vectors.add("written second", user_id="u")).saved == 1
        hits = await with_vectors.search_memory(app_name="a", user_id="u", query="written")
        assert len(hits.memories) == 2
        assert all("full text only" in m.custom_metadata["degraded"] for m in hits.memories)
    finally:
        await with_vectors.close()
        await plain.close()
