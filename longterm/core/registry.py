"""The backend registry: names to backend classes, so nothing branches on a name.

The seam: ``register(name, cls_or_path)`` adds a backend, ``create(name, config, root)``
builds one, always as ``cls.from_config(config, root=root)``, ``names()`` lists them.
Built-in backends are registered as import paths so an optional client library is imported
only when its backend is chosen; third-party packages register through the
``longterm.backends`` entry-point group (like fsspec's protocol registry), with no change
to longterm.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigurationError
from .backend import Backend

ENTRY_POINT_GROUP = "longterm.backends"


class Builder(Protocol):
    """``cls.from_config``: the backend a ``backend_config`` describes."""

    def __call__(self, config: dict[str, Any], *, root: Path) -> Backend: ...


#: Backends shipped with longterm, as import paths (their client libraries load lazily).
BUILTINS: dict[str, str] = {
    "local": "longterm.backends.local:LocalBackend",
    "redis": "longterm.backends.redis:RedisBackend",
    "qdrant": "longterm.backends.qdrant:Qdrant",
    "mem0": "longterm.backends.mem0:Mem0Backend",
    "opensearch": "longterm.backends.opensearch:OpenSearchBackend",
}

_registry: dict[str, str | type] = dict(BUILTINS)
_entry_points_loaded = False


def register(name: str, backend: str | type, *, replace: bool = False) -> None:
    """Register ``backend`` (a class or a ``"module:Class"`` path) under ``name``."""
    key = name.strip().lower()
    if key in _registry and not replace and _registry[key] != backend:
        raise ConfigurationError(f"a backend named {key!r} is already registered; pass replace=True to override it.")
    _registry[key] = backend


def unregister(name: str) -> None:
    """Forget the backend registered under ``name`` (a built-in comes back as shipped)."""
    key = name.strip().lower()
    if key in BUILTINS:
        _registry[key] = BUILTINS[key]
    else:
        _registry.pop(key, None)


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _registry.setdefault(ep.name.lower(), ep.value)


def names() -> list[str]:
    _load_entry_points()
    return sorted(_registry)


def backend_class(name: str) -> type:
    key = name.strip().lower()
    if key not in _registry:  # entry points only add names (never replace one): read them for a new name
        _load_entry_points()
    target = _registry.get(key)
    if target is None:
        raise ConfigurationError(f"unknown backend {name!r}; registered backends: {', '.join(names())}.")
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        try:
            target = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            from ..errors import MissingDependencyError

            if isinstance(exc, MissingDependencyError):
                raise
            raise ConfigurationError(f"backend {name!r} could not be imported from {module}: {exc}") from exc
        _registry[key] = target
    return target


def create(name: str, config: dict[str, Any], root: Path) -> Backend:
    """Build backend ``name`` from ``backend_config`` (``root``: ``LONGTERM_HOME``), the one way:
    ``cls.from_config(config, root=root)``; errors name the bad key. A third party's class without
    ``from_config`` is called with the keys (``core.backend``)."""
    cls = backend_class(name)
    build: Builder | None = getattr(cls, "from_config", None)
    if build is not None:
        return build(dict(config), root=root)
    try:
        backend: Backend = cls(**config)
    except TypeError as exc:
        raise ConfigurationError(f"invalid backend_config for {name!r}: {exc}") from exc
    return backend
