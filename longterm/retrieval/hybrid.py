"""What every hybrid backend shares: its settings, the query vector, and fusion.

The seam: a backend config inherits ``HybridSettings`` (embedder, fusion, weights,
candidates); the backend builds one ``Hybrid`` from them and calls
``await hybrid.query_vector(query, given)`` and ``hybrid.fuse(arms)``. Degradation is
decided here once: if embedding the query fails, the answer comes from full text and each
hit says why in ``extra["degraded"]`` (and the log), never as a silent empty list.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Optional

import numpy as np
from pydantic import BaseModel

from .embedders import Embedder, resolve_embedder
from .fusion import DEFAULT_WEIGHTS, fuse

log = logging.getLogger("longterm.hybrid")


class HybridSettings(BaseModel):
    """Fields every backend config with vectors accepts."""

    embedder: Any = None
    """An embedder (name, dict or instance): search then fuses full text and vectors."""
    fusion: Literal["convex", "rrf"] = "convex"
    """How the arms are fused (see ``retrieval.fusion``)."""
    vector_weight: float = DEFAULT_WEIGHTS["vector"]
    fulltext_weight: float = DEFAULT_WEIGHTS["fulltext"]
    candidates: int = 50
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
        self.embedder: Optional[Embedder] = resolve_embedder(embedder)
        self.fusion = fusion
        self.weights = {"fulltext": fulltext_weight, "vector": vector_weight}
        self.candidates = candidates

    def depth(self, top_k: int) -> int:
        return top_k if self.embedder is None else max(top_k, self.candidates)

    async def query_vector(self, query: str, given: Optional[Sequence[float]], where: str) -> tuple[Optional[np.ndarray], Optional[str]]:
        """(vector, None), or (None, reason) when the query could not be embedded."""
        if given is not None:
            return np.asarray(given, dtype=np.float32), None
        assert self.embedder is not None
        try:
            return (await self.embedder.embed([query], kind="query"))[0], None
        except Exception as exc:  # degrade visibly: full text still answers
            reason = f"query embedding failed ({type(exc).__name__}: {exc}); results are full text only"
            log.warning("%s: %s", where, reason)
            return None, reason

    def fuse(self, arms: Mapping[str, Sequence[tuple[Any, float]]]) -> list[tuple[Any, float, dict[str, float]]]:
        return fuse(self.fusion, arms, self.weights)
