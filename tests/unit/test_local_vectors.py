"""The local backend's vector scan: large scopes scan int8 codes, and the answer must be
the one the exact float32 product gives (same records, same order, same scores)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from longterm import LongTermMemory
from longterm.retrieval import vector_scan as local_vectors
from longterm.retrieval.embedders import HashingEmbedder, normalize
from longterm.retrieval.vector_scan import ScopeVectors
from tests.conftest import make_session


def clustered(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Unit vectors in tight clusters: many near-ties, where a coarse scan would err."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((n // 50, dim))
    return normalize(
        (centers[rng.integers(0, len(centers), n)] + 0.15 * rng.standard_normal((n, dim))).astype(np.float32)
    )


def exact_top(matrix: np.ndarray, q: np.ndarray, n: int) -> list[int]:
    return [int(i) for i in np.argsort(-(matrix @ q), kind="stable")[:n]]


@pytest.fixture(params=["simsimd", "numpy"])
def scan_engine(request, monkeypatch):
    """Both ways the int8 codes are scanned: SIMD when simsimd is installed, numpy otherwise."""
    if request.param == "numpy":
        monkeypatch.setattr(local_vectors, "_simsimd", None)
    elif local_vectors._simsimd is None:
        pytest.fail("simsimd is not installed: `pip install -e '.[dev]'` (it is in the embeddings extra)")
    return request.param


@pytest.mark.parametrize("data", ["random", "clustered"])
def test_int8_scan_returns_the_exact_float32_answer(scan_engine, data):
    n, dim = 5000, 64
    matrix = (
        clustered(n, dim)
        if data == "clustered"
        else normalize(np.random.default_rng(1).standard_normal((n, dim)).astype(np.float32))
    )
    rowids = np.arange(1000, 1000 + n)
    scoped = ScopeVectors(rowids, matrix, quantize=True)
    assert scoped.quantized
    queries = normalize(np.random.default_rng(2).standard_normal((40, dim)).astype(np.float32))
    queries[:20] = matrix[:20] + 0.05 * queries[:20]  # near-duplicates of stored rows, too
    for q in queries:
        got = scoped.top(q, 10)
        assert [r - 1000 for r, _ in got] == exact_top(matrix, q, 10)
        assert np.allclose([s for _, s in got], np.sort(matrix @ q)[::-1][:10], atol=1e-6)


def test_a_dimension_that_is_always_zero_does_not_break_the_scale(scan_engine):
    matrix = normalize(np.random.default_rng(3).standard_normal((300, 16)).astype(np.float32))
    matrix[:, 5] = 0.0
    scoped = ScopeVectors(np.arange(300), matrix, quantize=True)
    q = normalize(np.random.default_rng(4).standard_normal((1, 16)).astype(np.float32))[0]
    got = scoped.top(q, 5)
    assert [r for r, _ in got] == exact_top(matrix, q, 5)
    assert all(np.isfinite(s) for _, s in got)


def test_asking_for_more_than_the_scope_holds_returns_all_of_it_best_first(scan_engine):
    matrix = normalize(np.random.default_rng(5).standard_normal((7, 8)).astype(np.float32))
    q = matrix[3]
    got = ScopeVectors(np.arange(7), matrix, quantize=True).top(q, 50)
    assert [r for r, _ in got] == exact_top(matrix, q, 7)
    assert ScopeVectors(np.arange(0), np.zeros((0, 8), np.float32), quantize=True).top(q, 5) == []


async def test_a_large_scope_answers_through_the_api_like_a_small_one(tmp_path: Path, monkeypatch, scan_engine):
    """Same hits and scores whether the scope is scanned in int8 or float32; scope kept.
    Without simsimd a large scope stays on the float32 product (numpy has no fast int8)."""
    turns = [
        ("user", f"note {i}: {w} and {v}")
        for i, (w, v) in enumerate(
            zip(
                ["tea", "rust", "opera", "kayak", "tax"] * 20,
                ["bread", "sql", "jazz", "tent", "visa"] * 20,
                strict=True,
            )
        )
    ]
    answers = {}
    for threshold in (10**9, 1):
        monkeypatch.setattr(local_vectors, "QUANTIZE_FROM", threshold)
        m = LongTermMemory(
            backend_config={"path": str(tmp_path / f"m{threshold}.db")}, embedder=HashingEmbedder(dim=64)
        )
        await m.add_session_to_memory(make_session(user="me", turns=turns))
        await m.add_session_to_memory(make_session(user="other", turns=[("user", "other's tea and bread")]))
        res = await m.search_memory(app_name="app", user_id="me", query="tea with bread")
        backend = (await m.located("app", "me")).backend  # the index "app" lives in
        scoped = backend._vectors.matrix(backend.conn, backend._scope("app", "me"))
        assert scoped.quantized == (threshold == 1 and scan_engine == "simsimd")
        answers[threshold] = [(x.content.parts[0].text, round(x.custom_metadata["score"], 6)) for x in res.memories]
        assert all("other's" not in text for text, _ in answers[threshold])
        await m.close()
    assert answers[1] == answers[10**9] and answers[1]
