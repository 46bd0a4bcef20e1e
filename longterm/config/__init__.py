"""Where configuration comes from: arguments first, then ``LONGTERM_*`` variables.

The seam: ``home()`` is the directory longterm writes to by default (made by
``private_dir``, owner-only, when a store first needs it), and
``parse_backend_config(Model, config, backend)`` validates a backend's ``backend_config``
dict into its pydantic model, with errors that name the offending key. Each backend's
model (its keys, defaults and environment variables) is in ``config.backends`` (the default
engine's in ``config.local``, re-exported there), apart from the engine, so an engine module
holds its primitives only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ValidationError

from ..errors import ConfigurationError

M = TypeVar("M", bound=BaseModel)

#: Default directory for embedded stores and ledgers; override with LONGTERM_HOME.
DEFAULT_HOME = ".longterm"


def home() -> Path:
    return Path(os.environ.get("LONGTERM_HOME") or DEFAULT_HOME).expanduser()


def private_dir(path: Path) -> None:
    """Make the directory ``path`` and each missing parent 0700, whatever the umask.

    Memories are personal: every directory longterm makes is its owner's alone (``mkdir``'s
    ``parents=True`` would make the parents with the umask's mode). A directory that exists
    already, or that another process makes meanwhile, is left as it is.
    """
    missing: list[Path] = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(directory, 0o700)


def env(*names: str) -> str | None:
    """The first of ``names`` set (non-empty) in the environment."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def parse_backend_config(model: type[M], config: dict[str, Any], backend: str) -> M:
    try:
        return model.model_validate(config)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "backend_config"
            problems.append(f"'{where}': {err['msg']}")
        known = ", ".join(model.model_fields)
        raise ConfigurationError(
            f"invalid backend_config for backend {backend!r}: {'; '.join(problems)}. Known keys: {known}."
        ) from None


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``: safe for error messages and logs."""
    p = urlsplit(url)
    if p.password:
        netloc = f"{p.username or ''}:***@{p.hostname}" + (f":{p.port}" if p.port else "")
        return urlunsplit(p._replace(netloc=netloc))
    return url


def embedded_store(backend: str, config: dict[str, Any]) -> Path | None:
    """Where an embedded engine keeps the store ``backend_config`` names (the engines' own
    defaults: local ``<LONGTERM_HOME>/memory.db``, embedded Qdrant ``<LONGTERM_HOME>/qdrant``),
    or None for a server; read-only commands look here before opening, so they create nothing."""
    if backend == "local":
        return Path(config.get("path") or env("LONGTERM_LOCAL_PATH") or home() / "memory.db").expanduser().absolute()
    server = config.get("url") or config.get("host") or (not config.get("path") and env("LONGTERM_QDRANT_URL"))
    if backend == "qdrant" and not server:
        return Path(config.get("path") or home() / "qdrant").expanduser().absolute()
    return None
