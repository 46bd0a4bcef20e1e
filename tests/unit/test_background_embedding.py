"""Embedding later (``embed_later``, local engine): a save is not bound by the embedder.

What a user notices: the save returns while the model is still busy, the text is found
at once, the vectors follow (each record embedded once, in batches), a restart resumes
what was left, and a record whose text changed is embedded again.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path

import numpy as np

from longterm import LongTermMemory
from longterm.backends.local import LocalBackend
from longterm.testing import make_session
from tests.unit.test_local_hybrid import SynonymEmbedder


class Synonyms(SynonymEmbedder):
    """``SynonymEmbedder`` that counts the passages it embeds, and can be held or broken."""

    id = "synonyms-later"
    dim = 8

    def __init__(self, *, broken: bool = False) -> None:
        self.passages: Counter[str] = Counter()
        self.batches: list[int] = []
        self.release = threading.Event()
        self.release.set()
        self.broken = broken

    def embed(self, texts, *, kind="passage"):
        if kind == "passage":
            if self.broken:
                raise RuntimeError("the model is not loaded")
            self.release.wait(30)
            self.passages.update(texts)
            self.batches.append(len(texts))
        return super().embed(texts, kind=kind)


def _memory(path: Path, embedder: Synonyms) -> LongTermMemory:
    return LongTermMemory(backend=LocalBackend(path, embedder=embedder, embed_later=True))


async def _save_while_busy(memory: LongTermMemory, embedder: Synonyms, session: dict, **kwargs) -> None:
    """Save while the model is busy: the save must return all the same."""
    embedder.release.clear()
    await asyncio.wait_for(memory.add_session_to_memory(session, **kwargs), 10)
    embedder.release.set()


async def _arms(memory: LongTermMemory, query: str) -> list[tuple[str, set[str]]]:
    """Each hit's text and the search arms that found it (not what re-ranking added: the score a
    session neighbour lent, ``context``, or a time window's, ``when``)."""
    res = await memory.search_memory(app_name="app", user_id="u1", query=query)
    added = {"context", "when"}
    return [(m.content.parts[0].text, set(m.custom_metadata["arms"]) - added) for m in res.memories]


async def test_a_save_returns_while_the_model_works_and_its_text_is_found_at_once(tmp_path: Path):
    embedder = Synonyms()
    embedder.release.clear()  # the model is busy: embedding waits
    memory = _memory(tmp_path / "m.db", embedder)
    turns = [("user", "I just bought a new automobile"), ("user", "my puppy chews shoes")]
    await asyncio.wait_for(memory.add_session_to_memory(make_session(turns=turns)), 10)
    assert await _arms(memory, "automobile") == [("I just bought a new automobile", {"fulltext"})]
    assert await _arms(memory, "which car?") == []  # no vector yet: words alone cannot find it
    embedder.release.set()
    await memory.backend_instance.embed_backlog()
    assert (await _arms(memory, "which car?"))[0] == ("I just bought a new automobile", {"vector"})
    await memory.close()


async def test_each_record_is_embedded_once_in_batches(tmp_path: Path):
    embedder = Synonyms()
    memory = _memory(tmp_path / "m.db", embedder)
    texts = [f"note {i} about my car" for i in range(150)]
    session = make_session(turns=[("user", t) for t in texts])
    await _save_while_busy(memory, embedder, session)
    await _save_while_busy(memory, embedder, session)  # a replay writes nothing, embeds nothing
    await memory.backend_instance.embed_backlog()
    assert embedder.passages == Counter(texts)
    assert max(embedder.batches) > 1 and sum(embedder.batches) == len(texts)
    assert await memory.backend_instance.embed_backlog() == 0
    await memory.close()


async def test_what_was_left_unembedded_is_embedded_after_a_restart(tmp_path: Path):
    broken = Synonyms(broken=True)
    memory = _memory(tmp_path / "m.db", broken)
    await memory.add_session_to_memory(make_session(turns=[("user", "I just bought a new automobile")]))
    assert await _arms(memory, "automobile") == [("I just bought a new automobile", {"fulltext"})]
    await memory.close()

    working = Synonyms()
    again = _memory(tmp_path / "m.db", working)
    await again.backend_instance.embed_backlog()
    assert working.passages == Counter(["I just bought a new automobile"])
    assert await _arms(again, "which car?") == [("I just bought a new automobile", {"vector"})]
    await again.close()


async def test_a_record_whose_text_changed_is_embedded_again(tmp_path: Path):
    embedder = Synonyms()
    memory = _memory(tmp_path / "m.db", embedder)
    session = make_session(turns=[("user", "I just bought a new automobile")])
    await memory.add_session_to_memory(session)
    await memory.backend_instance.embed_backlog()
    session["events"][0]["content"]["parts"][0]["text"] = "I adopted a puppy"
    await _save_while_busy(memory, embedder, session, reconsider=True)
    await memory.backend_instance.embed_backlog()
    assert embedder.passages == Counter(["I just bought a new automobile", "I adopted a puppy"])
    backend = memory.backend_instance
    stored = backend._vectors.matrix(backend.conn, backend._scope("app", "u1")).matrix
    assert np.allclose(stored, embedder.embed(["I adopted a puppy"], kind="query"))  # not the automobile's
    await memory.close()


async def test_the_background_thread_embeds_without_being_asked(tmp_path: Path):
    embedder = Synonyms()
    memory = _memory(tmp_path / "m.db", embedder)
    await _save_while_busy(memory, embedder, make_session(turns=[("user", "I just bought a new automobile")]))
    for _ in range(500):  # the background thread's work, waited for without timing it
        if embedder.passages:
            break
        await asyncio.sleep(0.01)
    assert await memory.backend_instance.embed_backlog() == 0
    assert embedder.passages == Counter(["I just bought a new automobile"])
    await memory.close()
