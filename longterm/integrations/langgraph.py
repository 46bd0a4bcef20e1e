"""``LongTermStore``: LangGraph's ``BaseStore`` over a ``LongTermMemory`` (extra ``langgraph``).

The seam: ``LongTermStore(memory, *, index=None, ttl=None, user_at=None)`` answers LangGraph's
four ops (``GetOp``, ``SearchOp``, ``PutOp``, ``ListNamespacesOp``) through ``batch`` and
``abatch``, so ``get``, ``put``, ``delete``, ``search`` and ``list_namespaces`` (and their
``a*`` twins) work as on LangGraph's own stores, on any backend of the memory, through the
memory's public API only.

How an item is kept: the item (namespace, key) is one record of the memory's app, of the user
``namespace[user_at]`` (with ``user_at=None``, or a namespace too short to name one, the fixed
user ``"langgraph"``), of the session ``json.dumps(namespace)`` and the event ``key``: its id is
``record_id`` of those four, so a put over a key overwrites it and a put after a delete writes
it again (``upsert_records``: an explicit write, not a ledgered save). The value is kept whole in
the record's metadata, under ``"lg"``, with the namespace (``ns`` and one ``ns_<i>`` per
element), the times and the TTL; a search's prefix and ``filter`` become a longterm filter on
those paths (``lg.ns_0``, ``lg.value.color``) that every matching item passes, applied by the
engine before its cut (``langgraph_items.where``), then the whole filter is checked with
LangGraph's own meaning (exact lists, nested objects). Why a query's search is widened until
``offset + limit`` hits pass that check (or the user has no more): ``limit`` is the most items
returned, and no match may be cut before it is counted. A negative ``offset`` or ``limit``
reads as on LangGraph's ``InMemoryStore``. The record's text is the item's indexed fields
(``index["fields"]``, or the ``index=`` list of the put; the whole value as JSON by default);
``index=False`` keeps no words. With an ``index`` config the fields' vectors (its ``embed``)
are kept in the record's content and a query ranks by cosine similarity, as LangGraph's stores
score; without one a query is longterm's hybrid search and ``score`` its calibrated score.

TTL is in minutes, as LangGraph has it: ``expires_at`` of the record, on the memory's clock; an
expired item is never returned (longterm checks expiry at every read); ``refresh_ttl`` on a get
or search moves it (``extend``); ``sweep_ttl``/``asweep_ttl`` erase what expired.

Why this module imports LangGraph at its top: it is only imported by those who use it;
``import longterm`` never imports it. Without LangGraph, importing it raises
``MissingDependencyError`` naming the extra (``pip install 'longterm[langgraph]'``).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import require

require("langgraph.store.base", package="langgraph", extra="langgraph", purpose="longterm.integrations.langgraph")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

from ..memory.facade import LongTermMemory  # noqa: E402
from ..memory.inputs import MAX_TOP_K  # noqa: E402
from ..records import MemoryRecord, record_id  # noqa: E402
from . import langgraph_items as items  # noqa: E402
from .langgraph_items import META  # noqa: E402

__all__ = ["LongTermStore"]

#: The content key the vectors of an item's indexed fields are kept under (``index`` config).
VECTORS = "lg_vectors"
#: The user of namespaces that name none (``user_at=None``, or a namespace too short).
DEFAULT_USER = "langgraph"
#: A search's hit: its score, its user, its record (None: a hybrid search's, kept as metadata), its metadata.
Scored = tuple[float | None, str, MemoryRecord | None, Mapping[str, Any]]
#: How much wider each step of a search whose hits the whole filter thinned out asks (``_ranked``).
WIDEN = 4


class LongTermStore(BaseStore):
    """LangGraph's ``BaseStore`` over ``memory`` (see the module docstring).

    ``index``: LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``) for semantic search
    by that embedder; without it a query is longterm's hybrid search. ``ttl``: LangGraph's
    ``TTLConfig`` (``default_ttl`` and ``refresh_on_read``; ``sweep_interval_minutes`` is left to
    ``sweep_ttl``). ``user_at=i``: element ``i`` of a namespace is the longterm user its items
    belong to (``None``: every item is the fixed user ``"langgraph"``'s).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        memory: LongTermMemory,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        user_at: int | None = None,
    ) -> None:
        if user_at is not None and (isinstance(user_at, bool) or not isinstance(user_at, int) or user_at < 0):
            raise ValueError(f"user_at must be a namespace position (an int >= 0) or None, got {user_at!r}")
        self.memory = memory
        self.user_at = user_at
        self.ttl_config = ttl
        self.index_config: dict[str, Any] | None = None
        self.embeddings: Any = None
        self._fields: list[tuple[str, Any]] = []
        if index:
            self.index_config = dict(index)
            self.embeddings = ensure_embeddings(index.get("embed"))
            self._fields = [(p, tokenize_path(p) if p != "$" else p) for p in (index.get("fields") or ["$"])]

    # -- where an item lives ----------------------------------------------------------------

    @property
    def app(self) -> str:
        return self.memory.default_app

    def _user(self, namespace: Sequence[str]) -> str:
        if self.user_at is not None and len(namespace) > self.user_at:
            return unicodedata.normalize("NFC", namespace[self.user_at])
        return DEFAULT_USER

    def _id(self, namespace: Sequence[str], key: str) -> str:
        return record_id(self.app, self._user(namespace), items.session(namespace), key)

    async def _users(self, prefix: Sequence[str]) -> list[str]:
        """The users whose items may sit under ``prefix`` (``"*"`` elements match any)."""
        if self.user_at is None:
            return [DEFAULT_USER]
        if len(prefix) > self.user_at and prefix[self.user_at] != "*":
            return [unicodedata.normalize("NFC", prefix[self.user_at])]
        users = {u for a, u, _ in await self.memory.scopes() if a == self.app}
        return sorted(users | {DEFAULT_USER})

    # -- items ------------------------------------------------------------------------------

    @staticmethod
    def _item(meta: Mapping[str, Any], score: float | None = None, search: bool = False) -> Item:
        lg = meta[META]
        args = {
            "namespace": tuple(lg["ns"]),
            "key": lg["key"],
            "value": lg["value"],
            "created_at": datetime.fromisoformat(lg["created_at"]),
            "updated_at": datetime.fromisoformat(lg["updated_at"]),
        }
        return SearchItem(**args, score=score) if search else Item(**args)

    async def _refresh(self, user: str, memory_id: str, meta: Mapping[str, Any]) -> None:
        minutes = meta[META].get("ttl")
        if minutes is not None:
            await self.memory.extend(memory_id, user_id=user, ttl=float(minutes) * 60.0)

    async def _get(self, op: GetOp) -> Item | None:
        user, mid = self._user(op.namespace), self._id(op.namespace, op.key)
        found = await self.memory.get(mid, user_id=user)
        lg = None if found is None else found.metadata.get(META)
        if found is None or not isinstance(lg, dict) or (tuple(lg["ns"]), lg["key"]) != (tuple(op.namespace), op.key):
            return None
        if op.refresh_ttl:
            await self._refresh(user, mid, found.metadata)
        return self._item(found.metadata)

    def _texts(self, value: Mapping[str, Any], index: Any) -> list[str]:
        """The texts of ``value`` an item is found by: the ``index=`` fields of the put, else the
        store's ``fields`` (the whole value as JSON by default); none for ``index=False``."""
        if index is False:
            return []
        paths = self._fields if index is None else [(p, tokenize_path(p) if p != "$" else p) for p in index]
        if not paths:
            paths = [("$", "$")]
        return [t for _, tokens in paths for t in get_text_at_path(dict(value), tokens) if t]

    async def _put(self, op: PutOp) -> None:
        user, mid = self._user(op.namespace), self._id(op.namespace, op.key)
        if op.value is None:
            await self.memory.delete(mid, user_id=user)
            return
        now = items.now(self.memory)
        old = await self.memory.get(mid, user_id=user)
        created = old.metadata[META]["created_at"] if old is not None and META in old.metadata else now.isoformat()
        value = json.loads(json.dumps(dict(op.value)))
        texts = self._texts(value, op.index)
        content: dict[str, Any] = {"role": "user", "parts": [{"text": t} for t in texts]}
        if self.embeddings is not None and texts:
            content[VECTORS] = await self.embeddings.aembed_documents(texts)
        lg: dict[str, Any] = {
            "ns": list(op.namespace),
            "key": op.key,
            "value": value,
            "created_at": created,
            "updated_at": now.isoformat(),
            "ttl": op.ttl,
            **{f"ns_{i}": label for i, label in enumerate(op.namespace)},
        }
        stamp = now.timestamp()
        record = MemoryRecord(
            id=mid,
            app_name=self.app,
            user_id=user,
            session_id=items.session(op.namespace),
            event_id=op.key,
            author="langgraph",
            role="user",
            text="\n".join(texts),
            content=content,
            timestamp=stamp,
            metadata={META: lg},
            expires_at=None if op.ttl is None else stamp + float(op.ttl) * 60.0,
        )
        await self.memory.upsert_records([record])

    async def _records(self, user: str, prefix: Sequence[str], filter_: Mapping[str, Any] | None) -> list[MemoryRecord]:
        """The user's items under ``prefix`` passing ``filter_`` (LangGraph's meaning)."""
        spec = items.where(prefix, filter_)
        return [
            rec
            async for rec in self.memory.iter_records(app_name=self.app, user_id=user, filters=spec)
            if items.admits(rec.metadata, prefix, filter_)
        ]

    async def _ranked(self, op: SearchOp, users: list[str]) -> list[Scored]:
        """longterm's hybrid retrieval of each user's items, merged by calibrated score. A user's
        search is widened until ``offset + limit`` of its hits pass the whole filter or the user
        has no more (all of them for a negative offset or limit: a slice then counts from the end)."""
        prefix, query = tuple(op.namespace_prefix), op.query or ""
        spec = items.where(prefix, op.filter)
        want = op.offset + op.limit if min(op.offset, op.limit) >= 0 else MAX_TOP_K
        scored: list[Scored] = []
        for user in users if want > 0 else []:
            top_k = min(want, MAX_TOP_K)
            while True:
                hits = await self.memory.search(query, user_id=user, top_k=top_k, kind="evidence", filters=spec)
                found = [(m.score, user, None, m.metadata) for m in hits if items.admits(m.metadata, prefix, op.filter)]
                if len(found) >= want or len(hits) < top_k or top_k >= MAX_TOP_K:
                    break
                top_k = min(top_k * WIDEN, MAX_TOP_K)
            scored += found
        scored.sort(key=lambda s: -(s[0] or 0.0))
        return scored

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix, users = tuple(op.namespace_prefix), await self._users(op.namespace_prefix)
        page: list[Scored]
        if op.query and self.embeddings is None:
            page = (await self._ranked(op, users))[op.offset : op.offset + op.limit]
        else:
            records = [(u, r) for u in users for r in await self._records(u, prefix, op.filter)]
            if op.query:
                qv = await self.embeddings.aembed_query(op.query)
                with_vectors: list[Scored] = []
                scoreless: list[Scored] = []
                for u, r in records:
                    vectors = r.content.get(VECTORS) or []
                    if vectors:
                        with_vectors.append((max(items.cosine(qv, v) for v in vectors), u, r, r.metadata))
                    else:
                        scoreless.append((None, u, r, r.metadata))
                with_vectors.sort(key=lambda s: -(s[0] or 0.0))
                page = items.vector_page(with_vectors, scoreless, op.offset, op.limit)
            else:
                records.sort(key=lambda ur: (ur[1].metadata[META]["updated_at"], ur[1].id), reverse=True)
                newest: list[Scored] = [(None, u, r, r.metadata) for u, r in records]
                page = newest[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            for _, user, _, meta in page:
                lg = meta[META]
                await self._refresh(user, self._id(lg["ns"], lg["key"]), meta)
        return [self._item(meta, score, search=True) for score, _, _, meta in page]  # type: ignore[misc]

    async def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        prefix: tuple[str, ...] = ()
        for c in conditions:
            if c.match_type == "prefix":
                prefix = tuple(c.path)
        found: set[tuple[str, ...]] = set()
        spec = items.where(prefix, None)
        for user in await self._users(prefix):
            async for rec in self.memory.iter_records(app_name=self.app, user_id=user, filters=spec):
                if items.admits(rec.metadata, (), None):
                    found.add(tuple(rec.metadata[META]["ns"]))
        spaces = [ns for ns in found if all(items.matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            spaces = sorted({ns[: op.max_depth] for ns in spaces})
        else:
            spaces = sorted(spaces)
        return spaces[op.offset : op.offset + op.limit]

    # -- LangGraph's primitive ---------------------------------------------------------------

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Each op in order, its result at its place."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, PutOp):
                await self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list(op))
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        return results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """``abatch`` on the memory's own loop (its blocking calls' portal)."""
        return self.memory.portal.call(self.abatch(list(ops)))

    # -- TTL sweeping --------------------------------------------------------------------------

    async def asweep_ttl(self) -> int:
        """Erase every expired item of the memory's app (with an erase's guarantees); how many."""
        return await self.memory.sweep_expired()

    def sweep_ttl(self) -> int:
        return self.memory.portal.call(self.asweep_ttl())
