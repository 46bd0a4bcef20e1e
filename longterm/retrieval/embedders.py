"""Embedders: text to vectors, for backends that search by meaning as well as by words.

The seam: an ``Embedder`` has ``id`` (model and settings, stable: stores remember it and
refuse vectors of another id), ``dim``, and ``async embed(texts, kind=)`` returning a
float32 array of shape (len(texts), dim), L2-normalised. ``kind`` is "passage" for what is
stored and "query" for what is asked: some models (E5) encode the two differently.

``resolve_embedder(x)`` accepts None, an instance, a registered name ("hashing", ...) or
a dict ``{"name": ..., **options}``, so an embedder can come from ``backend_config``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, Callable, Literal, Protocol, runtime_checkable

import numpy as np

from ..errors import ConfigurationError
from .text import index_terms

Kind = Literal["passage", "query"]


@runtime_checkable
class Embedder(Protocol):
    id: str
    dim: int

    async def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray: ...


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

    async def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize(np.stack([self._one(t) for t in texts]))


_factories: dict[str, Callable[..., Embedder]] = {"hashing": HashingEmbedder}


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


async def embed_in_thread(fn: Callable[[list[str]], Any], texts: Sequence[str]) -> np.ndarray:
    """Run a CPU-bound model off the event loop."""
    return normalize(await asyncio.to_thread(fn, list(texts)))


