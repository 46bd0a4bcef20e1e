"""Building a memory's parts from its settings: the engine, the ledger, the fact layer.

The seam: ``wire(settings, index=None) -> Wiring``: the backend (built by name through the
registry, on ``index`` or else the memory's own, with the memory's ``embedder`` and ``timeout``
where its config names none, or the instance given), the ledger (the one given, else the
engine's own, else a side ledger in ``LONGTERM_HOME`` keyed by the store's identity) and the
fact layer (None when off).

Why apart from the facade: what a memory is made of is decided once, here, from settings
alone; the facade and its collaborators are handed the parts and never choose them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import config as _config
from .. import telemetry
from ..core import registry
from ..core.backend import Backend
from ..core.engine import Engine
from ..core.ledger import HomeLedger, Ledger
from ..errors import LongTermMemoryError
from ..facts import FactLayer, FactsConfig
from .settings import MemorySettings


@dataclass(frozen=True)
class Wiring:
    """A memory's parts: the backend, its name, the ledger and the fact layer (None: off)."""

    backend: Backend
    name: str
    ledger: Ledger
    facts: FactLayer | None
    engine: Engine | None
    """The backend when it is its own ledger too: a save is then one call (one transaction where it can)."""

    @property
    def own_ledger(self) -> Ledger | None:
        """The ledger when it is not the store itself: one of the memory's own, closed apart."""
        ledger: object = self.ledger
        return None if ledger is self.backend else self.ledger


def bounded(cfg: dict[str, Any], backend: str, timeout: float) -> None:
    """``cfg`` with the facade's ``timeout`` where it names none: the engine's own key (``timeout_key``)
    and an OpenAI-compatible embedder's; models that run in-process have no network to wait for."""
    try:
        key = getattr(registry.backend_class(backend), "timeout_key", "timeout")
    except LongTermMemoryError:
        return  # an unknown backend: its own error comes from create()
    cfg.setdefault(key, timeout)
    embedder = cfg.get("embedder")
    if embedder == "openai":
        cfg["embedder"] = {"name": "openai", "timeout": timeout}
    elif isinstance(embedder, Mapping) and embedder.get("name") == "openai":
        cfg["embedder"] = {"timeout": timeout, **embedder}


def build_backend(settings: MemorySettings, index: str | None = None) -> Backend:
    """The engine of ``settings``: the instance given, or the registered one built from ``backend_config``
    (on ``index``: another index of the same store, ``memory.routing``)."""
    if not isinstance(settings.backend, str):
        return settings.backend
    cfg = dict(settings.backend_config)
    if index is not None:
        cfg["index"] = index
    cfg.setdefault("index", settings.index)
    if settings.embedder is not None:
        cfg.setdefault("embedder", settings.embedder)
    if settings.timeout is not None:
        bounded(cfg, settings.backend, settings.timeout)
    backend: Backend = registry.create(settings.backend, cfg, _config.home())
    return backend


def wire(settings: MemorySettings, *, index: str | None = None) -> Wiring:
    """The parts of a memory with ``settings`` on ``index`` (default: its own; module docstring)."""
    backend = build_backend(settings, index)
    name = str(getattr(backend, "name", type(backend).__name__))
    ledger: Ledger
    if settings.ledger is not None:
        ledger = settings.ledger
    elif isinstance(backend, Engine):
        ledger = backend
    else:
        ledger = HomeLedger(
            _config.home() / "ledger.db", getattr(backend, "store_id", None) or f"{name}:{index or settings.index}"
        )
    facts_config = FactsConfig.resolve(settings.facts)
    if facts_config is not None and settings.timeout is not None and "timeout" not in facts_config.model_fields_set:
        facts_config = facts_config.model_copy(update={"timeout": settings.timeout})
    facts = None
    if facts_config is not None:
        facts = FactLayer(backend, ledger, facts_config)
        telemetry.register_backlog("facts", facts, FactLayer.pending, backend=name)
    engine = backend if isinstance(backend, Engine) and ledger is backend else None
    return Wiring(backend=backend, name=name, ledger=ledger, facts=facts, engine=engine)
