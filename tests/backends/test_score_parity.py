"""Scores mean the same on every backend: a threshold chosen on one carries to another.

Against the real engines (tests/services): one fixed corpus of a user's conversation, 24
questions. On every engine but mem0 (vectors only, its own similarity) each question's top
hit scores within 0.1 of local's, a question about nothing stored scores under 0.2, and
``min_score`` keeps the same memories. Before the core calibrated scores, one hit scored 1.5
on local, 3.2 on qdrant and 29.2 on redis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from longterm import LongTermMemory

CORPUS = [
    "My flight to Bangkok leaves on March 3rd",
    "I am vegetarian and I love Thai food",
    "My sister Ana lives in Porto with her two cats",
    "I work as a nurse at the children's hospital",
    "My favourite band is Radiohead",
    "I started learning the cello last autumn",
    "Our wedding anniversary is on June 12th",
    "I am allergic to peanuts and shellfish",
    "My car is a blue Volvo estate from 2015",
    "I run five kilometres every Sunday morning",
    "My son Leo starts school in September",
    "The wifi password at the cabin is fjord2024",
    "I prefer window seats on long flights",
    "My dentist appointment is next Thursday at nine",
    "I grew up in a small town near Lyon",
    "We adopted a dog called Biscuit in May",
    "I am reading a novel by Ursula Le Guin",
    "My manager's name is Priya",
    "I want to visit Iceland to see the northern lights",
    "My blood type is O negative",
]
QUESTIONS = [
    "when does my flight to Bangkok leave?",
    "what food do I like?",
    "where does my sister live?",
    "what is my job?",
    "which band do I like?",
    "what instrument am I learning?",
    "when is our wedding anniversary?",
    "what am I allergic to?",
    "what car do I drive?",
    "how far do I run on Sunday?",
    "when does Leo start school?",
    "what is the wifi password at the cabin?",
    "which seats do I prefer on flights?",
    "when is my dentist appointment?",
    "where did I grow up?",
    "what is my dog called?",
    "what novel am I reading?",
    "what is my manager's name?",
    "where do I want to travel to see the northern lights?",
    "what is my blood type?",
    "do I have cats in Porto?",
    "what did I say about Thai restaurants?",
    "is the Volvo blue?",
    "what is the capital of Mongolia?",  # nothing stored
]
ENGINES = ["local", "redis", "opensearch", "qdrant-edge", "qdrant-local"]


async def _answers(services, tmp_path: Path, engine: str) -> dict[str, list[tuple[str, float]]]:
    provider = services(engine)
    memory = LongTermMemory(backend=provider.name, backend_config=provider.config(tmp_path / engine), app_name="app")
    try:
        await memory.add(CORPUS, user_id="ann", session_id="s1")
        out = {}
        for q in QUESTIONS:
            out[q] = [(h.text, h.score or 0.0) for h in await memory.search(q, user_id="ann", top_k=5)]
        return out
    finally:
        await memory.close()


@pytest.fixture(scope="module")
def by_engine(services, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[tuple[str, float]]]]:
    import asyncio

    root = tmp_path_factory.mktemp("scores")
    return {e: asyncio.run(_answers(services, root, e)) for e in ENGINES}


@pytest.mark.parametrize("engine", ENGINES[1:])
def test_each_top_hit_scores_within_a_tenth_of_local(by_engine, engine: str):
    local, other = by_engine["local"], by_engine[engine]
    for q in QUESTIONS:
        top_local = local[q][0][1] if local[q] else 0.0
        top_other = other[q][0][1] if other[q] else 0.0
        assert abs(top_local - top_other) <= 0.1, (q, local[q][:1], other[q][:1])


@pytest.mark.parametrize("engine", ENGINES)
def test_scores_are_zero_to_one_and_nothing_stored_scores_low(by_engine, engine: str):
    answers = by_engine[engine]
    assert all(0.0 <= s <= 1.0 for hits in answers.values() for _, s in hits)
    assert all(s < 0.2 for _, s in answers["what is the capital of Mongolia?"])
    strong = [q for q in QUESTIONS[:20] if answers[q] and answers[q][0][1] >= 0.5]
    assert len(strong) >= 15  # most questions find their memory with most of their words


@pytest.mark.parametrize("engine", ENGINES[1:])
@pytest.mark.parametrize("threshold", [0.3, 0.7])
def test_min_score_keeps_the_same_memories_everywhere(by_engine, engine: str, threshold: float):
    for q in QUESTIONS:
        kept_local = {t for t, s in by_engine["local"][q] if s >= threshold}
        kept_other = {t for t, s in by_engine[engine][q] if s >= threshold}
        assert kept_local == kept_other, q


HYBRID = ["local", "redis", "opensearch", "qdrant-edge"]


@pytest.fixture(scope="module")
def hybrid_by_engine(
    services, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, list[tuple[str, float]]]]:
    """The same with vectors (a deterministic embedder): the vector arm's cosine joins the score."""
    import asyncio

    root = tmp_path_factory.mktemp("hybrid-scores")
    embedder = {"name": "hashing", "dim": 64}

    async def answers(engine: str) -> dict[str, list[tuple[str, float]]]:
        provider = services(engine)
        config = {**provider.config(root / engine), "embedder": embedder}
        memory = LongTermMemory(backend=provider.name, backend_config=config, app_name="app")
        try:
            await memory.add(CORPUS, user_id="ann", session_id="s1")
            return {q: [(h.text, h.score or 0.0) for h in await memory.search(q, user_id="ann")] for q in QUESTIONS}
        finally:
            await memory.close()

    return {e: asyncio.run(answers(e)) for e in HYBRID}


@pytest.mark.parametrize("engine", HYBRID[1:])
def test_with_vectors_each_top_hit_scores_within_a_tenth_of_local(hybrid_by_engine, engine: str):
    local, other = hybrid_by_engine["local"], hybrid_by_engine[engine]
    for q in QUESTIONS:
        top_local = local[q][0][1] if local[q] else 0.0
        top_other = other[q][0][1] if other[q] else 0.0
        assert abs(top_local - top_other) <= 0.1, (q, local[q][:1], other[q][:1])
