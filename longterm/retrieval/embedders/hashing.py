"""The hashing embedder: feature hashing of stemmed terms, no model (tests, a fallback)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...errors import ConfigurationError
from ..text import index_terms
from .base import Kind, need_numpy, normalize

if TYPE_CHECKING:
    import numpy as np


class HashingEmbedder:
    """Feature hashing of stemmed terms: deterministic, instant, no model.

    It knows no synonyms, so it is no semantic search; it exists for tests of our own
    logic (vector plumbing, fusion, schema checks) and as a zero-dependency fallback.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ConfigurationError("HashingEmbedder dim must be at least 8.")
        need_numpy("The hashing embedder")
        self.dim = dim
        self.id = f"hashing-v1-{dim}"

    def _one(self, text: str) -> np.ndarray:
        import numpy as np

        v = np.zeros(self.dim, dtype=np.float32)
        for term in index_terms(text):
            h = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return v

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize(np.stack([self._one(t) for t in texts]))
