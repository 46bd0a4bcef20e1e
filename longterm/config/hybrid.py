"""Hybrid settings: the ``backend_config`` keys every engine with vectors accepts.

The seam: an engine's config model inherits ``HybridSettings`` (embedder, fusion, weights,
candidates); ``hybrid_kwargs()`` hands them to the engine's constructor as
``HybridOptions``, and the engine core builds one ``retrieval.hybrid.Hybrid`` from them.

Why here and not with the fusion code: settings are the bottom layer (what a user writes
and errors name); retrieval reads them, never the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from ..retrieval.embedders import Embedder

#: Arm weights chosen on LoCoMo dev (bench/locomo.py): full text is the stronger arm on
#: conversational memories; the vector arm adds what words miss.
DEFAULT_WEIGHTS = {"fulltext": 0.7, "vector": 0.3}
Fusion = Literal["convex", "rrf"]


class HybridOptions(TypedDict, total=False):
    """The hybrid keyword arguments of an engine's constructor (``HybridSettings``' fields)."""

    embedder: str | Mapping[str, Any] | Embedder | None  # resolved by retrieval.embedders.resolve_embedder
    fusion: Fusion
    vector_weight: float
    fulltext_weight: float
    candidates: int


class HybridSettings(BaseModel):
    """Fields every backend config with vectors accepts.

    ``defer_build``, inherited by every engine's config: a model's validator is built when it
    first validates, so a process pays for the one engine it opens, not for all of them."""

    model_config = ConfigDict(defer_build=True)

    embedder: Any = None  # pydantic validates no Protocol: str, dict or an Embedder, as HybridOptions says
    """An embedder (name, dict or instance): search then fuses full text and vectors."""
    fusion: Fusion = "convex"
    """How the arms are fused (see ``retrieval.fusion``)."""
    vector_weight: float = Field(DEFAULT_WEIGHTS["vector"], ge=0, allow_inf_nan=False)
    fulltext_weight: float = Field(DEFAULT_WEIGHTS["fulltext"], ge=0, allow_inf_nan=False)
    candidates: int = Field(50, ge=1)
    """How deep each arm looks before fusion."""

    def hybrid_kwargs(self) -> HybridOptions:
        return HybridOptions(
            embedder=self.embedder,
            fusion=self.fusion,
            vector_weight=self.vector_weight,
            fulltext_weight=self.fulltext_weight,
            candidates=self.candidates,
        )
