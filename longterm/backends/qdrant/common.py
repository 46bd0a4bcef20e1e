"""What both Qdrant engines share: names, point ids, error rules, and
``QdrantEngine``, the primitives both spell alike.

The seam: ``client.py`` (qdrant-client: a server, or its local mode) and ``edge.py``
(qdrant-edge, Qdrant's engine in this process) subclass ``QdrantEngine`` and spell a few
hooks with their client (``_has_id``, ``_query``, ``_rrf``, ``_scroll``, ``_count_where``,
``_delete_where``). One data model for both (docs/backends.md): a collection per index,
point ids the record ids read as UUIDs, the record in the payload, a sparse BM25 vector
(computed on the engine's thread) and, with an embedder, a dense one. The scope is always
a structured payload filter, never string matching.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from ...core.engine import Engine, Query
from ...core.errors import Rule
from ...core.scope import safe_name
from ...errors import BackendError, BackendUnavailableError, ConfigurationError
from ...records import Hit, MemoryRecord, Scope, parse_record
from ...retrieval.sparse import document_vector, query_vector

SPARSE, DENSE = "text", "dense"
#: The payload key holding the whole record as JSON (beside the scope fields filters use).
RECORD = "record"
#: Payload fields of the scope, keyword-indexed where the engine indexes payloads.
SCOPE_FIELDS = ("app_name", "user_id")
_NAMES = uuid.UUID("9b1f0c52-5f8e-4a43-9d55-6c0e1f7d2a10")
ANOTHER_PROCESS = (
    "The embedded store is open in another process (one process per path). Use a Qdrant server "
    "(backend_config={'url': ...}) to share it, or another path."
)


def _status(*codes: int) -> Callable[[BaseException], bool]:
    """Matches a server's HTTP answer with one of ``codes``."""
    return lambda e: getattr(e, "status_code", None) in codes


RULES = (
    Rule("already accessed by another instance", BackendUnavailableError, ANOTHER_PROCESS),
    Rule(BlockingIOError, BackendUnavailableError, ANOTHER_PROCESS),
    Rule(_status(401, 403), ConfigurationError, "Check LONGTERM_QDRANT_API_KEY or backend_config['api_key']."),
    # A server restarted empty: the core prepares the store again and retries once.
    Rule(_status(404), BackendError, "Check the url, and whether something deletes the collection.", reopen=True),
)


def collection_name(prefix: str, index: str) -> str:
    """``prefix + index`` in ``[A-Za-z0-9_-]``, at most 200 characters (Qdrant allows 255, and a
    directory name as many bytes; the ledger's name is longer); distinct indexes stay distinct."""
    return safe_name(f"{prefix}{index}", "A-Za-z0-9_-", sep="_", limit=200)


def point_id(record_id: str) -> str:
    """A record's point id: its id read as a UUID (ours are 128-bit hex digests). Any other
    string (a foreign id, whatever a caller passes to delete) gets a name-based UUID of its
    own, so it can neither fail nor meet one of ours."""
    try:
        return str(uuid.UUID(hex=record_id))
    except ValueError:
        return str(uuid.uuid5(_NAMES, record_id))


def name_id(*parts: str) -> str:
    """A name-based UUID of ``parts`` (a ledger entry's, a meta key's)."""
    return str(uuid.uuid5(_NAMES, json.dumps(parts)))


def to_record(payload: dict[str, Any]) -> MemoryRecord:
    """The record a point holds: as JSON under ``RECORD``, or spread out (stores of 0.1)."""
    packed = payload.get(RECORD)
    return parse_record(packed) if packed else MemoryRecord.model_validate(payload)


class QdrantEngine(Engine):
    name: ClassVar[str] = "qdrant"
    rules: ClassVar[Sequence[Rule]] = RULES
    #: The client's models (``qdrant_client.models`` or ``qdrant_edge``): both spell filters
    #: and sparse vectors with the same names and keywords.
    _lib: Any
    #: The payload as the scope's fields plus the record as one JSON string (qdrant-edge converts a
    #: payload key by key, about 15 us each), or the record spread out: what every version reads,
    #: so a server shared by old and new processes during an upgrade (qdrant-client) stays readable.
    packed_payload: ClassVar[bool] = False

    # -- hooks: each engine spells these with its client -------------------------------------

    def _has_id(self, point_ids: list[str]) -> Any:
        raise NotImplementedError

    def _query(self, scope: Scope, vector: Any, using: str, k: int) -> list[Any]:
        """The scope's ``k`` best points for ``vector`` (sparse or dense, named ``using``)."""
        raise NotImplementedError

    def _rrf(self, scope: Scope, sparse: Any, dense: list[float], k: int) -> list[Any]:
        """The scope's ``k`` best points, both arms fused by Qdrant's own RRF."""
        raise NotImplementedError

    def _scroll(self, flt: Any, cursor: Any, size: int) -> tuple[list[Any], Any]:
        raise NotImplementedError

    def _count_where(self, flt: Any) -> int:
        raise NotImplementedError

    def _delete_where(self, flt: Any) -> None:
        raise NotImplementedError

    # -- primitives --------------------------------------------------------------------------

    def _filter(self, scope: Scope, ids: Sequence[str] | None = None, session_id: str | None = None) -> Any:
        lib, fields = self._lib, {"app_name": scope.app_name, "user_id": scope.user_id, "session_id": session_id}
        must = [lib.FieldCondition(key=k, match=lib.MatchValue(value=v)) for k, v in fields.items() if v is not None]
        if ids is not None:
            must.append(self._has_id([point_id(i) for i in ids]))
        return lib.Filter(must=must)

    def _sparse(self, text: str, query: bool = False) -> Any:
        indices, values = query_vector(text) if query else document_vector(text)
        return self._lib.SparseVector(indices=indices, values=values)

    def _points(self, records: Sequence[MemoryRecord], vectors: np.ndarray | None) -> Iterator[dict[str, Any]]:
        """Each record as a point's fields. No dense vector when the core sent none (no embedder,
        or a store made without one: ``vectors_off``); full text still works."""
        for i, r in enumerate(records):
            vector = {SPARSE: self._sparse(r.text)}
            if vectors is not None:
                vector[DENSE] = vectors[i].astype(np.float32).tolist()
            payload = r.model_dump(mode="json", include={*SCOPE_FIELDS, "session_id"} if self.packed_payload else None)
            if self.packed_payload:
                payload[RECORD] = r.model_dump_json()
            yield {"id": point_id(r.id), "vector": vector, "payload": payload}

    def _fulltext(self, scope: Scope, query: Query, k: int) -> list[tuple[MemoryRecord, float]]:
        return [(to_record(p.payload), p.score) for p in self._query(scope, self._sparse(query.text, True), SPARSE, k)]

    def _nearest(self, scope: Scope, vector: np.ndarray, k: int) -> list[tuple[MemoryRecord, float]]:
        points = self._query(scope, vector.astype(np.float32).tolist(), DENSE, k)
        return [(to_record(p.payload), p.score) for p in points]

    def _search(self, scope: Scope, query: Query, vector: np.ndarray | None, k: int, degraded: str | None) -> list[Hit]:
        if self.hybrid.fusion != "rrf" or vector is None:
            return super()._search(scope, query, vector, k, degraded)
        points = self._rrf(scope, self._sparse(query.text, True), vector.astype(np.float32).tolist(), k)
        return [Hit(record=to_record(p.payload), score=p.score, arms={"rrf": p.score}) for p in points]

    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        flt = self._filter(scope, ids, session_id)
        n = self._count_where(flt)
        if n:
            self._delete_where(flt)
        return n

    def _count(self, scope: Scope) -> int:
        return self._count_where(self._filter(scope))

    def _page(self, scope: Scope, cursor: Any, size: int) -> tuple[list[MemoryRecord], Any]:
        points, cursor = self._scroll(self._filter(scope), cursor, size)
        return [to_record(p.payload) for p in points], cursor
