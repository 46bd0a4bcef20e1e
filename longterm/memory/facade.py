"""``LongTermMemory``: the facade agents and scripts talk to.

The seam: ``MemoryService`` (ADK's API over one store, and what satellites may use of it) plus
the simple API (mem0's shape: ``add``, ``search``, ``get``, ``get_all``, ``delete``,
``delete_all``; the app is this memory's), the fact layer's calls (``list_facts``,
``fact_history``, ``consolidate_facts``, ``rebuild_facts``, ``distill_facts``, ``flush_facts``),
store listings (``scopes``, ``indices``), ``upsert_records``, ``recover_sessions``, ``as_tool``,
and a blocking twin of each (``*_sync``).

Why only delegation here: every call checks its arguments (``inputs``) and hands the work to
the part that does it, so a save, a search, an erase and a close each read in one module of
one job. A memory owns connections and threads: its store settings cannot be reassigned and
it cannot be copied (``top_k``, ``rescoring`` and the default policy can be, validated).

Facts (opt-in, ``facts=`` or ``LONGTERM_FACTS_*``; ``longterm.facts``): every save queues its
records for the fact layer, which distils them in the background; ``search_memory`` then
puts current facts ahead of evidence, and ``get_user_profile`` lists them. Without a model
configured none of it runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .._sync import sync_twin
from ..core.where import living
from ..facts import SearchKind
from ..messages import as_messages
from ..policies import resolve_policy
from ..records import Memory, MemoryPage, MemoryRecord, SaveResult, name_id
from ..tools import MemoryTool
from ..uri import parse_uri
from . import inputs, lifetimes
from .correcting import Corrector
from .reading import as_memory
from .service import MemoryService


class LongTermMemory(MemoryService):
    """Long-term memory for agents, over a backend chosen by name or given as an instance.

    ``LongTermMemory()`` stores in ``./.longterm/memory.db`` (SQLite, offline).
    ``LongTermMemory(backend="redis", backend_config={"url": ...})`` changes only where.
    """

    # -- the simple API (mem0's shape): the app is this memory's ------------------------------

    @property
    def default_app(self) -> str:
        """The app of the simple API: ``app_name``, else ``"default_app"``."""
        return self.app_name or "default_app"

    async def add(
        self,
        messages: Any,
        *,
        user_id: str,
        session_id: str | None = None,
        metadata: Mapping[str, object] | None = None,
        policy: Any = "all",
        ttl: Any = None,
        expires_at: Any = None,
    ) -> SaveResult:
        """Remember ``messages``: a string, one message or a list (OpenAI, mem0, LangChain, ADK
        shapes; see ``longterm.shapes``), for ``user_id`` in this memory's app.

        Everything given is saved (policy ``all``: the caller chose what to add) unless
        ``policy=`` says otherwise. Without ``session_id`` each call is a session of its own, so
        the same sentence added twice is two memories; with one, calls add to that session and
        an event saved before (same id, or same author, time and content) is not saved again.
        ``ttl`` (seconds or a ``timedelta``, from now) or ``expires_at`` (an aware datetime, seconds
        or ISO 8601): when these memories stop being returned (default: the memory's ``ttl``).
        """
        scope = inputs.scope(self.default_app, user_id)
        sid = f"add-{uuid.uuid4().hex}" if session_id is None else name_id("session_id", session_id)
        raw = as_messages(messages)
        meta = inputs.metadata(metadata, "metadata")
        expires = self._expiry(ttl, expires_at)
        return await self._own.saver.events(scope, sid, raw, resolve_policy(policy), meta, expires)

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        top_k: int | None = None,
        min_score: float | None = None,
        kind: SearchKind = "all",
        context: int = 0,
        now: datetime | float | str | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> list[Memory]:
        """The user's memories best matching ``query``, best first, each a typed ``Memory``
        whose ``score`` is in [0, 1] with one meaning on every backend; ``context=N``: each with
        its N turns before and after (``Memory.context``); ``now``: the question's time;
        ``filters``: only memories that pass it (``longterm.core.filters``), applied before the
        top-k cut (facts are not filtered by metadata)."""
        scope = inputs.scope(self.default_app, user_id)
        hits = await self.search_hits(
            scope, query, top_k, kind=kind, min_score=min_score, context=context, now=now, filters=filters
        )
        return [as_memory(h.record, h) for h in hits]

    async def get(self, memory_id: str, *, user_id: str) -> Memory | None:
        """The user's memory with id ``memory_id`` (None: there is none)."""
        scope = inputs.scope(self.default_app, user_id)
        reader = (await self._route(scope)).reader
        return await reader.get(scope, inputs.text_id("memory_id", memory_id), self.clock_now())

    async def get_all(
        self,
        *,
        user_id: str,
        limit: int = 100,
        cursor: str | None = None,
        newest_first: bool = False,
        filters: Mapping[str, Any] | None = None,
    ) -> MemoryPage:
        """One page of the user's memories by time, oldest first (``newest_first``: newest first);
        pass ``page.next_cursor`` for the next. Each page is one engine call (``page_by_time``),
        whatever the user holds. ``filters``: only memories that pass it (``longterm.core.filters``;
        a page may then hold fewer than ``limit`` while ``next_cursor`` says more follow)."""
        scope, where = inputs.scope(self.default_app, user_id), living(inputs.filters(filters), self.clock_now())
        reader = (await self._route(scope)).reader
        return await reader.page(scope, inputs.bounded_int("limit", limit), cursor, bool(newest_first), where)

    async def update(
        self,
        memory_id: str,
        *,
        user_id: str,
        text: str | None = None,
        metadata: Mapping[str, object] | None = None,
        merge: bool = False,
        app_name: str | None = None,
    ) -> Memory | None:
        """Correct the user's memory ``memory_id`` (of ``app_name``, default this memory's app): its
        words (``text``; full text and vectors made anew) and/or ``metadata`` (replaced, or merged with
        ``merge=True``); the id stays, ``updated_at`` is set. The old words go as an erase's do, with
        their facts, and no replay or ``reconsider=True`` brings them back. None: no such memory."""
        scope = inputs.scope(app_name or self.default_app, user_id)
        meta = None if metadata is None else inputs.metadata(metadata, "metadata")
        fixer = Corrector(await self._route(scope))
        at = self.clock_now()
        new = await fixer.update(
            scope, inputs.text_id("memory_id", memory_id), text=text, metadata=meta, merge=merge, at=at
        )
        return None if new is None else as_memory(new)

    async def extend(
        self,
        memory_id: str,
        *,
        user_id: str,
        ttl: Any = None,
        expires_at: Any = None,
        app_name: str | None = None,
    ) -> Memory | None:
        """Move the expiry of the user's memory ``memory_id``: ``ttl`` from now, or ``expires_at``
        (neither: it never expires). None: no such memory, or it already expired."""
        scope = inputs.scope(app_name or self.default_app, user_id)
        now = self.clock_now()
        expires = lifetimes.expiry(now, ttl=ttl, expires_at=expires_at)
        new = await Corrector(await self._route(scope)).extend(
            scope, inputs.text_id("memory_id", memory_id), expires, now
        )
        return None if new is None else as_memory(new)

    async def sweep_expired(
        self, *, user_id: str | None = None, app_name: str | None = None, dry_run: bool = False
    ) -> int:
        """Erase what expired (of ``user_id``, else of every user of the app), with an erase's
        guarantees: reads never return it already; this takes its words out of the store. How many."""
        app, now = app_name or self.default_app, self.clock_now()
        held = [] if user_id is not None else await self._own.reader.scopes()  # the expired ones too
        users = [user_id] if user_id is not None else sorted({u for a, u, _ in held if a == app})
        scopes = [inputs.scope(app, user) for user in users]
        return sum([await Corrector(await self._route(s)).sweep(s, now, dry_run=dry_run) for s in scopes])

    async def delete(self, memory_id: str, *, user_id: str) -> bool:
        """Erase the user's memory ``memory_id`` (a string: ``delete_memory``'s None is ``delete_all``)."""
        one = inputs.text_id("memory_id", memory_id)
        return await self.delete_memory(app_name=self.default_app, user_id=user_id, memory_id=one) > 0

    async def delete_all(
        self,
        *,
        user_id: str,
        session_id: str | None = None,
        before: datetime | float | str | None = None,
        filters: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> int:
        """Erase the user's memories in this memory's app; how many went. Narrowed by any of:
        ``session_id`` (that session's), ``before`` (those saved as of a time strictly earlier:
        an aware datetime, seconds since the epoch or ISO 8601), ``filters`` (those that pass it:
        ``longterm.core.filters``); with none of them, every memory of the user. ``dry_run``: how
        many would go, erasing nothing.

        Each with an erase's guarantees (``delete_memory``): a replay never brings them back, the
        facts they alone support follow them, ``purge`` compacts where the engine keeps bytes. The
        ones erased are those that matched when it read them (one saved during the call may stay)."""
        return await self.delete_memories(
            app_name=self.default_app,
            user_id=user_id,
            session_id=session_id,
            before=before,
            filters=filters,
            dry_run=dry_run,
        )

    # -- the whole store ----------------------------------------------------------------

    async def scopes(self, *, index: str | None = None) -> list[tuple[str, str, int]]:
        """(app, user, count) of every user with memories in ``index`` of this store (default:
        this memory's own), for stats, migrations and inspection (every built-in engine lists them);
        what expired is not counted, as no read returns it (a user left with none is not listed)."""
        route = self._own if index is None else self._router.opened(inputs.text_id("index", index))
        return await route.reader.scopes(self.clock_now())

    async def indices(self) -> list[str]:
        """The index names of this store (its location and prefix) that hold memories: what
        ``LongTermMemory(index=...)`` opens. This memory's own index is listed when it has any."""
        return await self._own.reader.indices()

    async def upsert_records(self, records: Sequence[MemoryRecord]) -> None:
        """Write records as they are (migration between backends, restore from export).

        Each record's id must be the one its app, user, session and event derive (``record_id``;
        records read from any store have it): an id of another user's memory is refused, never
        written over theirs."""
        await self._own.saver.records(inputs.records_metadata(inputs.items("records", records, "MemoryRecords")))

    async def recover_sessions(
        self, session_service: Any, *, app_name: str, user_id: str | None = None
    ) -> list[SaveResult]:
        """Save what the ledger has not seen from an ADK session service (after a crash).

        Lists the app's sessions (one user's, or every user's where the service can list
        them), loads each with its events and saves it; saved events are skipped.
        """
        listing = await session_service.list_sessions(app_name=app_name, user_id=user_id)
        results = []
        for s in listing.sessions:
            full = await session_service.get_session(app_name=app_name, user_id=s.user_id, session_id=s.id)
            if full is not None:
                results.append(await self.add_session_to_memory(full))
        return results

    # -- facts (``longterm.facts``; all but search answer "" or nothing when facts are off) -----------

    async def list_facts(
        self, *, app_name: str, user_id: str, include_superseded: bool = False, as_of: Any = None
    ) -> list[dict[str, Any]]:
        """The user's facts, oldest first: current ones, all (``include_superseded``), or those
        that were true at ``as_of`` (seconds since the epoch, a ``datetime`` or an ISO 8601
        string, as event times are read). Empty when facts are off."""
        scope = inputs.scope(app_name, user_id)
        when = None if as_of is None else inputs.as_of(as_of)
        return await (await self._route(scope)).facts.facts(scope, current=not include_superseded, as_of=when)

    async def fact_history(self, *, app_name: str, user_id: str, fact_id: str) -> list[dict[str, Any]]:
        """A fact's trail, oldest first: the facts it replaced, itself, what replaced it; each
        with its validity, evidence record ids and audit history."""
        scope = inputs.scope(app_name, user_id)
        return await (await self._route(scope)).facts.history(scope, inputs.text_id("fact_id", fact_id))

    async def consolidate_facts(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """Merge duplicate facts and resolve contradictions (the newer wins); nothing is destroyed."""
        scope = inputs.scope(app_name, user_id)
        return await (await self._route(scope)).facts.consolidate(scope)

    async def rebuild_facts(self, *, app_name: str, user_id: str, **overrides: Any) -> dict[str, int]:
        """Distil the user's facts afresh from all their evidence; ``overrides`` are ``FactsConfig``
        fields for this run (``model=``, ``base_url=``, ``extract_prompt=``, ...)."""
        scope = inputs.scope(app_name, user_id)
        return await (await self._route(scope)).facts.rebuild(scope, overrides)

    async def distill_facts(self, *, app_name: str, user_id: str) -> int:
        """Distil the user's evidence not yet distilled (what a stopped process left: the next
        save does it too) and wait; return how many records still wait."""
        scope = inputs.scope(app_name, user_id)
        return await (await self._route(scope)).facts.distill(scope)

    async def flush_facts(self) -> int:
        """Wait until queued evidence was distilled (or failed once more); return how many
        records still wait (0 when facts are off, or all landed)."""
        return await self._life.flush_facts()

    # -- tools ----------------------------------------------------------------------------

    def as_tool(self, *, app_name: str, user_id: str | None = None, top_k: int | None = None) -> MemoryTool:
        """A ``load_memory`` function with a JSON schema, bound to (app, user); user defaults to ``self.user_id``."""
        return MemoryTool(self, app_name=app_name, user_id=user_id, top_k=top_k)

    @classmethod
    def from_uri(cls, uri: str, **kwargs: Any) -> LongTermMemory:
        """A memory on the store ``uri`` names (``longterm.uri``: ``longterm:///path/to/memory.db``,
        ``longterm+redis://host:port/0?prefix=...``, ...); ``kwargs`` are further arguments, and
        win over the URI's (``backend_config`` key by key). A malformed URI is a ``ConfigurationError``."""
        args = parse_uri(uri)
        config = {**args.pop("backend_config"), **(kwargs.pop("backend_config", None) or {})}
        return cls(**{**args, **kwargs, "backend_config": config})

    # -- blocking twins for scripts (``longterm._sync.sync_twin``) --------------------------------

    add_sync = sync_twin(add)
    search_sync = sync_twin(search)
    get_sync = sync_twin(get)
    get_all_sync = sync_twin(get_all)
    update_sync = sync_twin(update)
    extend_sync = sync_twin(extend)
    sweep_expired_sync = sync_twin(sweep_expired)
    delete_sync = sync_twin(delete)
    delete_all_sync = sync_twin(delete_all)
    upsert_records_sync = sync_twin(upsert_records)
    scopes_sync = sync_twin(scopes)
    indices_sync = sync_twin(indices)
