"""The facade's way to the fact layer: reads answer nothing when facts are off, maintenance says what to set.

The seam: ``FactAccess(parts)`` with ``profile``, ``facts``, ``history`` (empty when facts are
off), ``consolidate``, ``rebuild``, ``distill`` (a ``ConfigurationError`` naming what to set
when off), ``flush`` (0 when off) and ``last_error``; every engine call guarded, so only our
errors leave.

Why reads answer nothing when off: an agent preloading a profile must work the same with or
without a fact model configured; asking for maintenance that cannot run is a mistake to say.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from ..core.errors import guard
from ..errors import ConfigurationError
from ..facts import FactLayer, FactsConfig
from ..records import Scope
from .wiring import Wiring


class FactAccess:
    """The fact layer as the facade uses it (see the module docstring)."""

    def __init__(self, parts: Wiring) -> None:
        self.layer = parts.facts
        self.backend_name = parts.name

    def _guard(self, what: str) -> AbstractContextManager[None]:
        return guard(what, f"backend {self.backend_name!r}")

    def _required(self, what: str) -> FactLayer:
        if self.layer is None:
            raise ConfigurationError(
                f"{what} needs the fact layer: pass facts={{'base_url': ..., 'model': ...}} or set "
                "LONGTERM_FACTS_BASE_URL and LONGTERM_FACTS_MODEL (see docs/facts.md)."
            )
        return self.layer

    @property
    def last_error(self) -> str | None:
        """The fact layer's last distillation error (None: none, or no fact layer)."""
        return None if self.layer is None else self.layer.last_error

    async def profile(self, scope: Scope) -> str:
        if self.layer is None:
            return ""
        with self._guard("reading the profile"):
            return await self.layer.profile(scope)

    async def facts(self, scope: Scope, *, current: bool, as_of: float | None) -> list[dict[str, Any]]:
        if self.layer is None:
            return []
        with self._guard("reading facts"):
            found = await self.layer.facts(scope, current=current, as_of=as_of)
        return [f.as_dict() for f in found]

    async def history(self, scope: Scope, fact_id: str) -> list[dict[str, Any]]:
        if self.layer is None:
            return []
        with self._guard("reading fact history"):
            return await self.layer.history(scope, fact_id)

    async def consolidate(self, scope: Scope) -> dict[str, int]:
        with self._guard("consolidating facts"):
            return await self._required("consolidate_facts").consolidate(scope)

    async def rebuild(self, scope: Scope, overrides: dict[str, Any]) -> dict[str, int]:
        layer = self._required("rebuild_facts")
        FactsConfig.resolve({**layer.config.model_dump(), **overrides})  # a bad override fails here, clearly
        with self._guard("rebuilding facts"):
            return await layer.rebuild(scope, **overrides)

    async def distill(self, scope: Scope) -> int:
        with self._guard("distilling facts"):
            return await self._required("distill_facts").catch_up(scope)

    async def flush(self) -> int:
        return 0 if self.layer is None else await self.layer.flush()
