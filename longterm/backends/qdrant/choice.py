"""The ``qdrant`` backend name: which of the two Qdrant engines a ``backend_config`` means.

The seam: the registry builds ``qdrant`` with ``Qdrant.from_config(config, root=...)``: a server
(``url``, ``host``, ``$LONGTERM_QDRANT_URL``) or ``engine="local"`` is ``QdrantBackend``
(qdrant-client); an embedded store otherwise is ``QdrantEdgeBackend`` (qdrant-edge, the fast
default). Each engine's own ``from_config`` builds that engine only.

Why a name of its own: one user-facing backend, two engines under it; the choice is made
once, here, and no engine's builder returns another class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from ...config import parse_backend_config
from ...config.backends import QdrantConfig, resolve_qdrant_url
from .client import QdrantBackend
from .common import QdrantEngine
from .edge import QdrantEdgeBackend


class Qdrant:
    """Builds the Qdrant engine a ``backend_config`` means (see the module docstring)."""

    name: ClassVar[str] = "qdrant"

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> QdrantEngine:
        cfg = parse_backend_config(QdrantConfig, config, cls.name)
        engine = QdrantEdgeBackend if resolve_qdrant_url(cfg) is None and cfg.engine == "edge" else QdrantBackend
        return engine.from_config(config, root=root)
