"""What the UI reads and erases, as plain data: one ``Inspector`` over one store.

The seam: ``Inspector(factory, index=None)`` opens one ``LongTermMemory`` per index of the
store (``factory(index)``, the CLI's ``_memory``) and answers the pages: ``overview()``
(index, app, user, count), ``page(app, user, limit, cursor)`` (newest first), ``search``,
``memory``, ``session``, ``facts``, ``profile``, ``erase``, ``export``. Every value it returns
is JSON-ready (``dict``/``list``/``str``/numbers); the views escape them, the API dumps them.

Why one memory per index, read by scope: the pages name (app, user), and an embedded engine
(Qdrant's local mode) allows one open client per directory, so the facade's scope-taking
calls (``search_hits``, ``iter_records``, ``delete_memory``) serve every app of an index.
Why facts are read from their records (``Fact.of``): ``list_facts`` answers nothing when this
process has no fact model configured, yet the facts are in the store and an operator who
looks must see them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from ..core.where import living, takes_where
from ..errors import InvalidInputError
from ..facts.model import AUTHOR, Fact, is_fact, trail
from ..locate import SeveralIndices, choose
from ..records import Hit, Memory, MemoryRecord, Scope

if TYPE_CHECKING:
    from ..memory import LongTermMemory

#: Memories per page.
PAGE = 50
#: Hits a search shows.
TOP_K = 20


class NotFound(LookupError):
    """The page names something the store does not hold (answered 404)."""


class Ambiguous(LookupError):
    """Several indices hold one (app, user): the page names them (answered 409)."""


def filter_json(text: str) -> dict[str, Any] | None:
    """The search page's filter field: JSON text (empty: no filter); anything else is refused by name."""
    if not text.strip():
        return None
    try:
        spec = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidInputError('the filter is not JSON; write e.g. {"topic": "travel"}.') from None
    if not isinstance(spec, dict):
        raise InvalidInputError('the filter is a JSON object, e.g. {"topic": "travel"}.')
    return spec


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()


def _cursor(position: Any) -> str:
    """Opaque page cursor: the engine's position after the page's last (oldest) memory."""
    return base64.urlsafe_b64encode(json.dumps(position).encode()).decode().rstrip("=")


def _read_cursor(cursor: str | None) -> Any:
    if not cursor:
        return None
    try:
        position = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(position, list) or len(position) != 2:
            raise ValueError
        return position
    except (ValueError, TypeError):
        raise InvalidInputError("cursor is not a page cursor of this UI; follow the page's 'older' link.") from None


def row(rec: MemoryRecord, hit: Hit | None = None) -> dict[str, Any]:
    """One memory as the pages show it (a fact's text read from its record even when superseded)."""
    kind: Literal["evidence", "fact"] = "fact" if is_fact(rec) else "evidence"
    m = Memory.of(rec, kind=kind, hit=hit).model_dump(mode="json", exclude={"context", "metadata"})
    fact = Fact.of(rec) if kind == "fact" else None
    if fact is not None:
        m["text"] = fact.text
        m["current"] = fact.current
    m["session_id"] = None if kind == "fact" else rec.session_id
    return m


def _fact(f: Fact, evidence: dict[str, MemoryRecord]) -> dict[str, Any]:
    d = f.as_dict()
    d["evidence"] = [
        {"id": e, **({"text": evidence[e].text, "session_id": evidence[e].session_id} if e in evidence else {})}
        for e in f.evidence
    ]
    return d


class Inspector:
    """The store the UI shows: indices, their users, and each user's memories and facts."""

    def __init__(self, factory: Callable[[str], LongTermMemory], *, index: str | None = None) -> None:
        self.factory, self.given = factory, index
        self._open: dict[str, LongTermMemory] = {}

    def memory(self, index: str) -> LongTermMemory:
        if index not in self._open:
            self._open[index] = self.factory(index)
        return self._open[index]

    async def indices(self) -> list[str]:
        if self.given:
            return [self.given]
        probe = self.memory("default_app")
        return await probe.indices()

    async def overview(self) -> list[dict[str, Any]]:
        """Every (index, app, user) holding memories, with its count."""
        rows = []
        for index in await self.indices():
            for app, user, n in await self.memory(index).scopes():
                if n:
                    rows.append({"index": index, "app": app, "user": user, "memories": n})
        return sorted(rows, key=lambda r: (r["app"], r["user"], r["index"]))

    async def where(self, app: str, user: str) -> LongTermMemory:
        """The memory on the index holding (app, user): ``longterm.locate``'s rule over the open
        memories, where no index holding the user is a page not found."""
        Scope(app_name=app, user_id=user)  # a bad id is an InvalidInputError before any store is asked
        if self.given:
            return self.memory(self.given)
        held = [i for i in await self.indices() if await self._holds(self.memory(i), app, user)]
        try:
            name = choose(app, user, held)
        except SeveralIndices as exc:
            raise Ambiguous(
                f"user {user!r} of app {app!r} has memories in {len(exc.names)} indices "
                f"({', '.join(map(repr, exc.names))}); start the UI with --index naming one"
            ) from None
        if name is None:
            raise NotFound(f"no memories of user {user!r} in app {app!r} in this store")
        return self.memory(name)

    @staticmethod
    async def _holds(memory: LongTermMemory, app: str, user: str) -> bool:
        """Whether ``memory``'s index holds any memory of (app, user): one record read, not a count
        (counting 100,000 memories was most of a page's time)."""
        engine = memory.backend_instance
        if not hasattr(engine, "page_by_time"):
            return bool(await memory.count(app_name=app, user_id=user))
        first, _ = await engine.page_by_time(Scope(app_name=app, user_id=user), None, 1)
        return bool(first)

    async def page(self, app: str, user: str, *, limit: int = PAGE, cursor: str | None = None) -> dict[str, Any]:
        """One page of the user's memories, newest first, and the cursor of the next (older) one:
        one call of the engine's time-ordered page primitive (``page_by_time``)."""
        memory = await self.where(app, user)
        engine = memory.backend_instance
        alive = living(None, memory.clock_now())  # what expired is never shown, from its moment
        pager = engine.page_by_time  # type: ignore[attr-defined]
        filtered = {"where": alive} if takes_where(pager) else {}
        page, nxt = await pager(
            Scope(app_name=app, user_id=user), _read_cursor(cursor), limit, newest_first=True, **filtered
        )
        page = [r for r in page if alive.admits(r)]
        return {
            "app": app,
            "user": user,
            "index": memory.index,
            "memories": [row(r) for r in page],
            "next_cursor": None if nxt is None else _cursor(nxt),
        }

    async def search(self, app: str, user: str, query: str, *, top_k: int = TOP_K, filters: str = "") -> dict[str, Any]:
        """The user's best matches, each with its score in [0, 1], the arms that found it and its kind;
        ``filters``: a filter as JSON text (``longterm.core.filters``), applied before the cut."""
        memory = await self.where(app, user)
        spec = filter_json(filters)
        hits = await memory.search_hits(Scope(app_name=app, user_id=user), query, top_k, filters=spec)
        return {
            "app": app,
            "user": user,
            "index": memory.index,
            "query": query,
            "filter": filters,
            "hits": [row(h.record, h) for h in hits],
        }

    async def one(self, app: str, user: str, memory_id: str) -> dict[str, Any]:
        """One memory whole: its text uncut and its metadata as given, as ``get`` and export have
        it (lists leave the metadata out and cut long texts)."""
        memory = await self.where(app, user)
        async for rec in memory.iter_records(app_name=app, user_id=user):
            if rec.id == memory_id:
                whole = {**row(rec), "metadata": rec.metadata}
                return {"app": app, "user": user, "index": memory.index, "memory": whole}
        raise NotFound(f"no memory {memory_id!r} of user {user!r} in app {app!r}")

    async def session(self, app: str, user: str, session_id: str) -> dict[str, Any]:
        """A session's memories in the order they were said."""
        memory = await self.where(app, user)
        recs = [r async for r in memory.iter_records(app_name=app, user_id=user) if r.session_id == session_id]
        if not recs:
            raise NotFound(f"no memories of session {session_id!r} of user {user!r} in app {app!r}")
        recs.sort(key=lambda r: (r.timestamp, r.id))
        return {
            "app": app,
            "user": user,
            "index": memory.index,
            "session": session_id,
            "memories": [row(r) for r in recs],
        }

    async def facts(self, app: str, user: str) -> dict[str, Any]:
        """Every fact, superseded included, each with its trail and the evidence it came from."""
        memory = await self.where(app, user)
        every: dict[str, Fact] = {}
        records: dict[str, MemoryRecord] = {}
        async for rec in memory.iter_records(app_name=app, user_id=user):
            fact = Fact.of(rec)
            if fact is not None:
                every[fact.id] = fact
            elif rec.author != AUTHOR:
                records[rec.id] = rec
        ordered = sorted(every.values(), key=lambda f: (f.valid_from, f.id))
        cited = {e for f in ordered for e in f.evidence}
        evidence = {i: r for i, r in records.items() if i in cited}
        facts = []
        for f in ordered:
            d = _fact(f, evidence)
            d["trail"] = [g.id for g in trail(every, f.id)]
            facts.append(d)
        profile = await memory.get_user_profile(user, app_name=app)
        return {"app": app, "user": user, "index": memory.index, "profile": profile, "facts": facts}

    async def erase(self, app: str, user: str, *, memory_id: str | None = None, session_id: str | None = None) -> int:
        """Erase one memory, one session, or (neither) every memory of the user in the app; how many went."""
        memory = await self.where(app, user)
        if memory_id is None and session_id is None:
            return await memory.delete_memories(app_name=app, user_id=user)
        return await memory.delete_memory(app_name=app, user_id=user, memory_id=memory_id, session_id=session_id)

    async def export(self, app: str, user: str) -> list[str]:
        """The user's records as JSON lines, as ``longterm export`` writes them (``longterm import`` restores them)."""
        memory = await self.where(app, user)
        return [rec.model_dump_json(exclude_none=True) async for rec in memory.iter_records(app_name=app, user_id=user)]

    async def close(self) -> None:
        for memory in self._open.values():
            await memory.close()
        self._open.clear()
