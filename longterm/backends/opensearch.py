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
import re
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..config import parse_backend_config, redact_url
from ..config.backends import OpenSearchConfig, resolve_auth, resolve_hosts
from ..core.engine import Engine, Query, unsaved
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
#: Rounds in a row that erase nothing (every item changed since read, or rejected) before an erase gives up.
ERASE_ROUNDS = 5
#: What an erase leaves in a record's place: no text, no scope, nothing a query or an aggregation
#: matches; a create of that id (a save planned before the erase) fails on it and is left out.
TOMBSTONE: dict[str, Any] = {"erased": True}
#: Seconds ``_purge`` waits for retention leases to let go of erased documents (they renew every 30 s).
PURGE_WAIT = 45.0
#: ``_meta`` keys naming the index as the caller does (``_indices``): its name is sanitised.
INDEX_META, PREFIX_META = "index", "prefix"
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
        self.cfg = cfg
        self.index = index_name(cfg.prefix, cfg.index)
        self.ledger = self.index + LEDGER_SUFFIX
        hosts = ", ".join(redact_url(h) for h in self.hosts)
        store, where = f"opensearch:{hosts}#{self.index}", f"{hosts} (index {self.index})"
        super().__init__(where=where, store_id=store, workers=cfg.workers, timeout=cfg.timeout, **cfg.hybrid_kwargs())
        self._orphans: list[Any] = []
        """Clients inherited from a parent process (``_forget_after_fork``): kept, never closed."""
        self.client = self._connect()

    def _connect(self) -> Any:
        """A client with a connection pool of its own."""
        cfg = self.cfg
        # Three tries (a request to a dead node goes to another) fit in the caller's deadline.
        retry = {"timeout": max(1.0, (cfg.timeout or 30.0) / 3), "max_retries": 2, "retry_on_timeout": True}
        tls = {"verify_certs": cfg.verify_certs, "ca_certs": cfg.ca_certs, "ssl_show_warn": cfg.verify_certs}
        return self._os.OpenSearch(self.hosts, http_auth=self.auth, pool_maxsize=cfg.workers, **tls, **retry)

    def _forget_after_fork(self) -> None:
        # urllib3's pooled sockets are the parent's: kept unclosed here, a new client opens its own.
        self._orphans.append(self.client)
        self.client = self._connect()

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
            "erased": {"type": "boolean"},
        }
        settings: dict[str, Any] = {"analysis": ANALYSIS}
        if self.embedder is not None:
            settings["knn"] = True
            method = {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}
            props["embedding"] = {"type": "knn_vector", "dimension": self.embedder.dim, "method": method}
        meta = {"embedder": self.embedder.id if self.embedder is not None else ""}
        names = {INDEX_META: self.cfg.index, PREFIX_META: self.cfg.prefix}
        if not self._create(self.index, settings, {"properties": props, "_meta": {**meta, **names}}):
            have = self._metas()  # made by an earlier release: name it now, and map the tombstones' field
            if INDEX_META not in have:
                body = {"_meta": {**have, **names}, "properties": {"erased": props["erased"]}}
                self.client.indices.put_mapping(index=self.index, body=body)
        ledger = dict.fromkeys(("app_name", "user_id", "session_id", "event_id"), KEYWORD)
        self._create(self.ledger, {}, {"dynamic": "strict", "properties": ledger})
        # Another worker may have created them a moment ago: a search before their shards start is a 503.
        self._wait_for_shards(f"{self.index},{self.ledger}")

    def _wait_for_shards(self, index: str, **more: Any) -> None:
        """Until the primary shards of ``index`` (comma-separated names) are started, within the
        engine's timeout (a timeout there is the health API's 408: "retry soon")."""
        limit = self.timeout or 30
        wait = {"timeout": f"{limit:g}s", "request_timeout": limit + 5}
        self.client.cluster.health(index=index, wait_for_status="yellow", **wait, **more)

    def _create(self, index: str, settings: dict[str, Any], mappings: dict[str, Any]) -> bool:
        """Create ``index`` unless it exists; whether this call created it."""
        if self.replicas is not None:
            settings = {**settings, "number_of_replicas": self.replicas}
        try:
            if not self.client.indices.exists(index=index):
                self.client.indices.create(index=index, body={"settings": {"index": settings}, "mappings": mappings})
                return True
        except self._os.exceptions.RequestError as exc:
            if "resource_already_exists" not in str(exc):
                raise
        return False

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

    def _commit_new(
        self,
        records: Sequence[MemoryRecord],
        vectors: np.ndarray | None,
        scope: Scope,
        session_id: str,
        event_ids: Sequence[str],
    ) -> None:
        """Records of the events the ledger does not hold, each written only where no document of
        its id is (``create``): a record written by another worker is left as it is, and one the user
        erased since the ledger was read has a tombstone there, so it stays erased. Then the marks,
        after the records (a crash between the two: the retry creates nothing twice and marks)."""
        records, vectors = unsaved(records, vectors, self._ledger_saved(scope, session_id))
        if records:
            self._write(records, vectors, op="create")
        if event_ids:
            self._ledger_mark(scope, session_id, event_ids)

    def _write(self, records: Sequence[MemoryRecord], vectors: np.ndarray | None, op: str = "index") -> None:
        rows = []
        for i, r in enumerate(records):
            data = r.model_dump(mode="json", exclude={"content"} if r.text_only_content() else None)
            # Words cut at 1,000 characters: Lucene refuses a term over 32,766 bytes (a hex dump).
            doc = {"record_id": r.id, **{k: data[k] for k in FILTERED}, "terms": segment(r.text, 1000), "doc": data}
            if vectors is not None:
                doc["embedding"] = vectors[i].astype(np.float32).tolist()
            rows.append((r.id, doc, f"event {r.event_id!r} of session {r.session_id!r}"))
        self._bulk(self.index, rows, op)

    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        base = {"app_name": scope.app_name, "user_id": scope.user_id, "session_id": session_id}
        key = lambda e: scope_key(scope.app_name, scope.user_id, session_id, e)  # noqa: E731
        self._bulk(self.ledger, [(key(e), {**base, "event_id": e}, f"ledger of event {e!r}") for e in event_ids])

    def _bulk(self, index: str, rows: Sequence[tuple[str, dict[str, Any], str]], op: str = "index") -> None:
        """Index ``rows`` (id, document, what it is) in requests of at most ``BULK_BYTES`` and
        ``BULK_DOCS``, each confirmed and visible before the next; a failed item fails the call.
        ``op="create"``: a row whose id exists is left out (that is no failure)."""
        chunk: list[tuple[bytes, str]] = []
        size = 0
        for doc_id, doc, label in rows:
            action = json.dumps({op: {"_index": index, "_id": doc_id}})
            data = f"{action}\n{json.dumps(doc, ensure_ascii=False)}\n".encode()
            if chunk and (size + len(data) > BULK_BYTES or len(chunk) == BULK_DOCS):
                self._send(chunk)
                chunk, size = [], 0
            chunk.append((data, label))
            size += len(data)
        if chunk:
            self._send(chunk)

    def _send(self, chunk: list[tuple[bytes, str]], tolerate: tuple[int, ...] = (409,)) -> list[int]:
        """One bulk request; each item's status. Items failing with a status in ``tolerate`` (a
        create whose id exists, a conditional write whose document changed) are the caller's."""
        resp = self.client.bulk(body=b"".join(data for data, _ in chunk), refresh="wait_for")
        items: list[dict[str, Any]] = [next(iter(item.values()), {}) for item in resp["items"]]
        statuses = [int(item.get("status", 200)) for item in items]
        if not resp.get("errors"):
            return statuses
        failed = [
            (label, item["error"])
            for (_, label), item, status in zip(chunk, items, statuses, strict=True)
            if item.get("error") and status not in tolerate
        ]
        if not failed:
            return statuses
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
        """A search's hits. A 503 "all shards failed" while the index's shards are still starting
        (another worker created it a moment ago; the client's own retries come at once) waits for
        them, within the engine's timeout, and asks once more."""
        body = {**body, "track_total_hits": False}

        def search() -> list[dict[str, Any]]:
            reply = self.client.search(index=index, body=body, allow_partial_search_results=False)
            hits: list[dict[str, Any]] = reply["hits"]["hits"]
            return hits

        try:
            return search()
        except self._os.exceptions.TransportError as exc:
            if exc.status_code != 503 or "search_phase_execution_exception" not in str(exc):
                raise
            self._wait_for_shards(index, wait_for_no_initializing_shards=True)
            return search()

    def _scored(self, body: dict[str, Any]) -> list[tuple[MemoryRecord, float]]:
        hits = self._hits(self.index, {**body, "_source": ["doc"]})
        return [(MemoryRecord.model_validate(h["_source"]["doc"]), h["_score"]) for h in hits]

    def _fulltext(self, scope: Scope, query: Query, k: int) -> list[tuple[MemoryRecord, float]]:
        match = {"match": {"terms": {"query": " ".join(query.terms), "operator": "or"}}}
        return self._scored({"size": k, "query": {"bool": {**self._scope(scope)["bool"], "must": [match]}}})

    def _nearest(self, scope: Scope, vector: np.ndarray, k: int) -> list[tuple[MemoryRecord, float]]:
        knn = {"vector": vector.astype(np.float32).tolist(), "k": k, "filter": self._scope(scope)}
        # Lucene's cosinesimil scores (1 + cos) / 2; the core takes cosine, as every engine gives it.
        return [(r, 2.0 * s - 1.0) for r, s in self._scored({"size": k, "query": {"knn": {"embedding": knn}}})]

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
        """Tombstone the records matching the erase, a page at a time, each only if unchanged since
        read (``if_seq_no``): what changed (a concurrent write) is read again next round. Returns the
        distinct records erased, however many rounds it took."""
        if ids is not None:
            query = self._scope(scope, {"terms": {"record_id": list(ids)}})
        elif session_id is not None:
            query = self._scope(scope, {"term": {"session_id": session_id}})
        else:
            query = self._scope(scope)
        gone: set[str] = set()
        idle, problem = 0, ""
        body = {"size": BULK_DOCS, "query": query, "_source": False, "seq_no_primary_term": True}
        self.client.indices.refresh(index=self.index)  # every record a save confirmed is seen, refreshed or not
        while idle < ERASE_ROUNDS:
            hits = self._hits(self.index, {**body, "sort": [{"record_id": "asc"}]})
            if not hits:
                return len(gone)
            chunk = []
            for h in hits:
                cond = {
                    "_index": self.index,
                    "_id": h["_id"],
                    "if_seq_no": h["_seq_no"],
                    "if_primary_term": h["_primary_term"],
                }
                chunk.append(
                    (f"{json.dumps({'index': cond})}\n{json.dumps(TOMBSTONE)}\n".encode(), f"record {h['_id']!r}")
                )
            statuses = self._send(chunk, tolerate=(409, 429))
            done = {h["_id"] for h, status in zip(hits, statuses, strict=True) if status < 300}
            idle = 0 if done - gone else idle + 1
            gone |= done
            if len(done) < len(hits):
                problem = f"{len(hits) - len(done)} records changed while erasing, or the cluster was busy"
        raise Incomplete(
            f"erasing did not finish in {ERASE_ROUNDS} rounds without progress ({problem}); {len(gone)} memories "
            "went, others are still stored. Erase again"
        )

    # -- listing, purging -------------------------------------------------------------------------

    def _scopes(self) -> list[tuple[str, str, int]]:
        sources = [{"a": {"terms": {"field": "app_name"}}}, {"u": {"terms": {"field": "user_id"}}}]
        composite: dict[str, Any] = {"size": 1000, "sources": sources}
        found: list[tuple[str, str, int]] = []
        while True:
            body = {"size": 0, "query": {"exists": {"field": "record_id"}}, "aggs": {"s": {"composite": composite}}}
            resp = self.client.search(index=self.index, body=body, allow_partial_search_results=False)
            agg = resp["aggregations"]["s"]
            found += [(b["key"]["a"], b["key"]["u"], int(b["doc_count"])) for b in agg["buckets"]]
            if not agg["buckets"] or "after_key" not in agg:
                return found
            composite["after"] = agg["after_key"]

    def _indices(self) -> list[str]:
        """This prefix's data indices holding a record, named as the caller named them: from the
        mapping's ``_meta``; an index of an earlier release (no name kept) by its name less the
        prefix (lower-cased, and ending in a digest where ``index_name`` changed it)."""
        head = re.sub("[^a-z0-9_-]", "_", self.cfg.prefix.lower()).lstrip("_-+")
        pattern = f"{head}*,-*{LEDGER_SUFFIX}"
        mappings = self.client.indices.get_mapping(index=pattern, allow_no_indices=True, ignore_unavailable=True)
        names: dict[str, str] = {}
        for physical, value in mappings.items():
            mapping = value.get("mappings", {})
            meta, props = mapping.get("_meta", {}), mapping.get("properties", {})
            if (
                "record_id" not in props
                or "doc" not in props
                or meta.get(PREFIX_META, self.cfg.prefix) != self.cfg.prefix
            ):
                continue  # not a longterm data index, or one of a longer prefix
            names[physical] = str(meta.get(INDEX_META) or physical[len(head) :])
        if not names:
            return []
        body = {
            "size": 0,
            "query": {"exists": {"field": "record_id"}},
            "aggs": {"i": {"terms": {"field": "_index", "size": len(names)}}},
        }
        resp = self.client.search(index=",".join(names), body=body, allow_partial_search_results=False)
        return sorted(names[b["key"]] for b in resp["aggregations"]["i"]["buckets"] if b["doc_count"])

    purges = True

    def _purge(self) -> None:
        """Flush the translog into segments, then merge the data index into one segment, which drops
        erased documents' bytes (Lucene keeps them until a merge). A deleted document that a retention
        lease still holds (every shard copy's, renewed every ``index.soft_deletes.retention_lease.sync_interval``,
        30 s by default) survives a merge: wait for the leases to pass this purge's start, then merge again."""
        wait = {"request_timeout": PURGE_WAIT + 30}
        self.client.indices.flush(index=self.index, **wait)
        start = {n: max(c["seq_no"]["max_seq_no"] for c in copies) for n, copies in self._shard_stats().items()}
        self._merge(wait)
        deadline = time.monotonic() + PURGE_WAIT
        while self._deleted_docs():
            shards = self._shard_stats()
            held = [
                lease
                for n, copies in shards.items()
                for c in copies
                for lease in c.get("retention_leases", {}).get("leases", [])
                if lease["retaining_seq_no"] <= start.get(n, -1)
            ]
            if not held:
                self._merge(wait)
                return
            if time.monotonic() > deadline:
                raise Incomplete(
                    f"{len(held)} retention leases still hold erased documents after {PURGE_WAIT:g} s (a replica "
                    "catching up?); they are merged away once the leases move on. Purge again in a minute"
                )
            time.sleep(1.0)

    def _merge(self, wait: dict[str, Any]) -> None:
        self.client.indices.forcemerge(index=self.index, max_num_segments=1, **wait)
        self.client.indices.refresh(index=self.index)  # searchers let go of the merged-away segments

    def _shard_stats(self) -> dict[str, list[dict[str, Any]]]:
        stats = self.client.indices.stats(index=self.index, level="shards")
        return dict(stats["indices"][self.index]["shards"])

    def _deleted_docs(self) -> int:
        stats = self.client.indices.stats(index=self.index, metric="docs")
        return int(stats["indices"][self.index]["total"]["docs"]["deleted"])
