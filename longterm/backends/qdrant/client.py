"""The Qdrant engine on qdrant-client: a Qdrant server by URL, or the client's local mode.

The seam: ``QdrantBackend`` spells ``common.QdrantEngine``'s hooks with the SYNC
``qdrant_client.QdrantClient``, for a server (8 threads, each call within ``timeout``) or in
local mode on ``path`` (``engine="local"``; one thread). ``from_config``: a server when one
is configured, else local mode on ``path`` (the ``qdrant`` backend name picks qdrant-edge there
unless ``engine="local"``: ``choice.py``).

Filters: a server keyword-indexes the tokens (``tags.TAGS``) and range-indexes the expiry
(``tags.EXPIRY``; local mode indexes nothing). A store made before them gets the indexes at open
(the expiry's empty: its points never expire) and each point its tokens, once; on a server each
point's change holds only while it still lacks them, so another process's rewrite meanwhile is kept.

Why the ledger is a collection, ``<collection>.ledger``: it lives and dies with the store, on
a server and in local mode alike (docs/backends.md); the index's logical name is a meta point
there (``_indices``; a collection naming another index refuses this one: ``index_names``). In
local mode every index on a path shares this process's one client of it
(``shared.local_client``), released when the last engine on it closes or is dropped.
**Not tested against a Qdrant server**: none runs where this is built; the server path is
local mode's client calls.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from typing_extensions import Unpack, override

from ...config import env, parse_backend_config, redact_url
from ...config.backends import QdrantConfig, resolve_qdrant_url
from ...config.hybrid import HybridOptions
from ...core.aliases import Records, Vectors
from ...core.fork import keep
from ...core.windows import Ask, TimeWindows
from ...errors import ConfigurationError, require
from ...records import MemoryRecord, Scope
from .common import DENSE, INDEX_KEY, SCOPE_FIELDS, SPARSE, QdrantEngine, to_record
from .ids import collection_name, name_id, physical_prefix
from .shared import Serial, Shared, local_client, release_local
from .tags import EXPIRING, EXPIRY, MARKER, TAGS

#: Points per request (a server refuses very large request bodies).
BATCH = 256


class QdrantBackend(TimeWindows, QdrantEngine):
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
        **hybrid: Unpack[HybridOptions],
    ) -> None:
        self._qc = require("qdrant_client", package="qdrant-client", extra="qdrant", purpose="The qdrant backend")
        self._m = self._lib = self._qc.models
        if not url and not path:
            raise ConfigurationError("the qdrant backend needs a server url or an embedded path.")
        self.url, self.api_key = url, api_key
        self.path = None if url else str(Path(str(path)).expanduser())
        self.index, self.prefix = index, prefix
        self.collection = collection_name(prefix, index)
        self.ledger = f"{self.collection}.ledger"
        where = redact_url(url) if url else str(self.path)
        workers, deadline = (8, timeout) if url else (1, None)
        store_id = f"qdrant:{where}#{self.collection}"
        super().__init__(where=where, store_id=store_id, workers=workers, timeout=deadline, **hybrid)
        self._client: Any = None
        self._shared: Shared | None = None
        self._release: weakref.finalize[Any, Any] | None = None
        """Closes the client (local mode: one user fewer of the path's) on close, or once dropped."""

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> QdrantBackend:
        """A server (``url``, ``host``, ``$LONGTERM_QDRANT_URL``), else local mode on ``path``."""
        cfg = parse_backend_config(QdrantConfig, config, cls.name)
        url = resolve_qdrant_url(cfg)
        path = cfg.path or str(root / "qdrant")
        key = cfg.api_key or env("LONGTERM_QDRANT_API_KEY")
        where = {"url": url, "api_key": key, "path": path}
        return cls(**where, prefix=cfg.prefix, index=cfg.index, timeout=cfg.timeout, **cfg.hybrid_kwargs())

    # -- preparing --------------------------------------------------------------------------

    @override
    def _open(self) -> None:
        self._refuse_in_child()
        m = self._m
        if self._client is None and self.url:
            timeout = math.ceil(self.timeout or 10)
            client = self._qc.QdrantClient(
                url=self.url, api_key=self.api_key, timeout=timeout, check_compatibility=False
            )
            self._client, self._release = client, weakref.finalize(self, client.close)
        elif self._client is None:
            shared = self._shared = local_client(str(self.path))
            self._client, self._release = (
                Serial(shared.client, shared.lock),
                weakref.finalize(self, release_local, shared),
            )
        dense = {DENSE: m.VectorParams(size=self.embedder.dim, distance=m.Distance.COSINE)} if self.embedder else {}
        text = {SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)}
        self._create(self.collection, dense, text, SCOPE_FIELDS)
        self._create(self.ledger, {}, None, (*SCOPE_FIELDS, "session_id"))
        self._claim(self._meta_get(INDEX_KEY), f"{self.where} (collection {self.collection})")
        if self.url and not self._meta_get(MARKER):  # the filter tokens' index, on a store made before it
            self._client.create_payload_index(
                self.collection, field_name=TAGS, field_schema=self._m.PayloadSchemaType.KEYWORD
            )
        if self.url and EXPIRY not in (self._client.get_collection(self.collection).payload_schema or {}):
            # a store made before expiry: its points have none (they never expire), the index starts empty
            self._client.create_payload_index(
                self.collection, field_name=EXPIRY, field_schema=self._m.PayloadSchemaType.FLOAT
            )
        self._tag_old_points()
        if self._shared is not None and self._meta_get(EXPIRING):  # local mode: one process per path
            self._shared.expiring.add(self.collection)

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
        if self.url and sparse is not None:  # a server orders by a range-indexed field (``_time_windows``)
            for field in ("timestamp", EXPIRY):  # and reads at a moment leave out what expired by then
                c.create_payload_index(name, field_name=field, field_schema=self._m.PayloadSchemaType.FLOAT)

    @override
    def _close(self) -> None:
        if self._release is not None:
            self._release()
        self._client = self._shared = self._release = None

    @override
    def _forget_after_fork(self) -> None:
        """A server's client is dropped unclosed (its sockets are the parent's) and made anew; a
        local-mode store the parent holds refuses from here on (``common.FORKED``)."""
        if self._release is not None:
            self._release.detach()
        if self._client is not None and self._shared is not None:
            self._forked = self._forked_error()
        elif self._client is not None:
            keep(self._client)
        self._client = self._shared = self._release = None

    @override
    def _indices(self) -> list[str]:
        """Every collection of this prefix holding points, by the logical name its ledger keeps
        (a collection made before it kept one: its name less the prefix)."""
        head, found = physical_prefix(self.prefix), []
        names = {c.name for c in self._client.get_collections().collections}
        for name in sorted(names):
            if not name.startswith(head) or name.endswith(".ledger") or not self._client.count(name).count:
                continue
            meta = (
                self._client.retrieve(f"{name}.ledger", [name_id("meta", INDEX_KEY)])
                if f"{name}.ledger" in names
                else []
            )
            found.append(str(meta[0].payload["value"]) if meta else name[len(head) :])
        return found

    # -- hooks ------------------------------------------------------------------------------

    @override
    def _may_expire(self) -> bool:
        """A server's: always (other processes write); local mode's: as the path's client keeps it,
        for every engine of this process on the collection."""
        return self._shared is None or self.collection in self._shared.expiring

    @override
    def _now_expiring(self) -> None:
        if self._shared is not None:
            self._shared.expiring.add(self.collection)

    def _upsert(self, collection: str, points: list[Any]) -> None:
        for start in range(0, len(points), BATCH):
            self._client.upsert(collection, points=points[start : start + BATCH], wait=True)

    @override
    def _update_only(self, points: list[dict[str, Any]]) -> None:
        mode, structs = self._m.UpdateMode.UPDATE_ONLY, [self._m.PointStruct(**p) for p in points]
        for start in range(0, len(structs), BATCH):
            self._client.upsert(self.collection, points=structs[start : start + BATCH], wait=True, update_mode=mode)

    @override
    def _stored(self, point_ids: list[str], dense: bool) -> list[Any]:
        got = self._client.retrieve(
            self.collection, point_ids, with_payload=True, with_vectors=[DENSE] if dense else False
        )
        return list(got)

    @override
    def _write(self, records: Records, vectors: Vectors) -> None:
        records, vectors = self._changed(records, vectors)
        if not records:
            return
        self._note_expiring(records)
        self._upsert(self.collection, [self._m.PointStruct(**p) for p in self._points(records, vectors)])

    @override
    def _time_windows(self, scope: Scope, asks: Sequence[Ask]) -> list[list[MemoryRecord]]:
        """Per ask, one scroll of its session ordered by time from its time (``core.windows``; on a
        server the range index on ``timestamp`` serves it, local mode orders in Python)."""
        m, out = self._m, []
        for a in asks:
            side = m.Range(lte=a.at) if a.before else m.Range(gte=a.at)
            flt = self._filter(scope, session_id=a.session_id, also=[m.FieldCondition(key="timestamp", range=side)])
            order = m.OrderBy(key="timestamp", direction="desc" if a.before else "asc")
            points, _ = self._client.scroll(self.collection, scroll_filter=flt, limit=a.limit, order_by=order)
            out.append([r for r in (to_record(p.payload) for p in points) if r.session_id == a.session_id])
        return out

    @override
    def _has_id(self, point_ids: list[str]) -> Any:
        return self._m.HasIdCondition(has_id=point_ids)

    @override
    def _query(self, flt: Any, vector: Any, using: str, k: int) -> list[Any]:
        return self._client.query_points(self.collection, vector, using=using, query_filter=flt, limit=k).points

    @override
    def _rrf(self, flt: Any, sparse: Any, dense: list[float], k: int) -> list[Any]:
        m, depth = self._m, self.hybrid.depth(k)
        arms = [m.Prefetch(query=q, using=u, filter=flt, limit=depth) for q, u in ((sparse, SPARSE), (dense, DENSE))]
        return self._client.query_points(
            self.collection, m.FusionQuery(fusion=m.Fusion.RRF), prefetch=arms, limit=k
        ).points

    @override
    def _scroll(self, flt: Any, cursor: Any, size: int) -> tuple[list[Any], Any]:
        return self._client.scroll(self.collection, scroll_filter=flt, limit=size, offset=cursor)

    @override
    def _count_where(self, flt: Any) -> int:
        return int(self._client.count(self.collection, count_filter=flt, exact=True).count)

    @override
    def _delete_where(self, flt: Any) -> None:
        self._client.delete(self.collection, points_selector=self._m.FilterSelector(filter=flt), wait=True)

    @override
    def _set_payloads(self, changes: list[tuple[Any, dict[str, Any]]]) -> None:
        """One request per batch; on a server each point's change holds only while it lacks ``TAGS``
        (a filter: another process may rewrite it meanwhile), in local mode (one process) by id."""
        m, ops = self._m, []
        for pid, payload in changes:
            if self.url:
                lacking = m.IsEmptyCondition(is_empty=m.PayloadField(key=TAGS))
                only = m.Filter(must=[m.HasIdCondition(has_id=[pid]), lacking])
                ops.append(m.SetPayloadOperation(set_payload=m.SetPayload(payload=payload, filter=only)))
            else:
                ops.append(m.SetPayloadOperation(set_payload=m.SetPayload(payload=payload, points=[pid])))
        for start in range(0, len(ops), BATCH):
            self._client.batch_update_points(self.collection, ops[start : start + BATCH], wait=True)

    # -- the ledger collection: handled events, and meta ------------------------------------

    @override
    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        flt, cursor, saved = self._filter(scope, session_id=session_id), None, set[str]()
        while True:
            points, cursor = self._client.scroll(self.ledger, scroll_filter=flt, limit=1000, offset=cursor)
            saved.update(str(p.payload["event_id"]) for p in points)
            if cursor is None:
                return saved

    @override
    def _ledger_sessions(self, scope: Scope) -> list[str]:
        """The scope's ledger sessions: a scroll of its entries' ``session_id`` (one point an event)."""
        flt, cursor, sessions = self._filter(scope), None, set[str]()
        while True:
            points, cursor = self._client.scroll(
                self.ledger, scroll_filter=flt, limit=1000, offset=cursor, with_payload=["session_id"]
            )
            sessions.update(str(p.payload["session_id"]) for p in points)
            if cursor is None:
                return sorted(sessions)

    @override
    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        key = (scope.app_name, scope.user_id, session_id)
        entry = {"app_name": scope.app_name, "user_id": scope.user_id, "session_id": session_id}
        points = [
            self._m.PointStruct(id=name_id(*key, e), vector={}, payload={**entry, "event_id": e}) for e in event_ids
        ]
        self._upsert(self.ledger, points)

    @override
    def _meta_get(self, key: str) -> str | None:
        got = self._client.retrieve(self.ledger, [name_id("meta", key)])
        return str(got[0].payload["value"]) if got else None

    @override
    def _meta_set(self, key: str, value: str) -> None:
        point = self._m.PointStruct(id=name_id("meta", key), vector={}, payload={"meta": key, "value": value})
        self._upsert(self.ledger, [point])
