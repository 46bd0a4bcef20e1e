"""One string for a store: ``longterm://`` URIs, read into ``LongTermMemory``'s arguments.

The seam: ``parse_uri(uri) -> dict`` gives the keyword arguments of ``LongTermMemory``
(``backend``, ``backend_config``, and ``app_name`` / ``index`` when the URI names them) or
raises one ``ConfigurationError`` that quotes the URI (its password hidden) and says what is
wrong. ``LongTermMemory.from_uri``, ``LONGTERM_URI``, the CLI's ``--uri`` and ADK's
``--memory_service_uri`` (``longterm.integrations.adk``) all read URIs here.

| URI | store |
|---|---|
| ``longterm://`` | the local default, ``$LONGTERM_HOME/memory.db`` |
| ``longterm:///path/to/memory.db`` (``longterm:memory.db``: relative) | a local SQLite file |
| ``longterm+redis://[user:password@]host:port/0`` (``longterm+rediss://``: TLS) | Redis |
| ``longterm+opensearch://[user:password@]host:port`` (``longterm+opensearchs://``: HTTPS) | OpenSearch |
| ``longterm+qdrant:///path`` (embedded), ``longterm+qdrant://host:port`` (``+qdrants``: HTTPS) | Qdrant |

The query holds ``app`` (the memory's ``app_name``), ``index``, and any other key of that
backend's ``backend_config`` (``?prefix=myapp:``, ``?timeout=5``); its values are checked when
the store opens, like any ``backend_config``. Why a scheme per backend (``longterm+redis``, not
``redis``): ADK's service registry and any URI-keyed registry choose a handler by scheme, and a
bare ``redis://`` already means a Redis client's own URL, not a memory store.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from .config import redact_url
from .errors import ConfigurationError

#: Every scheme a longterm URI may have, and the backend it opens.
SCHEMES: dict[str, str] = {
    "longterm": "local",
    "longterm+redis": "redis",
    "longterm+rediss": "redis",
    "longterm+opensearch": "opensearch",
    "longterm+opensearchs": "opensearch",
    "longterm+qdrant": "qdrant",
    "longterm+qdrants": "qdrant",
}
#: Schemes whose server is reached over TLS.
TLS = frozenset({"longterm+rediss", "longterm+opensearchs", "longterm+qdrants"})
#: Query keys that are ``LongTermMemory`` arguments rather than ``backend_config`` keys.
MEMORY_KEYS = {"app": "app_name", "index": "index"}
#: ``backend_config`` keys the URI's authority and path give (never a query key).
FROM_AUTHORITY = frozenset({"url", "hosts", "host", "port", "username", "password", "path", "db"})
FORMS = (
    "longterm:// (the local default), longterm:///path/to/memory.db, longterm+redis://host:port/0, "
    "longterm+opensearch://host:port, longterm+qdrant:///path or longterm+qdrant://host:port"
)


def _fail(uri: str, why: str) -> ConfigurationError:
    return ConfigurationError(f"invalid longterm URI {redact_url(uri)!r}: {why}; use {FORMS}.")


def _known_keys(backend: str) -> frozenset[str]:
    """The query keys ``backend`` takes: its ``backend_config`` keys but those the URI's authority gives."""
    from pydantic import BaseModel

    from .config.local import LocalConfig  # the default engine's model; the others' only for their URIs

    model: type[BaseModel] = LocalConfig
    if backend != "local":
        from .config import backends

        others: dict[str, type[BaseModel]] = {"redis": backends.RedisConfig, "opensearch": backends.OpenSearchConfig}
        model = others.get(backend, backends.QdrantConfig)
    return frozenset(model.model_fields) - FROM_AUTHORITY - set(MEMORY_KEYS.values())


def _query(uri: str, query: str, backend: str) -> tuple[dict[str, Any], dict[str, str]]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise _fail(uri, f"its query {query!r} is not key=value pairs joined by &") from None
    memory: dict[str, Any] = {}
    config: dict[str, str] = {}
    known = _known_keys(backend)
    seen: set[str] = set()
    for key, value in pairs:
        if key in seen:
            raise _fail(uri, f"the query gives {key!r} twice")
        seen.add(key)
        if key in MEMORY_KEYS:
            memory[MEMORY_KEYS[key]] = value
        elif key in known:
            config[key] = value
        else:
            keys = ", ".join(sorted([*MEMORY_KEYS, *known]))
            raise _fail(uri, f"the query key {key!r} is not one of the {backend} backend's ({keys})")
    return memory, config


def _host(uri: str, parts: Any) -> str:
    """``host:port`` of the URI's authority (the port checked), without its user and password."""
    try:
        port = parts.port
    except ValueError:
        raise _fail(uri, "its port is not a number from 0 to 65535") from None
    host = parts.hostname
    if not host:
        raise _fail(uri, "it names no host")
    host = f"[{host}]" if ":" in host else host
    return host if port is None else f"{host}:{port}"


def parse_uri(uri: str) -> dict[str, Any]:
    """``LongTermMemory``'s keyword arguments for ``uri`` (see the module docstring)."""
    if not isinstance(uri, str) or not uri.strip():
        raise ConfigurationError(f"a longterm URI must be a non-empty string, got {uri!r}; use {FORMS}.")
    uri = uri.strip()
    try:
        parts = urlsplit(uri)
    except ValueError as exc:
        raise _fail(uri, f"it cannot be read as a URI ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        said = f"its scheme is {parts.scheme!r}" if parts.scheme else "it has no scheme"
        raise _fail(uri, f"{said}, not a longterm one")
    if parts.fragment:
        raise _fail(uri, "it has a #fragment")
    backend = SCHEMES[scheme]
    tls = scheme in TLS
    memory, config = _query(uri, parts.query, backend)
    path = unquote(parts.path)
    args: dict[str, Any] = {"backend": backend, **memory}
    cfg: dict[str, Any] = dict(config)
    if backend == "local" or (backend == "qdrant" and not parts.netloc):
        if parts.netloc not in ("", "localhost"):
            where = f"{parts.netloc}{path}"
            raise _fail(
                uri,
                f"a local store has no host, and {parts.netloc!r} stands there: write longterm:///{where} for an "
                f"absolute path, or longterm:{where} for a relative one",
            )
        if path:
            cfg["path"] = path
    elif backend == "redis":
        if parts.path and not parts.path.strip("/").isdigit():
            raise _fail(uri, f"its path {parts.path!r} is not a Redis database number (/0, /1, ...)")
        _host(uri, parts)
        cfg["url"] = f"{'rediss' if tls else 'redis'}://{parts.netloc}{parts.path}"
    else:
        if parts.path not in ("", "/"):
            raise _fail(uri, f"its path {parts.path!r} means nothing to {backend}: name the index with ?index=")
        cfg["url"] = f"{'https' if tls else 'http'}://{_host(uri, parts)}"
        if parts.username is not None or parts.password is not None:
            if backend != "opensearch":
                raise _fail(uri, "it carries a user or password; a Qdrant server takes ?api_key=")
            cfg["username"] = unquote(parts.username or "")
            cfg["password"] = unquote(parts.password or "")
    args["backend_config"] = cfg
    return args


__all__ = ["SCHEMES", "parse_uri"]
