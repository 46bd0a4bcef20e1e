"""Storage engines behind LongTermMemory, one module each, found through the registry."""

from .base import Backend
from .registry import backend_class, create, names, register

__all__ = ["Backend", "backend_class", "create", "names", "register"]
