"""The OpenSearch engine: one index per ``index`` name holding every user, BM25 + k-NN, its ledger beside it.

The seam: ``OpenSearchBackend`` implements the engine primitives (``core.engine``) with the
sync ``opensearch-py`` client (thread-safe; one connection pool for the core's ``workers``
threads). Each try of a request has a third of the core's ``timeout``, and a request that
fails on one of ``hosts`` goes to another: a lost node costs a retry, not the caller's save.

Why so, in short (mappings, the ledger index and the longer story: docs/backends.md): the scope
is ``keyword`` filters, never query syntax; bulk requests are bounded and ``refresh=wait_for``,
so a save that returned is searchable and a failed item fails it, named; reads refuse partial
results; an erase goes again until nothing it erases is left, or says it could not finish.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..config import parse_backend_config, redact_url
from ..config.backends import OpenSearchConfig, resolve_auth, resolve_hosts
from ..core.engine import Engine, Query
from ..core.errors import Rule
from ..core.scope import safe_name, scope_key
from ..errors import BackendUnavailableError, ConfigurationError, InvalidInputError, require
from ..records import MemoryRecord, Scope
from ..retrieval.text import segment

ANALYSIS = {
    "analyzer": {
        "lt_text": {"type": "custom", "tokenizer": "lt_words", "filter": ["lowercase", "asciifolding", "porter_stem"]}
    },
    "tokenizer": {"lt_words": {"type": "pattern", "pattern": "[^\\p{L}\\p{N}]+"}},
}
KEYWORD = {"type": "keyword"}
FILTERED = ("app_name", "user_id", "session_id", "timestamp")
LEDGER_SUFFIX = ".ledger"
#: Longest data index name: OpenSearch allows 255 bytes, and the ledger's name is longer.
MAX_NAME = 255 - len(LEDGER_SUFFIX)
#: One bulk request carries at most this much: a large session never meets a 413 (AWS allows 10 MB).
BULK_BYTES = 5 * 1024 * 1024
BULK_DOCS = 1_000
#: Ledger entries per read (the most a search may return).
LEDGER_PAGE = 10_000
#: delete_by_query rounds before an erase gives up.
ERASE_ROUNDS = 5
BUSY = ("es_rejected_execution_exception", "unavailable_shards_exception", "no_shard_available_action_exception")
TLS_HINT = "Pass the cluster's CA with backend_config['ca_certs'], or (a test node only) verify_certs=False."
AUTH_HINT = "Check username/password (LONGTERM_OPENSEARCH_USERNAME / LONGTERM_OPENSEARCH_PASSWORD)."
BLOCKED_HINT = "The index is read-only: a write block, or a disk past its flood-stage watermark; free disk, lift it."
KNN_HINT = "Vectors need the k-NN plugin: install opensearch-knn on the cluster, or use no embedder."
TOO_LARGE_HINT = (
    "One memory is larger than the cluster accepts in a request (http.max_content_length; 10 MB on small AWS "
    "domains): exclude such events with the auto-save policy, or raise the limit."
)


class Incomplete(Exception):
    """OpenSearch did part of a request: some writes, shards or deletions failed."""


def index_name(prefix: str, index: str) -> str:
    """``prefix + index`` made a valid index name (lower case, at most ``MAX_NAME`` characters)."""
    return safe_name(f"{prefix}{index}", "a-z0-9_-", limit=MAX_NAME, lower=True)


class OpenSearchBackend(Engine):
    name: ClassVar[str] = "opensearch"
    unreachable: ClassVar[str] = "Start it, or set LONGTERM_OPENSEARCH_URL / backend_config['url']."

    def __init__(self, config: OpenSearchConfig | None = None, **options: Any) -> None:
        """``OpenSearchBackend(url=..., index=...)``: the keys of ``OpenSearchConfig``, or one."""
        cfg = config or parse_backend_config(OpenSearchConfig, options, self.name)
        self._os = require("opensearchpy", package="opensearch-py", extra="opensearch", purpose="OpenSearch")
        self.hosts = resolve_hosts(cfg)
        self.auth = resolve_auth(cfg)
        self.verify_certs, self.replicas = cfg.verify_certs, cfg.replicas
        self.index = index_name(cfg.prefix, cfg.index)
        self.ledger = self.index + LEDGER_SUFFIX
        hosts = ", ".join(redact_url(h) for h in self.hosts)
        store, where = f"opensearch:{hosts}#{self.index}", f"{hosts} (index {self.index})"
        super().__init__(where=where, store_id=store, workers=cfg.workers, timeout=cfg.timeout, **cfg.hybrid_kwargs())
        # Three tries (a request to a dead node goes to another) fit in the caller's deadline.
        retry = {"timeout": max(1.0, (cfg.timeout or 30.0) / 3), "max_retries": 2, "retry_on_timeout": True}
        tls = {"verify_certs": cfg.verify_certs, "ca_certs": cfg.ca_certs, "ssl_show_warn": cfg.verify_certs}
        self.client = self._os.OpenSearch(self.hosts, http_auth=self.auth, pool_maxsize=cfg.workers, **tls, **retry)

    def _rules(self) -> Sequence[Rule]:
        ex = self._os.exceptions
        busy = lambda e: getattr(e, "status_code", None) in (408, 429, 503) or any(s in str(e) for s in BUSY)  # noqa: E731
        return (
            Rule(ex.SSLError, ConfigurationError, TLS_HINT),
            Rule("cluster_block_exception", BackendUnavailableError, BLOCKED_HINT),
            Rule((ex.AuthenticationException, ex.AuthorizationException), ConfigurationError, AUTH_HINT),
            Rule("index_not_found_exception", BackendUnavailableError, "The index is gone.", reopen=True),
            Rule(lambda e: "knn_vector" in str(e) and "mapper" in str(e).lower(), BackendUnavailableError, KNN_HINT),
            Rule(lambda e: getattr(e, "status_code", None) == 413, InvalidInputError, TOO_LARGE_HINT),
            Rule(busy, BackendUnavailableError, "The cluster is overloaded or recovering (a node lost?); retry soon."),
        )

    # -- schema and meta ---------------------------------------------------------------------

    def _open(self) -> None:
        props: dict[str, Any] = {
            **dict.fromkeys(("record_id", "app_name", "user_id", "session_id"), KEYWORD),
            "timestamp": {"type": "double"},
            "terms": {"type": "text", "analyzer": "lt_text"},
            "doc": {"type": "object", "enabled": False},
        }
        settings: dict[str, Any] = {"analysis": ANALYSIS}
        if self.embedder is not None:
            settings["knn"] = True
            method = {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}
            props["embedding"] = {"type": "knn_vector", "dimension": self.embedder.dim, "method": method}
        meta = {"embedder": self.embedder.id if self.embedder is not None else ""}
        self._create(self.index, settings, {"properties": props, "_meta": meta})
        ledger = dict.fromkeys(("app_name", "user_id", "session_id", "event_id"), KEYWORD)
        self._create(self.ledger, {}, {"dynamic": "strict", "properties": ledger})
        # Another worker may have created them a moment ago: a search before their shards start is a 503.
        wait = {"timeout": f"{self.timeout or 30:g}s", "request_timeout": (self.timeout or 30) + 5}
        self.client.cluster.health(index=f"{self.index},{self.ledger}", wait_for_status="yellow", **wait)

    def _create(self, index: str, settings: dict[str, Any], mappings: dict[str, Any]) -> None:
        if self.replicas is not None:
            settings = {**settings, "number_of_replicas": self.replicas}
        try:
            if not self.client.indices.exists(index=index):
                self.client.indices.create(index=index, body={"settings": {"index": settings}, "mappings": mappings})
        except self._os.exceptions.RequestError as exc:
            if "resource_already_exists" not in str(exc):
                raise

    def _metas(self) -> dict[str, Any]:
        mapping = self.client.indices.get_mapping(index=self.index)
        return dict(next(iter(mapping.values()))["mappings"].get("_meta", {}))

    def _meta_get(self, key: str) -> str | None:
        value = self._metas().get(key)
        return None if value is None else str(value)

    def _meta_set(self, key: str, value: str) -> None:
        self.client.indices.put_mapping(index=self.index, body={"_meta": {**self._metas(), key: value}})

    def _close(self) -> None:
        self.client.close()

    # -- writes --------------------------------------------------------------------------------

    def _write(self, records: Sequence[MemoryRecord], vectors: np.ndarray | None) -> None:
        rows = []
        for i, r in enumerate(records):
            data = r.model_dump(mode="json", exclude={"content"} if r.text_only_content() else None)
            # Words cut at 1,000 characters: Lucene refuses a term over 32,766 bytes (a hex dump).
            doc = {"record_id": r.id, **{k: data[k] for k in FILTERED}, "terms": segment(r.text, 1000), "doc": data}
            if vectors is not None:
                doc["embedding"] = vectors[i].astype(np.float32).tolist()
            rows.append((r.id, doc, f"event {r.event_id!r} of session {r.session_id!r}"))
        self._bulk(self.index, rows)

    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        base = {"app_name": scope.app_name, "user_id": scope.user_id, "session_id": session_id}
        key = lambda e: scope_key(scope.app_name, scope.user_id, session_id, e)  # noqa: E731
        self._bulk(self.ledger, [(key(e), {**base, "event_id": e}, f"ledger of event {e!r}") for e in event_ids])

    def _bulk(self, index: str, rows: Sequence[tuple[str, dict[str, Any], str]]) -> None:
        """Index ``rows`` (id, document, what it is) in requests of at most ``BULK_BYTES`` and
        ``BULK_DOCS``, each confirmed and visible before the next; a failed item fails the call."""
        chunk: list[tuple[bytes, str]] = []
        size = 0
        for doc_id, doc, label in rows:
            action = json.dumps({"index": {"_index": index, "_id": doc_id}})
            data = f"{action}\n{json.dumps(doc, ensure_ascii=False)}\n".encode()
            if chunk and (size + len(data) > BULK_BYTES or len(chunk) == BULK_DOCS):
                self._send(chunk)
                chunk, size = [], 0
            chunk.append((data, label))
            size += len(data)
        if chunk:
            self._send(chunk)

    def _send(self, chunk: list[tuple[bytes, str]]) -> None:
        resp = self.client.bulk(body=b"".join(data for data, _ in chunk), refresh="wait_for")
        if not resp.get("errors"):
            return
        items = [item.get("index", {}) for item in resp["items"]]
        failed = [(label, item["error"]) for (_, label), item in zip(chunk, items, strict=True) if item.get("error")]
        label, err = failed[0]
        raise Incomplete(
            f"{len(failed)} of {len(chunk)} writes failed; first: {label}: {err.get('type')}: {err.get('reason')}. "
            "What failed is not marked saved: the next save retries it"
        )

    # -- reads -----------------------------------------------------------------------------------

    @staticmethod
    def _scope(scope: Scope, *more: dict[str, Any]) -> dict[str, Any]:
        terms = [{"term": {"app_name": scope.app_name}}, {"term": {"user_id": scope.user_id}}, *more]
        return {"bool": {"filter": terms}}

    def _hits(self, index: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        body = {**body, "track_total_hits": False}
        return self.client.search(index=index, body=body, allow_partial_search_results=False)["hits"]["hits"]

    def _scored(self, body: dict[str, Any]) -> list[tuple[MemoryRecord, float]]:
        hits = self._hits(self.index, {**body, "_source": ["doc"]})
        return [(MemoryRecord.model_validate(h["_source"]["doc"]), h["_score"]) for h in hits]

    def _fulltext(self, scope: Scope, query: Query, k: int) -> list[tuple[MemoryRecord, float]]:
        match = {"match": {"terms": {"query": " ".join(query.terms), "operator": "or"}}}
        return self._scored({"size": k, "query": {"bool": {**self._scope(scope)["bool"], "must": [match]}}})

    def _nearest(self, scope: Scope, vector: np.ndarray, k: int) -> list[tuple[MemoryRecord, float]]:
        knn = {"vector": vector.astype(np.float32).tolist(), "k": k, "filter": self._scope(scope)}
        return self._scored({"size": k, "query": {"knn": {"embedding": knn}}})

    def _count_of(self, query: dict[str, Any]) -> int:
        resp = self.client.count(index=self.index, body={"query": query})
        if resp["_shards"].get("failed"):
            raise Incomplete(f"{resp['_shards']['failed']} of {resp['_shards']['total']} shards did not answer")
        return int(resp["count"])

    def _count(self, scope: Scope) -> int:
        return self._count_of(self._scope(scope))

    def _page(self, scope: Scope, cursor: Any, size: int) -> tuple[list[MemoryRecord], Any]:
        body = {"size": size, "query": self._scope(scope), "sort": [{"timestamp": "asc"}, {"record_id": "asc"}]}
        if cursor is not None:
            body["search_after"] = cursor
        hits = self._hits(self.index, {**body, "_source": ["doc"]})
        records = [MemoryRecord.model_validate(h["_source"]["doc"]) for h in hits]
        return records, (hits[-1]["sort"] if len(hits) == size else None)

    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        query = self._scope(scope, {"term": {"session_id": session_id}})
        body: dict[str, Any] = {"size": LEDGER_PAGE, "_source": False, "query": query, "sort": [{"event_id": "asc"}]}
        saved: set[str] = set()
        while True:
            hits = self._hits(self.ledger, body)
            saved.update(h["sort"][0] for h in hits)
            if len(hits) < LEDGER_PAGE:
                return saved
            body["search_after"] = hits[-1]["sort"]

    # -- erase -------------------------------------------------------------------------------------

    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        if ids is not None:
            query = self._scope(scope, {"terms": {"record_id": list(ids)}})
        elif session_id is not None:
            query = self._scope(scope, {"term": {"session_id": session_id}})
        else:
            query = self._scope(scope)
        deleted, problem, body = 0, "it timed out", {"query": query}
        for _ in range(ERASE_ROUNDS):
            try:
                resp = self.client.delete_by_query(index=self.index, body=body, refresh=True, conflicts="proceed")
            except self._os.exceptions.TransportError as exc:  # failures (e.g. 429 rejections) come with a status
                if not (isinstance(exc.info, dict) and exc.info.get("failures")):
                    raise
                resp = exc.info
            deleted += int(resp.get("deleted", 0))
            failures, conflicts = resp.get("failures") or [], int(resp.get("version_conflicts", 0))
            if not failures and not conflicts and not resp.get("timed_out"):
                return deleted
            problem = f"first failure: {str(failures[0])[:300]}" if failures else f"{conflicts} version conflicts"
            self.client.indices.refresh(index=self.index)
            if self._count_of(query) == 0:
                return deleted
        raise Incomplete(
            f"erasing did not finish in {ERASE_ROUNDS} rounds of delete_by_query ({problem}); {deleted} memories went, "
            "others are still stored. Erase again"
        )
