"""The OpenSearch engine: one index per ``index`` name holding every user, BM25 + k-NN, its ledger beside it.

The seam: ``OpenSearchBackend`` implements the engine primitives (``core.engine``) with the
sync ``opensearch-py`` client (thread-safe; one connection pool for the core's ``workers``
threads). Each try of a request has a third of the core's ``timeout``, and a request that
fails on one of ``hosts`` goes to another: a lost node costs a retry, not the caller's save.

Why so, in short (mappings, the ledger index and the longer story: docs/backends.md): the scope
is ``keyword`` filters, never query syntax, and so is a ``filters=`` (``filtering``: the filter
tokens of ``core.where``, in the same ``bool.filter``, before any cut; and so is expiry: a
``range`` on the ``double`` ``expires_at`` a record's document carries when it has one); bulk
requests are bounded and ``refresh=wait_for``, so a save that returned is searchable and a
failed item fails it, named; reads refuse partial results; an erase marks its intent first, so no
read returns what it erases from then on, goes again until nothing it erases is left, or says it
could not finish, and one killed part-way is finished by the next erase or open (``erasing``:
each write is stamped with the store's clock, each read asks with the scope's marks). An
overwrite of a record by id (``_write``) leaves its old words where an erase leaves them: in a
deleted Lucene document until a merge (``purge``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from typing_extensions import override

from ...config import parse_backend_config, redact_url
from ...config.backends import OpenSearchConfig, resolve_auth, resolve_hosts
from ...core.aliases import Records, Vectors
from ...core.engine import Engine, Query
from ...core.errors import Rule
from ...core.scope import scope_key
from ...core.searching import Scored
from ...core.selection import Page
from ...core.where import Where
from ...errors import BackendUnavailableError, ConfigurationError, InvalidInputError, require
from ...records import MemoryRecord, Scope
from ...retrieval.text import segment
from ..index_names import refuse_another
from .bulk import Chunk, changed, chunks, send, written_over
from .erasing import OpenSearchErasures
from .filtering import add_tokens, clauses, tokens_of
from .purge import purge
from .reads import OpenSearchReads
from .schema import (
    AUTH_HINT,
    BLOCKED_HINT,
    BUSY,
    ERASED,
    EXPIRES_AT,
    EXPIRY,
    FILTERED,
    INDEX_META,
    KNN_HINT,
    LEDGER_MAPPINGS,
    LEDGER_PAGE,
    LEDGER_SUFFIX,
    MARKED,
    PREFIX_META,
    SAVED,
    TLS_HINT,
    TOKENS,
    TOKENS_META,
    TOO_LARGE_HINT,
    data_index,
    index_name,
)

if TYPE_CHECKING:
    import numpy as np


class OpenSearchBackend(OpenSearchReads, OpenSearchErasures, Engine):
    name: ClassVar[str] = "opensearch"
    unreachable: ClassVar[str] = "Start it, or set LONGTERM_OPENSEARCH_URL / backend_config['url']."
    purges = True
    marks_erasures = True  # an erase is a page of tombstones at a time: its mark first (``erasing``)
    rewrites_alive = True  # a write over what was read only (``if_seq_no``), its stamp kept

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

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> OpenSearchBackend:
        return cls(parse_backend_config(OpenSearchConfig, config, cls.name))

    def _connect(self) -> Any:
        """A client with a connection pool of its own."""
        cfg = self.cfg
        # Three tries (a request to a dead node goes to another) fit in the caller's deadline.
        retry = {"timeout": max(1.0, (cfg.timeout or 30.0) / 3), "max_retries": 2, "retry_on_timeout": True}
        tls = {"verify_certs": cfg.verify_certs, "ca_certs": cfg.ca_certs, "ssl_show_warn": cfg.verify_certs}
        return self._os.OpenSearch(self.hosts, http_auth=self.auth, pool_maxsize=cfg.workers, **tls, **retry)

    @override
    def _forget_after_fork(self) -> None:
        # urllib3's pooled sockets are the parent's: kept unclosed here, a new client opens its own.
        self._orphans.append(self.client)
        self.client = self._connect()

    @override
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

    @override
    def _open(self) -> None:
        names = {INDEX_META: self.cfg.index, PREFIX_META: self.cfg.prefix}
        have: dict[str, Any] = {TOKENS_META: "1"}
        existed = not self._create(self.index, *data_index(self.embedder, names))
        if existed:
            # Made by an earlier release: name it now, map the tombstones' field, ``expires_at`` and the marks'
            # fields (before any write carries one); a current index is read once and left as it is.
            mapping = self._mapping()
            have = dict(mapping.get("_meta", {}))
            held = have.get(INDEX_META)  # another index's (its name made into this one): refused untouched
            refuse_another("opensearch", self.where, None if held is None else str(held), self.cfg.index)
            props = mapping.get("properties", {})
            body: dict[str, Any] = {}
            if INDEX_META not in have:
                body["_meta"] = {**have, **names}
            missing = {k: v for k, v in {**ERASED, **EXPIRY, **MARKED}.items() if k not in props}
            if missing:
                body["properties"] = missing
            if body:
                self.client.indices.put_mapping(index=self.index, body=body)
        self._create(self.ledger, {}, LEDGER_MAPPINGS)
        # Another worker may have created them a moment ago: a search before their shards start is a 503.
        self._wait_for_shards(f"{self.index},{self.ledger}")
        if existed:
            self._clock_ahead()
        if TOKENS_META not in have:
            add_tokens(self.client, self.index, lambda body: self._hits(self.index, body))
            self._meta_set(TOKENS_META, "1")  # records of an earlier release got their filter tokens, once

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

    def _mapping(self) -> dict[str, Any]:
        mapping = self.client.indices.get_mapping(index=self.index)
        return dict(next(iter(mapping.values()))["mappings"])

    def _metas(self) -> dict[str, Any]:
        return dict(self._mapping().get("_meta", {}))

    @override
    def _meta_get(self, key: str) -> str | None:
        value = self._metas().get(key)
        return None if value is None else str(value)

    @override
    def _meta_set(self, key: str, value: str) -> None:
        self.client.indices.put_mapping(index=self.index, body={"_meta": {**self._metas(), key: value}})

    @override
    def _close(self) -> None:
        self.client.close()

    # -- writes --------------------------------------------------------------------------------

    @override
    def _write_new(self, records: Records, vectors: Vectors) -> None:
        """Each record written only where no document of its id is (``create``): one written by another
        worker is left as it is, and one the user erased since the ledger was read has a tombstone
        there, so it stays erased (the core marks the ledger after, as on every save)."""
        self._write(records, vectors, op="create")

    @override
    def _write(self, records: Records, vectors: Vectors, op: str = "index") -> None:
        """Each record's document, stamped with the store's clock (``erasing``);
        ``op="index"``: only those the index does not hold exactly so."""
        rows = self._docs(records, vectors)
        rows = changed(self.client, self.index, rows) if op == "index" else rows
        if rows:
            now = self._clock()
            self._bulk(self.index, [(i, {**doc, SAVED: now}, label) for i, doc, label in rows], op)

    def _docs(self, records: Records, vectors: Vectors) -> list[tuple[str, dict[str, Any], str]]:
        """(id, document, what it is) of each record, unstamped."""
        rows = []
        for i, r in enumerate(records):
            data = r.model_dump(mode="json", exclude={"content"} if r.text_only_content() else None)
            # Words cut at 1,000 characters: Lucene refuses a term over 32,766 bytes (a hex dump).
            doc = {"record_id": r.id, **{k: data[k] for k in FILTERED}, "terms": segment(r.text, 1000)}
            doc |= {TOKENS: tokens_of(r), "doc": data}
            if r.expires_at is not None:
                doc[EXPIRES_AT] = r.expires_at
            if vectors is not None:
                doc["embedding"] = vectors[i].astype("float32").tolist()
            rows.append((r.id, doc, f"event {r.event_id!r} of session {r.session_id!r}"))
        return rows

    @override
    def _rewrite(self, records: Records, vectors: Vectors) -> list[str]:
        """Each record written over its document only if that is still the one read (``bulk.written_over``)."""
        return written_over(self.client, self.index, self._docs(records, vectors))

    @override
    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        base = {"app_name": scope.app_name, "user_id": scope.user_id, "session_id": session_id}
        key = lambda e: scope_key(scope.app_name, scope.user_id, session_id, e)  # noqa: E731
        self._bulk(self.ledger, [(key(e), {**base, "event_id": e}, f"ledger of event {e!r}") for e in event_ids])

    def _bulk(self, index: str, rows: Sequence[tuple[str, dict[str, Any], str]], op: str = "index") -> None:
        """Index ``rows`` (id, document, what it is) in bounded requests (``bulk.chunks``), each confirmed
        and visible before the next; a failed item fails the call (``op="create"``: an existing id is left out)."""
        for chunk in chunks(index, rows, op):
            self._send(chunk)

    def _send(self, chunk: Chunk, tolerate: tuple[int, ...] = (409,)) -> list[int]:
        return send(self.client, chunk, tolerate)

    # -- reads -----------------------------------------------------------------------------------

    @staticmethod
    def _scope(scope: Scope, *more: dict[str, Any], hide: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
        """The scope's records passing ``more``, less what ``hide`` matches (erasure marks: ``erasing.hidden``)."""
        terms = [{"term": {"app_name": scope.app_name}}, {"term": {"user_id": scope.user_id}}, *more]
        return {"bool": {"filter": terms, "must_not": list(hide)}} if hide else {"bool": {"filter": terms}}

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

    def _scored(self, scope: Scope, body: Callable[[list[dict[str, Any]]], dict[str, Any]]) -> Scored:
        """The records and scores of the search ``body(hide)`` (``_searches``: through the scope's marks)."""
        hits = self._searches(scope, lambda hide: [{**body(hide), "_source": ["doc"]}])[0]["hits"]["hits"]
        return [(MemoryRecord.model_validate(h["_source"]["doc"]), h["_score"]) for h in hits]

    @override
    def _fulltext(self, scope: Scope, query: Query, k: int, where: Where | None = None) -> Scored:
        match = {"match": {"terms": {"query": " ".join(query.terms), "operator": "or"}}}

        def body(hide: list[dict[str, Any]]) -> dict[str, Any]:
            narrowed = self._scope(scope, *clauses(where), hide=hide)["bool"]
            return {"size": k, "query": {"bool": {**narrowed, "must": [match]}}}

        return self._scored(scope, body)

    @override
    def _nearest(self, scope: Scope, vector: np.ndarray, k: int, where: Where | None = None) -> Scored:
        vec = vector.astype("float32").tolist()

        def body(hide: list[dict[str, Any]]) -> dict[str, Any]:
            # The filter inside the k-NN clause: Lucene's HNSW search keeps only what passes, then cuts at k.
            knn = {"vector": vec, "k": k, "filter": self._scope(scope, *clauses(where), hide=hide)}
            return {"size": k, "query": {"knn": {"embedding": knn}}}

        # Lucene's cosinesimil scores (1 + cos) / 2; the core takes cosine, as every engine gives it.
        return [(r, 2.0 * s - 1.0) for r, s in self._scored(scope, body)]

    @override
    def _count(self, scope: Scope, where: Where | None = None) -> int:
        def body(hide: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [{"size": 0, "track_total_hits": True, "query": self._scope(scope, *clauses(where), hide=hide)}]

        return int(self._searches(scope, body)[0]["hits"]["total"]["value"])

    @override
    def _page(self, scope: Scope, cursor: Any, size: int, where: Where | None = None) -> Page:
        return self._sorted(scope, clauses(where), cursor, size)

    def _sorted(self, scope: Scope, more: Sequence[dict[str, Any]], cursor: Any, size: int) -> Page:
        """A page of the scope's records passing ``more`` by (time, id) after ``cursor`` (None: the
        start), and the next."""
        order = [{"timestamp": "asc"}, {"record_id": "asc"}]
        after = {} if cursor is None else {"search_after": cursor}

        def body(hide: list[dict[str, Any]]) -> list[dict[str, Any]]:
            query = self._scope(scope, *more, hide=hide)
            return [{"size": size, "query": query, "sort": order, **after, "_source": ["doc"]}]

        hits = self._searches(scope, body)[0]["hits"]["hits"]
        records = [MemoryRecord.model_validate(h["_source"]["doc"]) for h in hits]
        return records, (hits[-1]["sort"] if len(hits) == size else None)

    @override
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

    @override
    def _ledger_sessions(self, scope: Scope) -> list[str]:
        """The scope's ledger sessions, a composite aggregation page at a time."""
        terms = {"composite": {"size": LEDGER_PAGE, "sources": [{"s": {"terms": {"field": "session_id"}}}]}}
        body: dict[str, Any] = {"size": 0, "query": self._scope(scope), "aggs": {"sessions": terms}}
        sessions: list[str] = []
        while True:
            agg = self.client.search(index=self.ledger, body=body)["aggregations"]["sessions"]
            sessions += [str(b["key"]["s"]) for b in agg["buckets"]]
            if len(agg["buckets"]) < LEDGER_PAGE or "after_key" not in agg:
                return sessions
            terms["composite"]["after"] = agg["after_key"]

    # -- listing, purging -------------------------------------------------------------------------

    @override
    def _purge(self) -> None:
        purge(self.client, self.index)
