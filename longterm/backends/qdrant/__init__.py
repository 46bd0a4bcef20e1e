"""The Qdrant backend: a server or qdrant-client's local mode (``client``), or the embedded
qdrant-edge engine (``edge``, the default on a path), on one data model (``common``); the
``qdrant`` backend name chooses between them (``choice``)."""

from ...config.backends import QdrantConfig
from .choice import Qdrant
from .client import QdrantBackend
from .edge import QdrantEdgeBackend
from .ids import collection_name

__all__ = ["Qdrant", "QdrantBackend", "QdrantConfig", "QdrantEdgeBackend", "collection_name"]
