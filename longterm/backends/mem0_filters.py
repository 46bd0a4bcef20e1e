"""Filters on mem0: a ``core.where`` tree as mem0's own ``filters=``, applied inside its vector store's query.

The seam: ``TAGS``, ``TIME`` and ``EXPIRY`` are the metadata keys ``Mem0Backend`` writes beside
each record (its filter tokens, ``core.where.record_tokens``, its ``timestamp``, and its
``expires_at`` when it expires); ``mem0_filters(user, where, expiring)`` is the ``filters=`` of
mem0's ``search`` and ``get_all`` for a scope's user (None when the tree passes nothing: the
caller asks nothing; ``expiring`` False: the store holds no memory that expires, and a read made
at a moment asks what an unfiltered one does); ``refusal(platform, config)`` says why a store
cannot filter (None when it can); ``tag_old(client, collection, by_filter)`` gives the memories
written before the tokens theirs, by payload alone; ``payloads(client, collection)`` reads every
memory's payload (listings). ``Mem0Expiry``, a base of ``Mem0Backend``, keeps whether a store may
hold a memory that expires (``EXPIRING`` in its meta, set before the first is written: while not,
a read at a moment asks what an unfiltered one does), and leaves what expired out of what a store
that cannot filter returned (after mem0's cut: a search there may return fewer than asked).

What mem0 supports, and what is refused:

- With a Qdrant vector store (the embedded default under ``path``, or a Qdrant server named in
  ``backend_config["config"]["vector_store"]``): every filter of ``core.filters``. Equality,
  ``$in``, ``$nin``, ``$ne``, ``$exists`` on metadata paths and on ``session_id``, ``author``,
  ``role``, ``$and``/``$or``/``$not``, ``timestamp`` in any way, and what expired by a read's
  moment (``core.where.alive``: "not ``EXPIRY`` <= now", as ``qdrant.tags`` says why) are applied exactly inside
  mem0's query (its vector search and its keyword search), before its top-k cut; a range over a
  metadata value (``{"n": {"$gt": 3}}``) narrows the query to the memories holding that path
  and the core checks the range on what mem0 returns, asking mem0 for more until enough pass
  (``core.where.deeper``), as on every engine.
- Refused with ``InvalidInputError`` (before anything is read), naming the store: any filter in
  platform mode (``api_key``: the hosted platform's filters are another language, on other
  fields), and any filter with another vector store (each of mem0's stores spells filters its
  own way; a list's ``in`` is not Qdrant's there).

Why the tree rides in a ``$or`` of one item: mem0's ``search`` (2.2) rewrites filters holding
``AND``/``OR``/``NOT`` or operators at their top level, merging an ``AND``'s conditions key by key
(two conditions on one key: the first is lost); ``{"user_id": ..., "$or": [tree]}`` holds none
there, so ``search`` and ``get_all`` alike hand it as it is to the Qdrant store's translation,
where ``$or`` and ``AND``/``OR``/``NOT`` become a ``Filter``'s ``should``/``must``/``must_not``,
``in`` a ``MatchAny`` and ``gt``/``lt`` a float range. ``tests/backends/test_mem0_filters.py``
holds this to the reference on the installed mem0.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.where import Has, Neg, Node, Or, Span, Where, record_tokens
from ..records import MemoryRecord, parse_record
from .qdrant.tags import EXPIRING, alive_moment, unexpiring

#: The metadata key holding a record's filter tokens (a list: Qdrant matches any element).
TAGS = "ftags"
#: The metadata key holding a record's ``timestamp`` (float seconds).
TIME = "ftime"
#: The metadata key holding a record's ``expires_at`` (float seconds), only when it expires (null on a
#: memory rewritten since without one: mem0 merges a rewrite's metadata; null is in no range).
EXPIRY = "fexp"
#: The meta key set once the memories written before ``TAGS`` have them.
MARKER = "filter_tags"
#: Points a request sets at most.
BATCH = 256
T = TypeVar("T")


class Mem0Expiry:
    """Whether a mem0 store may hold a memory that expires, and a read at a moment where mem0 cannot filter."""

    if TYPE_CHECKING:  # ``Mem0Backend``'s, which this is a base of
        _mem: Any
        _shared: Any
        _no_filters: str | None

        def _side(self) -> Any: ...

    def _may_expire(self) -> bool:
        """The embedded store (one process) keeps it in the path's client, which every engine of this
        process on the path shares; any other store may be written by others: always True."""
        return self._shared is None or self._mem.vector_store.collection_name in self._shared.expiring

    def _note_expiring(self, records: Sequence[MemoryRecord]) -> None:
        """Before ``records`` are written, the first time one of them expires: ``EXPIRING`` in the meta."""
        if self._shared is not None and not self._may_expire() and any(r.expires_at is not None for r in records):
            self._side().meta_set(EXPIRING, "1")
            self._shared.expiring.add(self._mem.vector_store.collection_name)

    def _alive(self, pairs: list[tuple[T, MemoryRecord]], where: Where | None) -> list[tuple[T, MemoryRecord]]:
        """What of ``pairs`` (memories, records) is alive at ``where``'s moment, on a store that cannot filter."""
        if where is None or self._no_filters is None:
            return pairs
        return [(i, r) for i, r in pairs if where.admits(r)]


def refusal(platform: bool, config: Mapping[str, Any]) -> str | None:
    """Why a mem0 store cannot apply a filter (None: it can): its platform mode or vector store."""
    if platform:
        where = "in mem0's platform mode (api_key: the hosted platform)"
    else:
        provider = (config.get("vector_store") or {}).get("provider") or "qdrant"
        if provider == "qdrant":
            return None
        where = f"with mem0's {provider!r} vector store"
    return (
        f"filters= cannot be applied {where}: longterm applies a filter inside mem0's own query only with "
        "a Qdrant vector store (the embedded default under 'path', or a Qdrant server in "
        "backend_config['config']['vector_store']), where every filter is supported. Search without filters=, "
        "or use such a store."
    )


def _tree(node: Node) -> Any:
    """``node`` in mem0's filter language, or True (passes everything) or False (nothing)."""
    now = alive_moment(node)
    if now is not None:
        return {"NOT": [{EXPIRY: {"lte": now}}]}
    if isinstance(node, Has):
        return {TAGS: {"in": list(node.tokens)}} if node.tokens else False
    if isinstance(node, Span):
        bounds: dict[str, float] = {}
        if node.lo is not None:
            bounds["gte" if node.lo_incl else "gt"] = node.lo
        if node.hi is not None:
            bounds["lte" if node.hi_incl else "lt"] = node.hi
        return {TIME if node.field == "timestamp" else EXPIRY: bounds} if bounds else True
    if isinstance(node, Neg):
        part = _tree(node.part)
        return (not part) if isinstance(part, bool) else {"NOT": [part]}
    parts = [_tree(p) for p in node.parts]
    decisive = isinstance(node, Or)  # a True part decides an Or, a False one an And
    if any(p is decisive for p in parts):
        return decisive
    kept = [p for p in parts if not isinstance(p, bool)]
    if not kept:
        return not decisive
    if len(kept) == 1:
        return kept[0]
    return {"OR" if decisive else "AND": kept}


def mem0_filters(user: str, where: Where | None, expiring: bool = True) -> dict[str, Any] | None:
    """mem0's ``filters=`` for ``user``'s memories passing ``where``'s tree; None when none can.
    ``expiring`` False: the store holds no memory that expires (``qdrant.tags.unexpiring``)."""
    base: dict[str, Any] = {"user_id": user}
    if where is None:
        return base
    tree = _tree(where.native if expiring else unexpiring(where))
    if tree is False:
        return None
    return base if tree is True else {**base, "$or": [tree]}


def filter_keys(r: MemoryRecord) -> dict[str, Any]:
    """The metadata a memory of ``r`` carries for filters (a write adds it, ``tag_old`` too)."""
    keys: dict[str, Any] = {TAGS: record_tokens(r), TIME: r.timestamp}
    if r.expires_at is not None:
        keys[EXPIRY] = r.expires_at
    return keys


def payloads(client: Any, collection: str) -> Iterator[dict[str, Any]]:
    """Every point's payload in ``collection``, a page at a time."""
    cursor: Any = None
    while True:
        points, cursor = client.scroll(collection, limit=1000, offset=cursor, with_payload=True, with_vectors=False)
        for p in points:
            yield p.payload or {}
        if cursor is None:
            return


def tag_old(client: Any, collection: str, by_filter: bool) -> None:
    """Every memory of ``collection`` that longterm wrote before ``TAGS`` gets ``TAGS`` and
    ``TIME``, by payload alone (no new embedding, the text untouched). ``by_filter`` (a server
    other processes may write to): each set holds only while the memory still lacks ``TAGS``."""
    from qdrant_client import models as m

    cursor: Any = None
    while True:
        points, cursor = client.scroll(collection, limit=BATCH, offset=cursor, with_payload=True, with_vectors=False)
        ops = []
        for p in points:
            payload = p.payload or {}
            stored = payload.get("longterm")
            if TAGS in payload or not isinstance(stored, str):
                continue
            if by_filter:
                lacking = m.IsEmptyCondition(is_empty=m.PayloadField(key=TAGS))
                only = m.Filter(must=[m.HasIdCondition(has_id=[p.id]), lacking])
                change = m.SetPayload(payload=filter_keys(parse_record(stored)), filter=only)
            else:
                change = m.SetPayload(payload=filter_keys(parse_record(stored)), points=[p.id])
            ops.append(m.SetPayloadOperation(set_payload=change))
        if ops:
            client.batch_update_points(collection, ops, wait=True)
        if cursor is None:
            return


__all__ = [
    "EXPIRING",
    "EXPIRY",
    "MARKER",
    "TAGS",
    "TIME",
    "Mem0Expiry",
    "filter_keys",
    "mem0_filters",
    "payloads",
    "refusal",
    "tag_old",
]
