"""Hybrid search: how an engine's two arms (full text, vectors) are searched and fused.

The seam: the engine core builds one ``Hybrid`` from an engine's ``HybridSettings``
(``config.hybrid``, re-exported here): ``embedder`` is the resolved embedder (None: full
text only), ``depth(top_k)`` how deep each arm looks, ``fuse(arms)`` merges them
(``retrieval.fusion``). Embedding the query and degrading to full text when that fails is
the core's (``core.embedding``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from typing_extensions import Unpack

from ..config.hybrid import DEFAULT_WEIGHTS, Fusion, HybridOptions, HybridSettings
from .embedders import Embedder, resolve_embedder
from .fusion import K, fuse

__all__ = ["Hybrid", "HybridOptions", "HybridSettings"]


class Hybrid:
    def __init__(self, **options: Unpack[HybridOptions]) -> None:
        self.embedder: Embedder | None = resolve_embedder(options.get("embedder"))
        self.fusion: Fusion = options.get("fusion", "convex")
        self.weights = {
            "fulltext": options.get("fulltext_weight", DEFAULT_WEIGHTS["fulltext"]),
            "vector": options.get("vector_weight", DEFAULT_WEIGHTS["vector"]),
        }
        self.candidates = options.get("candidates", 50)

    def depth(self, top_k: int) -> int:
        return top_k if self.embedder is None else max(top_k, self.candidates)

    def fuse(self, arms: Mapping[str, Sequence[tuple[K, float]]]) -> list[tuple[K, float, dict[str, float]]]:
        return fuse(self.fusion, arms, self.weights)
