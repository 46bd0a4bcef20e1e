"""The Redis engine (``engine``): memories as hashes, found with RediSearch; its key layout and
scripts (``scripts``), filters as query clauses (``filtering``) over tokens kept right (``tokens``),
and the move of a 0.1 store to the current layout (``upgrade``)."""

from .engine import RedisBackend
from .scripts import namespace

__all__ = ["RedisBackend", "namespace"]
