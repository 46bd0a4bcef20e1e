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
element), the times and the TTL; a search's prefix and ``filter`` are longterm filters on those
paths (``lg.ns_0``, ``lg.value.color``), applied by the engine before its cut, then checked
again with LangGraph's own meaning (exact lists, nested objects). The record's text is the
item's indexed fields (``index["fields"]``, or the ``index=`` list of the put; the whole value
as JSON by default); ``index=False`` keeps no words. With an ``index`` config the fields'
vectors (its ``embed``) are kept in the record's content and a query ranks by cosine
similarity, as LangGraph's stores score; without one a query is longterm's hybrid search and
``score`` its calibrated score.

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
from ..records import MemoryRecord, record_id  # noqa: E402
from . import langgraph_items as items  # noqa: E402
from .langgraph_items import META  # noqa: E402

__all__ = ["LongTermStore"]

#: The content key the vectors of an item's indexed fields are kept under (``index`` config).
VECTORS = "lg_vectors"
#: The user of namespaces that name none (``user_at=None``, or a namespace too short).
DEFAULT_USER = "langgraph"
#: How many records a longterm search may return at once (``top_k``).
_MAX_TOP_K = 1000


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

    @staticmethod
    def _prefix_filter(prefix: Sequence[str]) -> dict[str, Any]:
        return {f"{META}.ns_{i}": label for i, label in enumerate(prefix) if label != "*"}

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
        spec = {**self._prefix_filter(prefix), **items.pushed(filter_)}
        out = []
        async for rec in self.memory.iter_records(app_name=self.app, user_id=user, filters=spec or None):
            lg = rec.metadata.get(META)
            if not isinstance(lg, dict) or tuple(lg["ns"])[: len(prefix)] != tuple(prefix):
                continue
            if filter_ and not all(items.compare(lg["value"].get(k), v) for k, v in filter_.items()):
                continue
            out.append(rec)
        return out

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix, users = tuple(op.namespace_prefix), await self._users(op.namespace_prefix)
        want = max(op.offset, 0) + max(op.limit, 0)
        scored: list[tuple[float | None, str, MemoryRecord | None, Mapping[str, Any]]] = []
        if op.query and self.embeddings is None:
            # longterm's hybrid retrieval, each user's best, merged by calibrated score
            spec = {**self._prefix_filter(prefix), **items.pushed(op.filter)}
            for user in users:
                hits = await self.memory.search(
                    op.query, user_id=user, top_k=min(max(want, 1), _MAX_TOP_K), filters=spec or None
                )
                for m in hits:
                    lg = m.metadata.get(META)
                    if not isinstance(lg, dict) or tuple(lg["ns"])[: len(prefix)] != prefix:
                        continue
                    if op.filter and not all(items.compare(lg["value"].get(k), v) for k, v in op.filter.items()):
                        continue
                    scored.append((m.score, user, None, m.metadata))
            scored.sort(key=lambda s: -(s[0] or 0.0))
        else:
            records = [(u, r) for u in users for r in await self._records(u, prefix, op.filter)]
            if op.query:
                qv = await self.embeddings.aembed_query(op.query)
                with_vectors, scoreless = [], []
                for u, r in records:
                    vectors = r.content.get(VECTORS) or []
                    if vectors:
                        with_vectors.append((max(items.cosine(qv, v) for v in vectors), u, r, r.metadata))
                    else:
                        scoreless.append((None, u, r, r.metadata))
                with_vectors.sort(key=lambda s: -(s[0] or 0.0))
                scored = [*with_vectors, *scoreless]
            else:
                records.sort(key=lambda ur: (ur[1].metadata[META]["updated_at"], ur[1].id), reverse=True)
                scored = [(None, u, r, r.metadata) for u, r in records]
        page = scored[op.offset : op.offset + op.limit]
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
        for user in await self._users(prefix):
            spec = self._prefix_filter(prefix)
            async for rec in self.memory.iter_records(app_name=self.app, user_id=user, filters=spec or None):
                lg = rec.metadata.get(META)
                if isinstance(lg, dict):
                    found.add(tuple(lg["ns"]))
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
