"""The OpenSearch engine's erases in marked steps, and its reads that leave out what they cover.

The seam: ``OpenSearchErasures``, a base of ``OpenSearchBackend``, implements ``core.erasures``'
four primitives and ``_remove``, and ``_searches(scope, bodies)``, the one way a read of records
is asked. The store's clock is the ``_version`` of one document of the data index (``CLOCK_ID``):
each write reads it (a realtime get) and stamps what it writes with it (``SAVED``); an erase moves
it (an index request: the version it made) and writes its mark, a document of the data index
beside the records (``schema.MARKED``: the scope's tag, the ``Erasure`` as JSON, and the clock
just before its move, which every save that read the clock before the move holds at most and
every later one exceeds), refreshed at once. ``_erasure_covered`` tombstones what the mark covers
(of its scope, session or ids, saved at or before its clock, or never stamped) a page of
``ERASE_PAGE`` at a time, each only if unchanged since read (``if_seq_no``). ``_remove`` of ids
(an erase by date or filter, an expiry sweep, one memory) is marked too: ids of ``MARK_IDS`` a
mark, all marked before the first is swept.
``_searches`` sends the scope's marks query with the read's bodies in one ``_msearch``; when
the scope has marks (an erase under way, here or in any process) it asks again with each mark's
clause in the bodies' ``must_not`` (``hidden``), so a top k is cut after it.

Why a document's ``_version``: "saved before the erase" must be decided by the store, not by
clients' clocks; a save only reads it (no write more, no conflict between writers; a save into a
blocked index fails on its own records, named), an erase moves it with one index request, and the
one document lives and moves with the records. Why a ``_version``, not the records'
``_seq_no``: each shard numbers its own writes, and an index may have many. A clock behind the
stamps (an index reindexed or restored: versions start again at 1) would let an erase miss
records, so ``_clock_ahead`` moves it past every stamp on open. Why in the read's ``_msearch``:
another process's mark is honoured on the next read, and a scope without marks (nearly always)
costs one tiny search more in the same round trip; a scope with some costs a second round trip.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import override

from ...core.erasures import Erasure, ErasureMarks
from ...core.scope import scope_key
from ...errors import BackendError
from ...records import Scope
from .bulk import BULK_DOCS, Incomplete, tombstones
from .schema import CLOCK_ID, ERASE_ROUNDS, MARK_AT, MARK_SCOPE, MARK_SPEC, SAVED

if TYPE_CHECKING:
    from ...core.erasures import MarkedErases

#: Records an erase tombstones a bulk request (read when it runs: a test makes it small).
ERASE_PAGE = BULK_DOCS
#: Ids one mark of an erase of ids holds (a ``terms`` query takes at most 65,536).
MARK_IDS = 10_000
#: Marks a read of a scope's (or of the store's) marks returns at most.
MARKS_MOST = 10_000
#: A mark's document id: ``MARK_PREFIX`` and the erasure's key.
MARK_PREFIX = "~erasure:"
#: An ``Erasure.filter``'s comparisons on ``timestamp`` as a ``range``'s.
RANGES = {"$lt": "lt", "$lte": "lte", "$gt": "gt", "$gte": "gte"}
#: An ``Erasure.filter``'s keys and the keyword fields they are.
KEYWORDS = {"id": "record_id", "session_id": "session_id"}


def stamped_before(before: float) -> dict[str, Any]:
    """Saved at or before ``before`` on the store's clock, or never stamped (written before marks)."""
    unstamped = {"bool": {"must_not": [{"exists": {"field": SAVED}}]}}
    return {"bool": {"should": [{"range": {SAVED: {"lte": int(before)}}}, unstamped], "minimum_should_match": 1}}


def filter_clauses(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An ``Erasure.filter`` as query clauses: ``id`` and ``session_id`` by equality or ``$in``,
    ``timestamp`` by its comparisons (what this engine's erases write)."""
    out: list[dict[str, Any]] = []
    for key, want in spec.items():
        if key == "timestamp" and isinstance(want, Mapping):
            out.append({"range": {"timestamp": {RANGES[op]: v for op, v in want.items()}}})
        elif key in KEYWORDS and isinstance(want, Mapping) and set(want) == {"$in"}:
            out.append({"terms": {KEYWORDS[key]: list(want["$in"])}})
        elif key in KEYWORDS and isinstance(want, str):
            out.append({"term": {KEYWORDS[key]: want}})
        else:
            raise BackendError(f"an erasure mark's filter on {key!r} cannot be read by this engine; upgrade longterm.")
    return out


def covered(erasure: Erasure) -> dict[str, Any]:
    """What ``erasure`` covers within its scope, as one clause."""
    parts = [] if erasure.before is None else [stamped_before(erasure.before)]
    if erasure.session_id is not None:
        parts.append({"term": {"session_id": erasure.session_id}})
    parts += filter_clauses(erasure.filter or {})
    return {"bool": {"filter": parts}}


def hidden(marks: Sequence[Erasure]) -> list[dict[str, Any]]:
    """The ``must_not`` clauses leaving out what ``marks`` cover."""
    return [covered(m) for m in marks]


def marks_of(response: dict[str, Any]) -> list[Erasure]:
    """The erasures a marks search found."""
    hits = response["hits"]["hits"]
    return [Erasure.of(h["_source"][MARK_SPEC], float(h["_source"][MARK_AT])) for h in hits]


class OpenSearchErasures(ErasureMarks):
    """The marked erases of ``OpenSearchBackend`` and its reads through marks (see the module docstring)."""

    if TYPE_CHECKING:  # ``OpenSearchBackend``'s
        client: Any
        index: str
        _os: Any
        erasing: MarkedErases | None

        @staticmethod
        def _scope(scope: Scope, *more: dict[str, Any], hide: Sequence[dict[str, Any]] = ()) -> dict[str, Any]: ...

        def _hits(self, index: str, body: dict[str, Any]) -> list[dict[str, Any]]: ...

        def _send(self, chunk: Any, tolerate: tuple[int, ...] = (409,)) -> list[int]: ...

        def _wait_for_shards(self, index: str, **more: Any) -> None: ...

    # -- the clock -------------------------------------------------------------------------------

    def _clock(self) -> int:
        """Where the store's clock is (0: never moved)."""
        reply = self.client.get(index=self.index, id=CLOCK_ID, _source=False, ignore=404)
        return int(reply["_version"]) if reply.get("found") else 0

    def _tick(self) -> int:
        """Move the store's clock; where it is now."""
        return int(self.client.index(index=self.index, id=CLOCK_ID, body={})["_version"])

    def _clock_ahead(self) -> None:
        """The clock moved to the latest stamp a record holds, if it is behind it (an index reindexed or
        restored: its versions start again); a clock ahead refuses the move (409), as it should."""
        body = {"size": 1, "query": {"exists": {"field": SAVED}}, "sort": [{SAVED: "desc"}], "_source": [SAVED]}
        latest = self._msearch([body])[0]["hits"]["hits"]
        if not latest:
            return
        try:
            at = int(latest[0]["_source"][SAVED])
            self.client.index(index=self.index, id=CLOCK_ID, body={}, version=at, version_type="external_gte")
        except self._os.exceptions.ConflictError:
            pass

    # -- marks -----------------------------------------------------------------------------------

    @override
    def _erasure_begin(self, erasure: Erasure) -> Erasure:
        before = self._tick() - 1  # a save that read the clock before the move holds at most this
        doc = {MARK_SCOPE: scope_key(erasure.app_name, erasure.user_id), MARK_SPEC: erasure.spec(), MARK_AT: before}
        self.client.index(index=self.index, id=MARK_PREFIX + erasure.key, body=doc, refresh="true")
        return erasure.stamped(float(before))

    @override
    def _erasure_covered(self, erasure: Erasure) -> int:
        """Tombstone what ``erasure`` covers, a page at a time, each only if unchanged since read: what
        changed (a concurrent write) is read again next round, and left when saved after the mark.
        The distinct records erased, however many rounds it took."""
        query = self._scope(erasure.scope, covered(erasure))
        gone: set[str] = set()
        idle, problem = 0, ""
        self.client.indices.refresh(index=self.index)  # every record a save confirmed is seen, refreshed or not
        while idle < ERASE_ROUNDS:
            body = {"size": ERASE_PAGE, "query": query, "_source": False, "seq_no_primary_term": True}
            hits = self._hits(self.index, {**body, "sort": [{"record_id": "asc"}]})
            if not hits:
                return len(gone)
            statuses = self._send(tombstones(self.index, hits), tolerate=(409, 429))
            done = {h["_id"] for h, status in zip(hits, statuses, strict=True) if status < 300}
            idle = 0 if done - gone else idle + 1
            gone |= done
            if len(done) < len(hits):
                problem = f"{len(hits) - len(done)} records changed while erasing, or the cluster was busy"
        raise Incomplete(
            f"erasing did not finish in {ERASE_ROUNDS} rounds without progress ({problem}); {len(gone)} memories "
            "went, others are still stored. Erase again (until then no search returns them)"
        )

    @override
    def _erasure_end(self, erasure: Erasure) -> None:
        self.client.delete(index=self.index, id=MARK_PREFIX + erasure.key, refresh="true", ignore=404)

    @override
    def _erasures_pending(self) -> list[Erasure]:
        query = {"exists": {"field": MARK_SCOPE}}
        body = {"size": MARKS_MOST, "query": query, "_source": [MARK_SPEC, MARK_AT], "sort": [{MARK_AT: "asc"}]}
        return marks_of(self._msearch([body])[0])

    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        """An erase of ids, marked as an erase of a scope is: every mark first, then the sweeps."""
        assert self.erasing is not None
        if ids is None:
            return self.erasing.erase(scope, session_id)
        wanted = sorted(set(ids))
        if not wanted:
            return 0
        self.erasing.finish()
        parts = [wanted[i : i + MARK_IDS] for i in range(0, len(wanted), MARK_IDS)]
        marks = [
            self._erasure_begin(Erasure(scope.app_name, scope.user_id, session_id, {"id": {"$in": p}})) for p in parts
        ]
        n = 0
        for mark in marks:
            n += self._erasure_covered(mark)
            self._erasure_end(mark)
        return n

    # -- reads through marks ---------------------------------------------------------------------

    def _marks_body(self, scope: Scope) -> dict[str, Any]:
        query = {"term": {MARK_SCOPE: scope_key(scope.app_name, scope.user_id)}}
        return {"size": MARKS_MOST, "query": query, "_source": [MARK_SPEC, MARK_AT]}

    def _searches(
        self, scope: Scope, bodies: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """The responses of the search ``bodies(hide)``, each leaving out what the scope's erasure marks
        cover (``hide``: the ``must_not`` clauses, ``[]`` without marks), in one round trip when the scope
        has none, two when it has."""
        marks, *responses = self._msearch([self._marks_body(scope), *bodies([])])
        found = marks_of(marks)
        return responses if not found else self._msearch(bodies(hidden(found)))

    def _msearch(self, bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """One ``_msearch`` of ``bodies`` over the data index; every response whole, or the first error
        raised as the client raises a search's. A 503 while the index's shards start (another worker
        created it a moment ago) waits for them, within the engine's timeout, and asks once more."""
        header = {"index": self.index, "allow_partial_search_results": False}
        lines = [line for body in bodies for line in (header, {"track_total_hits": False, **body})]
        responses: list[dict[str, Any]] = self.client.msearch(body=lines)["responses"]
        if any(_starting(r) for r in responses):
            self._wait_for_shards(self.index, wait_for_no_initializing_shards=True)
            responses = self.client.msearch(body=lines)["responses"]
        for r in responses:
            if "error" in r:
                error, status = r["error"], int(r.get("status", 500))
                kind = self._os.exceptions.HTTP_EXCEPTIONS.get(status, self._os.exceptions.TransportError)
                raise kind(status, error.get("type", "error") if isinstance(error, dict) else str(error), error)
            if r.get("_shards", {}).get("failed"):  # never a partial answer
                raise Incomplete(f"{r['_shards']['failed']} of {r['_shards']['total']} shards did not answer")
        return responses


def _starting(response: dict[str, Any]) -> bool:
    error = response.get("error")
    return response.get("status") == 503 and "search_phase_execution_exception" in str(error)
