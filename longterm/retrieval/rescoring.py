"""Optional re-scoring of search hits by recency and importance (off by default).

The seam: ``Rescoring(...)`` is a facade setting (``LongTermMemory(rescoring=...)``);
``rescore(hits, now)`` re-orders a backend's hits and records every component in each
hit, so ``custom_metadata`` shows ``relevance``, ``recency``, ``importance`` and the final
``score``. Backend-agnostic on purpose: it needs only the score, the timestamp and
``metadata["importance"]`` that every record carries.

final = (1 - recency_weight - importance_weight) * relevance
        + recency_weight * 0.5 ** (age / half_life)
        + importance_weight * importance
where relevance is the backend score divided by the best score of the same search.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..records import Hit

DAY = 86_400.0


class Rescoring(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    recency_weight: float = Field(default=0.0, ge=0.0, le=1.0)
    half_life_days: float = Field(default=30.0, gt=0.0)
    """A memory this many days old gets half the recency of one from now."""
    importance_weight: float = Field(default=0.0, ge=0.0, le=1.0)
    importance_key: str = "importance"
    """Record metadata key holding an importance in [0, 1] (missing: 0)."""
    candidates: int = Field(default=3, ge=1, le=20)
    """Fetch top_k x this many hits before re-ranking, so older strong matches can surface."""

    @model_validator(mode="after")
    def _weights(self) -> Rescoring:
        if self.recency_weight + self.importance_weight > 1.0:
            raise ValueError("recency_weight + importance_weight must be at most 1")
        return self

    @property
    def enabled(self) -> bool:
        return self.recency_weight > 0 or self.importance_weight > 0

    def rescore(self, hits: list[Hit], now: float | None = None) -> list[Hit]:
        if not hits or not self.enabled:
            return hits
        now = time.time() if now is None else now
        best = max(h.score for h in hits) or 1.0
        base = 1.0 - self.recency_weight - self.importance_weight
        out = []
        for h in hits:
            relevance = max(0.0, h.score / best)
            age_days = max(0.0, (now - h.record.timestamp) / DAY)
            recency = 0.5 ** (age_days / self.half_life_days)
            try:
                importance = min(1.0, max(0.0, float(h.record.metadata.get(self.importance_key, 0.0))))
            except (TypeError, ValueError):
                importance = 0.0
            final = base * relevance + self.recency_weight * recency + self.importance_weight * importance
            extra = {
                **h.extra,
                "relevance": relevance,
                "recency": recency,
                "importance": importance,
                "backend_score": h.score,
            }
            out.append(h.model_copy(update={"score": final, "extra": extra}))
        out.sort(key=lambda h: -h.score)
        return out
