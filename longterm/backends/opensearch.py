"""The OpenSearch backend: one index per ``index`` name, every user inside it, BM25 + k-NN.

The seam: ``OpenSearchBackend`` implements the backend contract with the official
``opensearch-py`` async client, one client (connection pool) per backend.

Why it is shaped so:
- One index holds all users of an app; ``app_name``/``user_id`` are ``keyword`` fields in a
  ``filter`` clause of every query, so any user id works (VeADK's index-per-user scheme
  rejects ids like ``Alice``, ``a@b.com`` or ``user 1``) and no id is ever query syntax.
  The index name is derived from ``index`` (lower-cased, unsafe characters replaced, a
  digest appended when anything changed).
- Text: ``terms`` is the CJK-segmented text (``retrieval.text.segment``) under an analyzer
  of analysis-common only (split on non-letters, lowercase, ASCII folding, Porter stemming),
  so Chinese, Japanese and Korean bigrams survive and English is stemmed. Queries are built
  from ``query_terms`` as a ``match`` (never ``query_string``).
- Vectors: with an embedder, a ``knn_vector`` (HNSW, Lucene engine, cosine; the Lucene
  engine needs no native library) searched by a k-NN query with the scope as its
  ``filter``; fused with the BM25 arm (convex by default, or RRF). A node without the k-NN
  plugin gets a clear error at index creation.
- Writes use the bulk API with ``refresh=wait_for``: once a save returned, searches see it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
from pydantic import ConfigDict

from ..config import env, parse_backend_config, redact_url
from ..errors import BackendError, BackendUnavailableError, ConfigurationError, LongTermMemoryError, require
from ..records import Hit, MemoryRecord, Scope
from ..retrieval.embedders import Embedder
from ..retrieval.hybrid import Hybrid, HybridSettings
from ..retrieval.text import query_terms, segment

log = logging.getLogger("longterm.opensearch")

ANALYSIS = {
    "analyzer": {
        "lt_text": {
            "type": "custom",
            "tokenizer": "lt_words",
            "filter": ["lowercase", "asciifolding", "porter_stem"],
        }
    },
    "tokenizer": {"lt_words": {"type": "pattern", "pattern": "[^\\p{L}\\p{N}]+"}},
}


class OpenSearchConfig(HybridSettings):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    url: Optional[str] = None
    """e.g. ``https://search.example.com:9200``; default ``$LONGTERM_OPENSEARCH_URL``."""
    hosts: Optional[list[str]] = None
    username: Optional[str] = None
    password: Optional[str] = None
    verify_certs: bool = True
    ca_certs: Optional[str] = None
    index: str = "default_app"
    prefix: str = "longterm-"
    replicas: Optional[int] = None
    """Number of replicas for a new index (default: the cluster's)."""
    timeout: float = 30.0


def index_name(prefix: str, index: str) -> str:
    name = f"{prefix}{index}"
    safe = re.sub(r"[^a-z0-9_-]", "_", name.lower()).lstrip("_-+") or "longterm"
    if safe != name:
        safe += "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return safe[:200]


def resolve_hosts(cfg: OpenSearchConfig) -> list[str]:
    if cfg.hosts:
        return cfg.hosts
    if cfg.url:
        return [cfg.url]
    url = env("LONGTERM_OPENSEARCH_URL")
    if url:
        return [url]
    host = env("DATABASE_OPENSEARCH_HOST")
    if host:
        port = env("DATABASE_OPENSEARCH_PORT") or "9200"
        return [host if "://" in host else f"https://{host}:{port}"]
    return ["http://127.0.0.1:9200"]


class OpenSearchBackend:
    name: ClassVar[str] = "opensearch"

    def __init__(
        self,
        hosts: Sequence[str] = ("http://127.0.0.1:9200",),
        *,
        username: Optional[str] = None,
        password: Optional[str] = None,
        verify_certs: bool = True,
        ca_certs: Optional[str] = None,
        index: str = "default_app",
        prefix: str = "longterm-",
        replicas: Optional[int] = None,
        timeout: float = 30.0,
        **hybrid: Any,
    ) -> None:
        self._os = require("opensearchpy", package="opensearch-py", extra="opensearch", purpose="The opensearch backend")
        require("aiohttp", package="aiohttp", extra="opensearch", purpose="The opensearch backend's async client")
        self.hosts = list(hosts)
        self.auth = (username, password) if username else None
        self.verify_certs, self.ca_certs = verify_certs, ca_certs
        self.index = index_name(prefix, index)
        self.hybrid = Hybrid(**hybrid)
        self.embedder: Optional[Embedder] = self.hybrid.embedder
        self.replicas = replicas
        self.timeout = timeout
        self._client: Any = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._ready = False

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> "OpenSearchBackend":
        cfg = parse_backend_config(OpenSearchConfig, config, cls.name)
        return cls(
            resolve_hosts(cfg),
            username=cfg.username or env("LONGTERM_OPENSEARCH_USERNAME", "DATABASE_OPENSEARCH_USERNAME"),
            password=cfg.password or env("LONGTERM_OPENSEARCH_PASSWORD", "DATABASE_OPENSEARCH_PASSWORD"),
            verify_certs=cfg.verify_certs, ca_certs=cfg.ca_certs, index=cfg.index, prefix=cfg.prefix,
            replicas=cfg.replicas, timeout=cfg.timeout, **cfg.hybrid_kwargs(),
        )  # fmt: skip

    # -- connection and errors ----------------------------------------------------------------

    def _where(self) -> str:
        return ", ".join(redact_url(h) for h in self.hosts)

    def _error(self, exc: Exception, what: str) -> LongTermMemoryError:
        ex = self._os.exceptions
        text = str(exc)
        if isinstance(exc, ex.SSLError) or "CERTIFICATE_VERIFY_FAILED" in text:
            return ConfigurationError(
                f"TLS to OpenSearch at {self._where()} failed while {what}: {exc}. Pass the cluster's CA with "
                "backend_config['ca_certs'], or (for a test node only) verify_certs=False."
            )
        if isinstance(exc, (ex.AuthenticationException, ex.AuthorizationException)):
            return ConfigurationError(
                f"OpenSearch at {self._where()} refused the credentials while {what} ({exc.status_code}). Check "
                "username/password (LONGTERM_OPENSEARCH_USERNAME / LONGTERM_OPENSEARCH_PASSWORD)."
            )
        if isinstance(exc, (ex.ConnectionError, ex.ConnectionTimeout, OSError, asyncio.TimeoutError)):
            return BackendUnavailableError(
                f"cannot reach OpenSearch at {self._where()} while {what}: {exc}. Start it, or set "
                "LONGTERM_OPENSEARCH_URL / backend_config['url']."
            )
        if "knn_vector" in text and ("No handler" in text or "mapper_parsing" in text):
            return BackendUnavailableError(
                f"OpenSearch at {self._where()} has no k-NN plugin, which vectors need ({text[:200]}). Install "
                "opensearch-knn on the cluster, or use this backend without an embedder."
            )
        return BackendError(f"OpenSearch error while {what} at {self._where()}: {text[:500]}")

    async def _conn(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            kwargs: dict[str, Any] = {
                "hosts": self.hosts, "verify_certs": self.verify_certs, "timeout": self.timeout,
                "ssl_show_warn": self.verify_certs, "max_retries": 2, "retry_on_timeout": True,
            }  # fmt: skip
            if self.auth:
                kwargs["http_auth"] = self.auth
            if self.ca_certs:
                kwargs["ca_certs"] = self.ca_certs
            self._client = self._os.AsyncOpenSearch(**kwargs)
            self._loop, self._ready = loop, False
        if not self._ready:
            try:
                await self._ensure_index(self._client)
            except LongTermMemoryError:
                raise
            except Exception as exc:
                raise self._error(exc, "preparing the index") from exc
            self._ready = True
        return self._client

    def _mapping(self) -> dict[str, Any]:
        props: dict[str, Any] = {
            "record_id": {"type": "keyword"},
            "app_name": {"type": "keyword"},
            "user_id": {"type": "keyword"},
            "session_id": {"type": "keyword"},
            "timestamp": {"type": "double"},
            "terms": {"type": "text", "analyzer": "lt_text"},
            "doc": {"type": "object", "enabled": False},
        }
        settings: dict[str, Any] = {"analysis": ANALYSIS}
        if self.replicas is not None:
            settings["number_of_replicas"] = self.replicas
        if self.embedder is not None:
            settings["knn"] = True
            props["embedding"] = {
                "type": "knn_vector",
                "dimension": self.embedder.dim,
                "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
            }
        return {"settings": {"index": settings}, "mappings": {"properties": props, "_meta": {"embedder": self.embedder.id if self.embedder else ""}}}

    async def _ensure_index(self, client: Any) -> None:
        if not await client.indices.exists(index=self.index):
            try:
                await client.indices.create(index=self.index, body=self._mapping())
            except self._os.exceptions.RequestError as exc:
                if "resource_already_exists" not in str(exc):
                    raise
            else:
                return
        mapping = await client.indices.get_mapping(index=self.index)
        meta = next(iter(mapping.values()))["mappings"].get("_meta", {})
        have, want = meta.get("embedder", ""), self.embedder.id if self.embedder else ""
        if want and have != want:
            raise ConfigurationError(
                f"OpenSearch index {self.index!r} was created for embedder {have or 'none'!r}, not {want!r}. Vectors "
                "of different embedders never mix: use another index name, or delete the index."
            )

    # -- contract -------------------------------------------------------------------------------

    @staticmethod
    def _scope_filter(scope: Scope) -> list[dict[str, Any]]:
        return [{"term": {"app_name": scope.app_name}}, {"term": {"user_id": scope.user_id}}]

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        if not records:
            return
        vectors = await self.embedder.embed([r.text for r in records], kind="passage") if self.embedder else None
        body: list[dict[str, Any]] = []
        for i, r in enumerate(records):
            doc = {
                "record_id": r.id, "app_name": r.app_name, "user_id": r.user_id, "session_id": r.session_id,
                "timestamp": r.timestamp, "terms": segment(r.text), "doc": r.model_dump(mode="json", exclude={"embedding"}),
            }  # fmt: skip
            if vectors is not None:
                doc["embedding"] = vectors[i].astype(np.float32).tolist()
            body += [{"index": {"_index": self.index, "_id": r.id}}, doc]
        client = await self._conn()
        try:
            resp = await client.bulk(body=body, refresh="wait_for")
        except Exception as exc:
            raise self._error(exc, "saving memories") from exc
        if resp.get("errors"):
            failed = [it["index"] for it in resp["items"] if it["index"].get("error")]
            raise self._error(RuntimeError(f"{len(failed)} of {len(records)} writes failed, first: {failed[0]['error']}"), "saving memories")

    async def _query(self, client: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
        resp = await client.search(index=self.index, body=body)
        return resp["hits"]["hits"]

    async def search(self, scope: Scope, query: str, top_k: int, *, query_vector: Optional[Sequence[float]] = None) -> list[Hit]:
        terms = query_terms(query, stem=False)
        if not terms:
            return []
        client = await self._conn()
        depth = self.hybrid.depth(top_k)
        text_q = {
            "size": depth, "_source": ["doc"],
            "query": {"bool": {"filter": self._scope_filter(scope), "must": [{"match": {"terms": {"query": " ".join(terms), "operator": "or"}}}]}},
        }  # fmt: skip
        try:
            text_hits = await self._query(client, text_q)
        except Exception as exc:
            raise self._error(exc, "searching") from exc
        if self.embedder is None:
            return [Hit(record=MemoryRecord.model_validate(h["_source"]["doc"]), score=h["_score"], arms={"fulltext": h["_score"]}) for h in text_hits]
        vec_hits: list[dict[str, Any]] = []
        qv, degraded = await self.hybrid.query_vector(query, query_vector, f"opensearch {self.index}")
        if qv is not None:
            knn = {"embedding": {"vector": qv.tolist(), "k": depth, "filter": {"bool": {"filter": self._scope_filter(scope)}}}}
            try:
                vec_hits = await self._query(client, {"size": depth, "_source": ["doc"], "query": {"knn": knn}})
            except Exception as exc:  # degrade visibly: full text still answers
                degraded = f"vector search failed ({type(exc).__name__}: {str(exc)[:200]}); results are full text only"
                log.warning("opensearch %s: %s", self.index, degraded)
        docs = {h["_id"]: h["_source"]["doc"] for h in [*text_hits, *vec_hits]}
        fused = self.hybrid.fuse({"fulltext": [(h["_id"], h["_score"]) for h in text_hits], "vector": [(h["_id"], h["_score"]) for h in vec_hits]})
        extra = {"degraded": degraded} if degraded else {}
        return [Hit(record=MemoryRecord.model_validate(docs[i]), score=s, arms=a, extra=extra) for i, s, a in fused[:top_k]]

    async def delete(self, scope: Scope, ids: Optional[Sequence[str]] = None) -> int:
        client = await self._conn()
        flt = self._scope_filter(scope)
        if ids is not None:
            flt = [*flt, {"terms": {"record_id": list(ids)}}]
        try:
            resp = await client.delete_by_query(index=self.index, body={"query": {"bool": {"filter": flt}}}, refresh=True, conflicts="proceed")
        except Exception as exc:
            raise self._error(exc, "deleting memories") from exc
        return int(resp.get("deleted", 0))

    async def count(self, scope: Scope) -> int:
        client = await self._conn()
        try:
            resp = await client.count(index=self.index, body={"query": {"bool": {"filter": self._scope_filter(scope)}}})
        except Exception as exc:
            raise self._error(exc, "counting memories") from exc
        return int(resp["count"])

    async def scan(self, scope: Scope, batch_size: int = 500) -> AsyncIterator[MemoryRecord]:
        client = await self._conn()
        after = None
        while True:
            body: dict[str, Any] = {
                "size": batch_size, "_source": ["doc"], "query": {"bool": {"filter": self._scope_filter(scope)}},
                "sort": [{"timestamp": "asc"}, {"record_id": "asc"}],
            }  # fmt: skip
            if after is not None:
                body["search_after"] = after
            try:
                hits = await self._query(client, body)
            except Exception as exc:
                raise self._error(exc, "reading memories") from exc
            for h in hits:
                yield MemoryRecord.model_validate(h["_source"]["doc"])
            if len(hits) < batch_size:
                return
            after = hits[-1]["sort"]

    async def close(self) -> None:
        if self._client is not None:
            try:
                await self._client.close()
            except Exception:  # closing a client whose loop is gone: nothing to release
                log.debug("closing opensearch client", exc_info=True)
            self._client = None
