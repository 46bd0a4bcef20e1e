"""Synthetic conversational data for the cost benchmarks: deterministic, any size.

Texts are 8-30 words drawn from a Zipf-distributed vocabulary (a few very common words,
a long tail), spread over users and sessions like a chat log. Retrieval *quality* is
measured on LoCoMo (bench/locomo.py); these only need realistic term statistics.
"""

from __future__ import annotations

import numpy as np

VOCAB_SIZE = 20_000


def _vocab(rng: np.random.Generator) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = set()
    while len(words) < VOCAB_SIZE:
        n = int(rng.integers(3, 10))
        words.add("".join(rng.choice(letters, n)))
    return sorted(words)


def texts(n: int, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = _vocab(rng)
    ranks = np.minimum(rng.zipf(1.2, size=n * 30), VOCAB_SIZE) - 1
    lengths = rng.integers(8, 31, size=n)
    out, pos = [], 0
    for length in lengths:
        out.append(" ".join(vocab[r] for r in ranks[pos : pos + length]))
        pos += length
    return out


def queries(n: int, seed: int = 11) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = _vocab(np.random.default_rng(7))
    picks = rng.integers(50, 5000, size=(n, 3))  # mid-frequency words, like real questions
    return [" ".join(vocab[i] for i in row) for row in picks]


def sessions(n_events: int, users: int = 100, per_session: int = 100, app: str = "bench"):
    """Yield session dicts with ``per_session`` user events each, round-robin over users."""
    all_texts = texts(n_events)
    for s, start in enumerate(range(0, n_events, per_session)):
        user = f"user-{s % users}"
        chunk = all_texts[start : start + per_session]
        yield {
            "id": f"s{s}",
            "app_name": app,
            "user_id": user,
            "events": [
                {
                    "id": f"s{s}-e{i}",
                    "author": "user",
                    "timestamp": 1_700_000_000 + start + i,
                    "content": {"role": "user", "parts": [{"text": t}]},
                }
                for i, t in enumerate(chunk)
            ],
        }
