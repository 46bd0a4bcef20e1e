"""The Qdrant engine on qdrant-client: a Qdrant server by URL, or the client's local mode.

The seam: ``QdrantBackend`` spells ``common.QdrantEngine``'s hooks with the SYNC
``qdrant_client.QdrantClient``, for a server (8 threads, each call within ``timeout``) or in
local mode on ``path`` (``engine="local"``; one thread). ``from_config`` picks a server when
one is configured, else an embedded store on ``path``: qdrant-edge (``edge.py``) or local mode.

Why the ledger is a collection, ``<collection>.ledger``: it lives and dies with the store, on
a server and in local mode alike (docs/backends.md). **Not tested against a Qdrant server**:
none runs where this is built; the server path is local mode's client calls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ...config import env, parse_backend_config, redact_url
from ...config.backends import QdrantConfig, resolve_qdrant_url
from ...core.engine import Engine
from ...errors import ConfigurationError, require
from ...records import MemoryRecord, Scope
from .common import DENSE, SCOPE_FIELDS, SPARSE, QdrantEngine, collection_name, name_id

#: Points per request (a server refuses very large request bodies).
BATCH = 256


class QdrantBackend(QdrantEngine):
    unreachable: ClassVar[str] = "Start it, or set LONGTERM_QDRANT_URL / backend_config['url'] (or 'path')."

    def __init__(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        path: str | None = None,
        prefix: str = "longterm_",
        index: str = "default_app",
        timeout: float = 10.0,
        **hybrid: Any,
    ) -> None:
        self._qc = require("qdrant_client", package="qdrant-client", extra="qdrant", purpose="The qdrant backend")
        self._m = self._lib = self._qc.models
        if not url and not path:
            raise ConfigurationError("the qdrant backend needs a server url or an embedded path.")
        self.url, self.api_key = url, api_key
        self.path = None if url else str(Path(str(path)).expanduser())
        self.collection = collection_name(prefix, index)
        self.ledger = f"{self.collection}.ledger"
        where = redact_url(url) if url else str(self.path)
        workers, deadline = (8, timeout) if url else (1, None)
        store_id = f"qdrant:{where}#{self.collection}"
        super().__init__(where=where, store_id=store_id, workers=workers, timeout=deadline, **hybrid)
        self._client: Any = None

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> Engine:
        cfg = parse_backend_config(QdrantConfig, config, cls.name)
        url = resolve_qdrant_url(cfg)
        path = cfg.path or str(root / "qdrant")
        if url is None and cfg.engine == "edge":
            from .edge import QdrantEdgeBackend

            return QdrantEdgeBackend(path, index=cfg.index, **cfg.hybrid_kwargs())
        key = cfg.api_key or env("LONGTERM_QDRANT_API_KEY")
        kw = {"prefix": cfg.prefix, "index": cfg.index, "timeout": cfg.timeout, **cfg.hybrid_kwargs()}
        return cls(url=url, api_key=key, path=path, **kw)

    # -- preparing --------------------------------------------------------------------------

    def _open(self) -> None:
        m = self._m
        if self._client is None and self.url:
            timeout = math.ceil(self.timeout or 10)
            self._client = self._qc.QdrantClient(
                url=self.url, api_key=self.api_key, timeout=timeout, check_compatibility=False
            )
        elif self._client is None:
            Path(str(self.path)).mkdir(parents=True, exist_ok=True, mode=0o700)
            self._client = self._qc.QdrantClient(path=self.path)
        dense = {DENSE: m.VectorParams(size=self.embedder.dim, distance=m.Distance.COSINE)} if self.embedder else {}
        text = {SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)}
        self._create(self.collection, dense, text, SCOPE_FIELDS)
        self._create(self.ledger, {}, None, (*SCOPE_FIELDS, "session_id"))

    def _create(self, name: str, vectors: dict[str, Any], sparse: Any, fields: Sequence[str]) -> None:
        c = self._client
        if c.collection_exists(name):
            return
        try:
            c.create_collection(name, vectors_config=vectors, sparse_vectors_config=sparse)
        except Exception as exc:  # another process made it first
            if "already exists" not in str(exc):
                raise
        for field in fields if self.url else ():  # local mode has no payload indexes
            c.create_payload_index(name, field_name=field, field_schema=self._m.PayloadSchemaType.KEYWORD)

    def _close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- hooks ------------------------------------------------------------------------------

    def _upsert(self, collection: str, points: list[Any]) -> None:
        for start in range(0, len(points), BATCH):
            self._client.upsert(collection, points=points[start : start + BATCH], wait=True)

    def _write(self, records: Sequence[MemoryRecord], vectors: np.ndarray | None) -> None:
        self._upsert(self.collection, [self._m.PointStruct(**p) for p in self._points(records, vectors)])

    def _has_id(self, point_ids: list[str]) -> Any:
        return self._m.HasIdCondition(has_id=point_ids)

    def _query(self, scope: Scope, vector: Any, using: str, k: int) -> list[Any]:
        flt = self._filter(scope)
        return self._client.query_points(self.collection, vector, using=using, query_filter=flt, limit=k).points

    def _rrf(self, scope: Scope, sparse: Any, dense: list[float], k: int) -> list[Any]:
        m, flt, depth = self._m, self._filter(scope), self.hybrid.depth(k)
        arms = [m.Prefetch(query=q, using=u, filter=flt, limit=depth) for q, u in ((sparse, SPARSE), (dense, DENSE))]
        return self._client.query_points(
            self.collection, m.FusionQuery(fusion=m.Fusion.RRF), prefetch=arms, limit=k
        ).points

    def _scroll(self, flt: Any, cursor: Any, size: int) -> tuple[list[Any], Any]:
        return self._client.scroll(self.collection, scroll_filter=flt, limit=size, offset=cursor)

    def _count_where(self, flt: Any) -> int:
        return int(self._client.count(self.collection, count_filter=flt, exact=True).count)

    def _delete_where(self, flt: Any) -> None:
        self._client.delete(self.collection, points_selector=self._m.FilterSelector(filter=flt), wait=True)

    # -- the ledger collection: handled events, and meta ------------------------------------

    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        flt, cursor, saved = self._filter(scope, session_id=session_id), None, set[str]()
        while True:
            points, cursor = self._client.scroll(self.ledger, scroll_filter=flt, limit=1000, offset=cursor)
            saved.update(str(p.payload["event_id"]) for p in points)
            if cursor is None:
                return saved

    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        key = (scope.app_name, scope.user_id, session_id)
        entry = {"app_name": scope.app_name, "user_id": scope.user_id, "session_id": session_id}
        points = [
            self._m.PointStruct(id=name_id(*key, e), vector={}, payload={**entry, "event_id": e}) for e in event_ids
        ]
        self._upsert(self.ledger, points)

    def _meta_get(self, key: str) -> str | None:
        got = self._client.retrieve(self.ledger, [name_id("meta", key)])
        return str(got[0].payload["value"]) if got else None

    def _meta_set(self, key: str, value: str) -> None:
        point = self._m.PointStruct(id=name_id("meta", key), vector={}, payload={"meta": key, "value": value})
        self._upsert(self.ledger, [point])
