"""Storage engines behind LongTermMemory: primitives only, one module or folder per engine.

Each engine subclasses ``longterm.core.engine.Engine``; the registry
(``longterm.core.registry``) finds them by name, importing an engine's client library only
when that engine is chosen.
"""

from ..core.backend import Backend
from ..core.registry import backend_class, create, names, register, unregister

__all__ = ["Backend", "backend_class", "create", "names", "register", "unregister"]
