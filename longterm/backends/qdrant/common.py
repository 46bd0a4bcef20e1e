"""What both Qdrant engines share: error rules, the payload, and ``QdrantEngine``, the primitives both spell alike.

The seam: ``client.py`` (qdrant-client: a server, or its local mode) and ``edge.py`` (qdrant-edge,
Qdrant's engine in this process) subclass ``QdrantEngine`` and spell a few hooks with their client
(``_has_id``, ``_query``, ``_rrf``, ``_scroll``, ``_count_where``, ``_delete_where``,
``_set_payloads``, ``_update_only``: an update's write, only over a point still there). One data
model for both (docs/backends.md): a collection per index, point ids the record ids read as UUIDs,
the record in the payload with its filter tokens (``tags.TAGS``), a sparse BM25 vector (computed on
the engine's thread) and, with an embedder, a dense one. The scope is always a structured payload
filter, never string matching; a ``where`` joins it in the same filter (``_scoped``,
``tags.condition``), so every read applies it before its cut: the vector and full-text queries,
Qdrant's RRF, counts, scrolls. A store written before the tokens gets them once at open
(``_tag_old_points``). A record that expires carries ``tags.EXPIRY`` too; a read made at a moment
leaves out what expired by then in the same filter, or, on an embedded store that never held a
record that expires, asks nothing more than an unfiltered read (``_may_expire``).

Both list their users (``_scopes``: one scroll of the index) and their indices
(``_indices``): an index keeps its logical name (``backend_config["index"]``) beside it, since
collection and directory names are sanitised (``ids``); one made before that is listed by its
physical name, and one naming another index refuses this one at open (``_claim``). A delete by
id matches the record's id exactly (``_exactly``), not every spelling of its UUID.

Lifetimes and fork: an embedded store is released when its engine is dropped (a
``weakref.finalize``, not ``__del__``). qdrant-client's local mode allows one client per path
in a process, so every index on a path shares one (``shared.local_client``, calls serialised). A
forked child must not use the embedded store its parent holds (``FORKED`` says why): its next
call raises; a client of a Qdrant server is dropped there unclosed and the child connects anew.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from typing_extensions import override

from ...core.aliases import Records, Vectors
from ...core.engine import Engine, Query
from ...core.errors import Rule
from ...core.neighbours import SCAN_PAGE, Sessions, by_session
from ...core.selection import Page
from ...core.where import Where, record_tokens
from ...errors import BackendError, BackendUnavailableError, ConfigurationError
from ...records import Hit, MemoryRecord, Scope, parse_record
from ...retrieval.sparse import document_vector, query_vector
from ..index_names import refuse_another
from .ids import point_id
from .tags import EXPIRING, EXPIRY, MARKER, TAGS, condition, expired, unexpiring

if TYPE_CHECKING:
    import numpy as np

SPARSE, DENSE = "text", "dense"
#: The payload key holding the whole record as JSON (beside the scope fields filters use).
RECORD = "record"
#: Payload fields of the scope, keyword-indexed where the engine indexes payloads.
SCOPE_FIELDS = ("app_name", "user_id")
#: The fields a packed payload keeps beside ``RECORD``: the scope's, the session, and the time
#: (session order is by time, then event id), which qdrant-edge indexes to read a hit's
#: neighbours without reading its whole session (``windows``), and the expiry (``tags.EXPIRY``,
#: range-indexed: reads made at a moment leave out what expired). Each key costs a write ~15 us.
PACKED_FIELDS = (*SCOPE_FIELDS, "session_id", "timestamp", EXPIRY)
#: Record fields left out of a payload (and its ``RECORD``) while None: a record that never expired
#: nor was corrected is stored as the previous release stored it, and no point carries a null ``EXPIRY``.
UNSET_WHEN_NONE = (EXPIRY, "updated_at")
ANOTHER_PROCESS = (
    "The embedded store is open in another process (one process per path). Use a Qdrant server "
    "(backend_config={'url': ...}) to share it, or another path."
)
#: A forked child's next call on an embedded store its parent holds. Why not open it afresh in
#: the child: the parent holds the store's exclusive lock (the child would be refused as another
#: process), and writing through the inherited handles would mix two processes' writes in one
#: write-ahead log and its segments, the parent's in-memory state unaware of them.
FORKED = (
    "the embedded Qdrant store at {where} is open in the parent process (pid {pid}) and an embedded store "
    "serves one process: this memory cannot be used in a forked child. Open a new LongTermMemory in the child "
    "after the fork (on another path, or once the parent has closed its own), or use a Qdrant server "
    "(backend_config={{'url': ...}}) to share one store between processes."
)
#: The meta key under which an index keeps its logical name (physical names are sanitised).
INDEX_KEY = "index"
THIS_PROCESS = (
    "This process has the embedded store open already, in another LongTermMemory on this path and index: "
    "use that memory, or close it first (close() or close_sync())."
)


class OpenHere(Exception):
    """An embedded store's lock is held by another memory of this process (``THIS_PROCESS``), not by
    another process: the lock alone cannot tell the two apart."""


def _status(*codes: int) -> Callable[[BaseException], bool]:
    """Matches a server's HTTP answer with one of ``codes``."""
    return lambda e: getattr(e, "status_code", None) in codes


RULES = (
    Rule(OpenHere, BackendUnavailableError, THIS_PROCESS),  # first: the BlockingIOError is its context
    Rule("already accessed by another instance", BackendUnavailableError, ANOTHER_PROCESS),
    Rule(BlockingIOError, BackendUnavailableError, ANOTHER_PROCESS),
    Rule(_status(401, 403), ConfigurationError, "Check LONGTERM_QDRANT_API_KEY or backend_config['api_key']."),
    # A server restarted empty: the core prepares the store again and retries once.
    Rule(_status(404), BackendError, "Check the url, and whether something deletes the collection.", reopen=True),
)


def to_record(payload: dict[str, Any]) -> MemoryRecord:
    """The record a point holds: as JSON under ``RECORD``, or spread out (stores of 0.1)."""
    packed = payload.get(RECORD)
    return parse_record(packed) if packed else MemoryRecord.model_validate(payload)


class QdrantEngine(Engine):
    name: ClassVar[str] = "qdrant"
    native_hybrid = True  # with fusion "rrf", Qdrant's own; otherwise the core's (``_search``)
    rewrites_alive = True  # Qdrant's update-only upsert (``_update_only``)
    purge_note: ClassVar[str] = (
        "Qdrant keeps an erased point in its write-ahead log until the log is flushed and in its segment until "
        "the vacuum optimizer rewrites it (when a fifth of a segment is deleted); longterm cannot force that"
    )
    rules: ClassVar[Sequence[Rule]] = RULES
    #: The client's models (``qdrant_client.models`` or ``qdrant_edge``): both spell filters
    #: and sparse vectors with the same names and keywords.
    _lib: Any
    #: The index name as the caller gave it (collection and directory names are sanitised).
    index: str
    #: The payload as ``PACKED_FIELDS`` plus the record as one JSON string (qdrant-edge converts a
    #: payload key by key, about 15 us each), or the record spread out: what every version reads,
    #: so a server shared by old and new processes during an upgrade (qdrant-client) stays readable.
    packed_payload: ClassVar[bool] = False
    #: The name of the client's float range model (qdrant-edge names it otherwise).
    range_type: ClassVar[str] = "Range"
    #: In a forked child whose parent held this embedded store: why it refuses (``FORKED``).
    _forked: str | None = None

    def _refuse_in_child(self) -> None:
        """First thing ``_open`` does: a forked child never touches its parent's embedded store."""
        if self._forked:
            raise BackendError(self._forked)

    def _forked_error(self) -> str:
        return FORKED.format(where=self.where, pid=os.getppid())

    def _claim(self, held: str | None, where: str) -> None:
        """At open, with the index name the store's meta holds (``INDEX_KEY``): this index's written
        where there is none; where it names another, the store closed and this index refused."""
        if held is None:
            self._meta_set(INDEX_KEY, self.index)
        elif held != self.index:
            self._close()
            refuse_another("qdrant", where, held, self.index)

    # -- hooks: each engine spells these with its client -------------------------------------

    def _has_id(self, point_ids: list[str]) -> Any:
        raise NotImplementedError

    def _query(self, flt: Any, vector: Any, using: str, k: int) -> list[Any]:
        """The ``k`` best points passing ``flt`` for ``vector`` (sparse or dense, named ``using``)."""
        raise NotImplementedError

    def _rrf(self, flt: Any, sparse: Any, dense: list[float], k: int) -> list[Any]:
        """The ``k`` best points passing ``flt``, both arms (each filtered) fused by Qdrant's own RRF."""
        raise NotImplementedError

    def _scroll(self, flt: Any, cursor: Any, size: int) -> tuple[list[Any], Any]:
        raise NotImplementedError

    def _count_where(self, flt: Any) -> int:
        raise NotImplementedError

    def _delete_where(self, flt: Any) -> None:
        raise NotImplementedError

    def _update_only(self, points: list[dict[str, Any]]) -> None:
        """``points`` (``_points``' fields) upserted in update-only mode: a point not there is not made."""
        raise NotImplementedError

    def _set_payloads(self, changes: list[tuple[Any, dict[str, Any]]]) -> None:
        """Each (point id, payload keys) set on that point while it still lacks ``TAGS`` (a point
        rewritten meanwhile keeps its own), its other keys, vectors and words untouched."""
        raise NotImplementedError

    # -- primitives --------------------------------------------------------------------------

    def _filter(
        self,
        scope: Scope,
        ids: Sequence[str] | None = None,
        session_id: str | None = None,
        sessions: Sequence[str] | None = None,
        also: Sequence[Any] = (),
    ) -> Any:
        """The scope's points (of ``ids``, of ``session_id``, of any of ``sessions``, meeting the
        conditions ``also``), as a payload filter."""
        lib, fields = self._lib, {"app_name": scope.app_name, "user_id": scope.user_id, "session_id": session_id}
        must = [lib.FieldCondition(key=k, match=lib.MatchValue(value=v)) for k, v in fields.items() if v is not None]
        must += also
        if ids is not None:
            must.append(self._has_id([point_id(i) for i in ids]))
        if sessions is not None:
            must.append(lib.FieldCondition(key="session_id", match=lib.MatchAny(any=list(sessions))))
        return lib.Filter(must=must)

    def _scoped(self, scope: Scope, where: Where | None) -> Any:
        """The scope's filter with ``where``'s tree in it (``tags.condition``); None when the tree
        passes nothing (the caller then asks nothing)."""
        if where is None:
            return self._filter(scope)
        native = where.native if self._may_expire() else unexpiring(where)
        cond = condition(self._lib, native, self.range_type)
        if cond is False:
            return None
        return self._filter(scope, also=() if cond is True else (cond,))

    def _sparse(self, text: str, query: bool = False) -> Any:
        indices, values = query_vector(text) if query else document_vector(text)
        return self._lib.SparseVector(indices=indices, values=values)

    def _payload(self, r: MemoryRecord) -> dict[str, Any]:
        unset = {f for f in UNSET_WHEN_NONE if getattr(r, f) is None}
        payload = r.model_dump(mode="json", include=set(PACKED_FIELDS) if self.packed_payload else None, exclude=unset)
        if self.packed_payload:
            payload[RECORD] = r.model_dump_json(exclude=unset)
        payload[TAGS] = record_tokens(r)
        return payload

    def _may_expire(self) -> bool:
        """Whether the store may hold a record that expires (``EXPIRING`` in its meta, set before the
        first is written): while not, a read at a moment is the unfiltered read (``tags.unexpiring``).
        An embedded store (one process) keeps the answer; a server's others may write to: always True."""
        return True

    def _now_expiring(self) -> None:
        """The store's meta now holds ``EXPIRING``: ``_may_expire`` says so from here on."""

    def _note_expiring(self, records: Records) -> None:
        """Before ``records`` are written, the first time one of them expires: ``EXPIRING`` in the
        store's meta (set first: a write that fails after it leaves a store read as one that may hold
        some, which is right whatever it holds)."""
        if any(r.expires_at is not None for r in records) and not self._may_expire():
            self._meta_set(EXPIRING, "1")
            self._now_expiring()

    def _tag_old_points(self) -> None:
        """Once per store (``MARKER`` in its meta), at open: every point written before the filter
        tokens gets them (and, packed, the fields of ``PACKED_FIELDS`` it lacks), by payload alone.
        Run again after a crash, it takes up what is left; two processes running it set the same."""
        if self._meta_get(MARKER):
            return
        cursor: Any = None
        while True:
            points, cursor = self._scroll(None, cursor, 256)
            changes = [(p.id, self._additions(p.payload)) for p in points if TAGS not in (p.payload or {})]
            if changes:
                self._set_payloads(changes)
            if cursor is None:
                break
        self._meta_set(MARKER, "1")

    def _additions(self, payload: dict[str, Any]) -> dict[str, Any]:
        """What an old point's payload gains: its tokens, and the payload fields it lacks but the
        record as JSON (a point of 0.1, spread out, stays so)."""
        new = self._payload(to_record(payload))
        return {k: v for k, v in new.items() if k == TAGS or (k not in payload and k != RECORD)}

    def _points(self, records: Records, vectors: Vectors) -> Iterator[dict[str, Any]]:
        """Each record as a point's fields. No dense vector when the core sent none (no embedder,
        or a store made without one: ``vectors_off``); full text still works."""
        for i, r in enumerate(records):
            vector = {SPARSE: self._sparse(r.text)}
            if vectors is not None:
                vector[DENSE] = vectors[i].astype("float32").tolist()
            yield {"id": point_id(r.id), "vector": vector, "payload": self._payload(r)}

    @override
    def _rewrite(self, records: Records, vectors: Vectors) -> list[str]:
        """One update-only upsert (check and write in one operation); written: those still there after."""
        self._note_expiring(records)
        self._update_only(list(self._points(records, vectors)))
        held = {str(p.id) for p in self._stored([point_id(r.id) for r in records], False)}
        return [r.id for r in records if point_id(r.id) in held]

    def _stored(self, point_ids: list[str], dense: bool) -> list[Any]:
        """The points of ``point_ids`` the collection holds, with their payloads (and dense vectors)."""
        raise NotImplementedError

    def _changed(self, records: Records, vectors: Vectors) -> tuple[Records, Vectors]:
        """Of ``records`` (and their ``vectors``), those the collection does not hold exactly so: the
        same payload (the record: its sparse vector follows from its text, its dense one from the
        store's one embedder) and a dense vector where one is written. A second import writes nothing."""
        if not records:
            return records, vectors
        dense = vectors is not None
        held = {str(p.id): p for p in self._stored([point_id(r.id) for r in records], dense)}
        keep = []
        for i, r in enumerate(records):
            p = held.get(point_id(r.id))
            if p is None or p.payload != self._payload(r) or (dense and DENSE not in (p.vector or {})):
                keep.append(i)
        if len(keep) == len(records):
            return records, vectors
        return [records[i] for i in keep], None if vectors is None else vectors[keep]

    @override
    def _fulltext(
        self, scope: Scope, query: Query, k: int, where: Where | None = None
    ) -> list[tuple[MemoryRecord, float]]:
        flt = self._scoped(scope, where)
        points = [] if flt is None else self._query(flt, self._sparse(query.text, True), SPARSE, k)
        return [(to_record(p.payload), p.score) for p in points]

    @override
    def _nearest(
        self, scope: Scope, vector: np.ndarray, k: int, where: Where | None = None
    ) -> list[tuple[MemoryRecord, float]]:
        flt = self._scoped(scope, where)
        points = [] if flt is None else self._query(flt, vector.astype("float32").tolist(), DENSE, k)
        return [(to_record(p.payload), p.score) for p in points]

    @override
    def _search(
        self,
        scope: Scope,
        query: Query,
        vector: np.ndarray | None,
        k: int,
        degraded: str | None,
        where: Where | None = None,
    ) -> list[Hit]:
        if self.hybrid.fusion != "rrf" or vector is None:
            return self.searching.both_arms(scope, query, vector, k, degraded, where)
        flt = self._scoped(scope, where)
        if flt is None:
            return []
        points = self._rrf(flt, self._sparse(query.text, True), vector.astype("float32").tolist(), k)
        return [Hit(record=to_record(p.payload), score=p.score, arms={"rrf": p.score}) for p in points]

    @override
    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        """The scope's ``ids``, else its session's, else all. By ids: the points holding a record of
        exactly one of them, read first (in place of a count: no more calls), as every engine matches
        an id; a point id reads every spelling of one UUID alike (``ids.point_id``)."""
        if ids is not None:
            found = self._exactly(scope, ids)
            if found:
                self._delete_where(self._filter(scope, found))
            return len(found)
        flt = self._filter(scope, None, session_id)
        n = self._count_where(flt)
        if n:
            self._delete_where(flt)
        return n

    def _exactly(self, scope: Scope, ids: Sequence[str]) -> list[str]:
        """Of ``ids``, those a record of the scope has as its id exactly (their points scrolled)."""
        flt, cursor, wanted, found = self._filter(scope, ids), None, set(ids), set[str]()
        while True:
            points, cursor = self._scroll(flt, cursor, SCAN_PAGE)
            found.update(rid for p in points if (rid := to_record(p.payload).id) in wanted)
            if cursor is None:
                return sorted(found)

    @override
    def _count(self, scope: Scope, where: Where | None = None) -> int:
        flt = self._scoped(scope, where)
        return 0 if flt is None else self._count_where(flt)

    @override
    def _page(self, scope: Scope, cursor: Any, size: int, where: Where | None = None) -> Page:
        flt = self._scoped(scope, where)
        if flt is None:
            return [], None
        points, cursor = self._scroll(flt, cursor, size)
        return [to_record(p.payload) for p in points], cursor

    @override
    def _session_rows(self, scope: Scope, session_ids: Sequence[str]) -> Sessions:
        """One scroll of the scope's points of ``session_ids`` (a ``MatchAny`` on their session), paged when larger."""
        flt, cursor = self._filter(scope, sessions=session_ids), None
        found: list[MemoryRecord] = []
        while True:
            points, cursor = self._scroll(flt, cursor, SCAN_PAGE)
            found += [to_record(p.payload) for p in points]
            if cursor is None:
                return by_session(r for r in found if r.session_id in session_ids)

    @override
    def _scopes(self, at: float | None = None) -> list[tuple[str, str, int]]:
        """One scroll of the index, counting its points (alive ``at``) by (app, user)."""
        counts: Counter[tuple[str, str]] = Counter()
        cursor: Any = None
        while True:
            points, cursor = self._scroll(None, cursor, 1000)
            counts.update((p.payload["app_name"], p.payload["user_id"]) for p in points if not expired(p.payload, at))
            if cursor is None:
                return [(app, user, n) for (app, user), n in counts.items()]
