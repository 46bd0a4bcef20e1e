"""VeADK's names on longterm: ``LongTermMemory`` arguments written for VeADK, mapped to ours or refused.

The seam: ``memory_arguments(data)`` takes the keyword arguments of ``LongTermMemory(...)``
before validation and returns them with VeADK's spellings replaced by ours; where there is
no equivalent it raises ``ConfigurationError`` saying what to write instead.
``embedder_spec(spec)`` fills the ``openai`` embedder from VeADK's ``MODEL_EMBEDDING_*``.

VeADK, and what it becomes here:
- ``user_id="u"`` (deprecated in VeADK): kept, with a DeprecationWarning, as the default user
  of ``as_tool()`` and of a ``Runner`` given no ``user_id``;
- ``backend="viking"`` / ``viking_mem`` / ``openviking`` / ``tos_context``: refused, they are
  managed services longterm has no client for;
- ``redis_config={host, port, username, password, db}``: the same keys, top level;
- ``opensearch_config={host, port, use_ssl, cert_path, username, password}``: ``url``
  (``https://host:port``, ``http`` when ``use_ssl`` is false), ``ca_certs``, ``username``,
  ``password``. VeADK did not verify the server's certificate; longterm does;
- ``mem0_config={api_key, base_url, api_key_id, project_id}``: ``api_key``, ``host``; the two
  ids are dropped (VeADK does not use them either);
- ``embedding_config={name, dim, api_base, api_key}``: ``embedder={"name": "openai", "model",
  "dim", "base_url", "api_key"}``;
- ``secret_token`` in any of them (STS tokens): refused, use a password or an API key;
- ``MODEL_EMBEDDING_NAME`` / ``_DIM`` / ``_API_BASE`` / ``_API_KEY``: the openai embedder's
  ``model`` / ``dim`` / ``base_url`` / ``api_key`` where not given (``LONGTERM_EMBEDDING_*`` win).

Why ``user_id`` is kept, not refused: VeADK still accepts it, and since ADK passes the
session's user on every save and search, a default user can never send one user's memories
to another; it only names the user where a call gives none (a tool built by hand, VeADK's
``runner.run(messages)``).

Why ``MODEL_EMBEDDING_*`` alone does not turn embeddings on: longterm searches offline by
default, and a variable set for another program must not start sending users' words to an
embedding endpoint. They apply once the openai embedder is chosen: ``embedder="openai"``, or
VeADK's ``embedding_config``.
"""

from __future__ import annotations

import warnings
from typing import Any

from .config import env
from .errors import ConfigurationError

#: VeADK backends that are managed services longterm has no client for.
VEADK_ONLY_BACKENDS = frozenset({"viking", "viking_mem", "openviking", "tos_context"})
#: VeADK's per-backend config keys, by the backend they belong to.
VEADK_CONFIG_KEYS = {"redis_config": "redis", "opensearch_config": "opensearch", "mem0_config": "mem0"}
#: VeADK config keys of backends longterm does not have.
VEADK_FOREIGN_KEYS = frozenset({"vikingdb_config", "viking_config", "openviking_config", "tos_config"})
#: VeADK's embedding variables, by the openai embedder option each fills.
EMBEDDING_ENV = {
    "model": "MODEL_EMBEDDING_NAME",
    "dim": "MODEL_EMBEDDING_DIM",
    "base_url": "MODEL_EMBEDDING_API_BASE",
    "api_key": "MODEL_EMBEDDING_API_KEY",
}
#: Our own variables for the same options: where set, they win over VeADK's.
_OURS_FIRST = {"base_url": "LONGTERM_EMBEDDING_BASE_URL", "api_key": "LONGTERM_EMBEDDING_API_KEY"}
_OURS = "choose backend='local' (offline), 'redis', 'opensearch', 'qdrant' or 'mem0'"


def memory_arguments(data: dict[str, Any], default_backend: str = "local") -> dict[str, Any]:
    """``LongTermMemory(**data)``'s arguments with VeADK's names mapped to ours (or refused)."""
    data = dict(data)
    backend = data.get("backend", default_backend)
    if isinstance(backend, str) and backend.strip().lower() in VEADK_ONLY_BACKENDS:
        raise ConfigurationError(
            f"backend {backend!r} is one of VeADK's managed memory services, which longterm has no client for; "
            f"{_OURS}; `longterm import` reads saved conversations into any of them."
        )
    if data.get("user_id"):
        warnings.warn(
            "LongTermMemory(user_id=...) is deprecated (as in VeADK): memories are scoped by the user of each "
            "call; user_id only names the default user of as_tool() and of a Runner given no user_id.",
            DeprecationWarning,
            stacklevel=3,
        )
    config = data.get("backend_config")
    if isinstance(config, dict) and isinstance(backend, str):
        data["backend_config"] = backend_config(backend.strip().lower(), config, embedder=data.get("embedder"))
    if data.get("embedder") is not None:
        data["embedder"] = embedder_spec(data["embedder"])
    return data


def backend_config(backend: str, config: dict[str, Any], *, embedder: Any = None) -> dict[str, Any]:
    """A VeADK-shaped ``backend_config`` for ``backend`` in our keys; other configs pass through."""
    out = dict(config)
    for key in VEADK_FOREIGN_KEYS & out.keys():
        raise ConfigurationError(
            f"backend_config[{key!r}] configures a VeADK backend longterm does not have; {_OURS} and give its own keys."
        )
    for key, owner in VEADK_CONFIG_KEYS.items():
        if key not in out:
            continue
        if owner != backend:
            raise ConfigurationError(
                f"backend_config[{key!r}] is for backend={owner!r}, but the backend is {backend!r}; "
                f"pass backend={owner!r} or drop {key!r}."
            )
        section = out.pop(key)
        if not isinstance(section, dict):
            raise ConfigurationError(f"backend_config[{key!r}] must be a dict, got {type(section).__name__}.")
        for name, value in _MAPPERS[owner](section).items():
            if name in out:
                raise ConfigurationError(f"backend_config gives {name!r} both directly and through {key!r}; keep one.")
            out[name] = value
    if "embedding_config" in out:
        section = out.pop("embedding_config")
        if embedder is not None or out.get("embedder") is not None:
            raise ConfigurationError("give the embedder once: embedder=... or backend_config['embedding_config'].")
        if not isinstance(section, dict):
            raise ConfigurationError(
                f"backend_config['embedding_config'] must be a dict, got {type(section).__name__}."
            )
        out["embedder"] = _embedding(section)
    if out.get("embedder") is not None:
        out["embedder"] = embedder_spec(out["embedder"])
    return out


def embedder_spec(spec: Any) -> Any:
    """``spec`` with the openai embedder's missing options filled from ``MODEL_EMBEDDING_*``."""
    if isinstance(spec, str) and spec.strip().lower() == "openai":
        spec = {"name": "openai"}
    if not isinstance(spec, dict) or str(spec.get("name", "")).strip().lower() != "openai":
        return spec
    out = dict(spec)
    for option, var in EMBEDDING_ENV.items():
        ours = _OURS_FIRST.get(option)
        if out.get(option) is None and not (ours and env(ours)):
            value = env(var)
            if value is not None:
                out[option] = _dim(value, var) if option == "dim" else value
    return out


def _dim(value: Any, where: str) -> int:
    try:
        dim = int(value)
    except (TypeError, ValueError):
        dim = 0
    if dim < 1 or isinstance(value, bool):
        raise ConfigurationError(f"{where} must be a positive integer (the embedding dimension), got {value!r}.")
    return dim


def _take(section: dict[str, Any], where: str, known: set[str]) -> dict[str, Any]:
    """The set (non-empty) values of ``section``; unknown keys and STS tokens refused."""
    if section.get("secret_token"):
        raise ConfigurationError(
            f"{where}.secret_token: STS tokens are not supported; authenticate with username/password "
            "(or an API key) instead."
        )
    unknown = sorted(set(section) - known - {"secret_token"})
    if unknown:
        raise ConfigurationError(
            f"{where} has unknown key(s) {', '.join(unknown)}; VeADK's keys are {', '.join(sorted(known))}."
        )
    return {k: v for k, v in section.items() if k != "secret_token" and v not in (None, "")}


def _redis(section: dict[str, Any]) -> dict[str, Any]:
    return _take(section, "redis_config", {"host", "port", "username", "password", "db"})


def _opensearch(section: dict[str, Any]) -> dict[str, Any]:
    c = _take(section, "opensearch_config", {"host", "port", "use_ssl", "cert_path", "username", "password"})
    out: dict[str, Any] = {k: c[k] for k in ("username", "password") if k in c}
    host = c.get("host")
    if host:
        if "://" in host:
            out["url"] = host
        else:  # VeADK connects with TLS unless use_ssl is false
            scheme = "https" if c.get("use_ssl", True) else "http"
            out["url"] = f"{scheme}://{host}:{c.get('port', 9200)}"
    if c.get("cert_path"):
        out["ca_certs"] = c["cert_path"]
    return out


def _mem0(section: dict[str, Any]) -> dict[str, Any]:
    c = _take(section, "mem0_config", {"api_key", "base_url", "api_key_id", "project_id"})
    out = {"api_key": c["api_key"]} if "api_key" in c else {}
    if "base_url" in c:
        out["host"] = c["base_url"]
    return out


def _embedding(section: dict[str, Any]) -> dict[str, Any]:
    c = _take(section, "embedding_config", {"name", "dim", "api_base", "api_key"})
    out: dict[str, Any] = {"name": "openai"}
    if "name" in c:
        out["model"] = c["name"]
    if "dim" in c:
        out["dim"] = _dim(c["dim"], "embedding_config.dim")
    if "api_base" in c:
        out["base_url"] = c["api_base"]
    if "api_key" in c:
        out["api_key"] = c["api_key"]
    return out


_MAPPERS = {"redis": _redis, "opensearch": _opensearch, "mem0": _mem0}
