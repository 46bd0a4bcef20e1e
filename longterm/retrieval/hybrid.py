"""Hybrid settings: what every engine with vectors accepts, and how its arms are fused.

The seam: an engine's config inherits ``HybridSettings`` (embedder, fusion, weights,
candidates) and the engine core builds one ``Hybrid`` from them: ``depth(top_k)`` is how
deep each arm looks, ``fuse(arms)`` merges them (``retrieval.fusion``). Embedding the
query and degrading to full text when that fails is the core's (``core.engine``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from .embedders import Embedder, resolve_embedder
from .fusion import DEFAULT_WEIGHTS, fuse


class HybridSettings(BaseModel):
    """Fields every backend config with vectors accepts."""

    embedder: Any = None
    """An embedder (name, dict or instance): search then fuses full text and vectors."""
    fusion: Literal["convex", "rrf"] = "convex"
    """How the arms are fused (see ``retrieval.fusion``)."""
    vector_weight: float = Field(DEFAULT_WEIGHTS["vector"], ge=0, allow_inf_nan=False)
    fulltext_weight: float = Field(DEFAULT_WEIGHTS["fulltext"], ge=0, allow_inf_nan=False)
    candidates: int = Field(50, ge=1)
    """How deep each arm looks before fusion."""

    def hybrid_kwargs(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in HybridSettings.model_fields}


class Hybrid:
    def __init__(
        self,
        embedder: Any = None,
        fusion: str = "convex",
        vector_weight: float = DEFAULT_WEIGHTS["vector"],
        fulltext_weight: float = DEFAULT_WEIGHTS["fulltext"],
        candidates: int = 50,
    ) -> None:
        self.embedder: Embedder | None = resolve_embedder(embedder)
        self.fusion = fusion
        self.weights = {"fulltext": fulltext_weight, "vector": vector_weight}
        self.candidates = candidates

    def depth(self, top_k: int) -> int:
        return top_k if self.embedder is None else max(top_k, self.candidates)

    def fuse(self, arms: Mapping[str, Sequence[tuple[Any, float]]]) -> list[tuple[Any, float, dict[str, float]]]:
        return fuse(self.fusion, arms, self.weights)
