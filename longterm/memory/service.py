"""``MemoryService``: ADK's ``BaseMemoryService`` over one store, and everything a satellite may use of it.

The seam: ``MemoryService(**settings)`` opens the store its settings name (``wire``) and
answers ADK's API (``add_session_to_memory``, ``add_events_to_memory``, ``add_memory``,
``search_memory``, ``delete_memory``) and the rest of ``longterm.ports.MemoryPort`` (whether it
is open, its loop, a checked scope, its ledger, scoped reads, automatic saving's registry,
``close``), each with a blocking twin (``*_sync``). ``LongTermMemory`` is this service plus the
simple API, the fact layer's calls, listings and tools.

Why a class of its own under the facade: it is a complete ADK memory service and the port's
one implementation; each of its methods checks its arguments and hands the work to the part
that does it (``Saver``, ``Searcher``, ``Reader``, ``Eraser``, ``FactAccess``, ``Lifecycle``),
so a save, a search, an erase and a close each read in one module of one job.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import PrivateAttr
from typing_extensions import override

from .._sync import SyncPortal, sync_twin
from ..core.backend import Backend
from ..core.ledger import Ledger
from ..core.where import living
from ..entries import MemoryServiceBase, SearchMemoryResponse
from ..errors import InvalidInputError
from ..facts import SearchKind, is_fact
from ..policies import MemoryAutoSavePolicy, resolve_policy
from ..records import Hit, MemoryRecord, SaveResult, Scope, name_id
from . import deltas, inputs, lifetimes
from .closing import Closing
from .correcting import Corrector, narrowed
from .lifecycle import Lifecycle
from .routing import Located, Route, Router
from .searching import Ask
from .settings import MemorySettings
from .sweeping import Sweeps
from .wiring import wire


class MemoryService(MemoryServiceBase, Closing, MemorySettings):
    """ADK's memory service over the store its settings name (see the module docstring)."""

    _router: Router = PrivateAttr()
    _life: Lifecycle = PrivateAttr()
    _sweeps: Sweeps = PrivateAttr()

    @override
    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._router = Router(self, wire(self))
        self._life = Lifecycle(self._router)
        self._sweeps = Sweeps(lambda: self.portal, self._sweep, self.clock_now)
        saver = self._own.saver  # sweeps what its saves let expire, and what expired before a reconsider
        saver.on_expiring, saver.before_reconsider, saver.clock = self._sweeps.due, self._sweep, self.clock_now
        self.seal()

    @property
    def _own(self) -> Route:
        """This memory's own index: listings, and what a scope-less call reads."""
        return self._router.primary

    async def _sweep(self, scope: Scope) -> int:
        """Erase what of ``scope`` expired by now (``memory.sweeping``, in the background)."""
        return await Corrector(await self._route(scope)).sweep(scope, self.clock_now())

    async def _route(self, scope: Scope) -> Route:
        """The index ``scope`` lives in (``memory.routing.RULE``)."""
        return await self._router.route(scope)

    # -- what satellites may use of a memory (longterm.ports.MemoryPort) --------------------

    @property
    def backend_instance(self) -> Backend:
        """The engine of this memory's own index (``index``); ``located`` gives the one a user lives in."""
        return self._own.backend

    async def located(self, app_name: str, user_id: str) -> Located:
        """Where (app, user) lives in the store: its index, that index's engine and ledger
        (``memory.routing.RULE``; a user held nowhere yet: where their first save goes)."""
        route = await self._route(inputs.scope(app_name, user_id))
        return Located(index=route.index, backend=route.backend, ledger=route.ledger)

    @property
    def backend_name(self) -> str:
        return self._own.saver.backend_name

    @property
    def is_open(self) -> bool:
        """False once ``close()`` began: satellites stop posting work."""
        return not self._life.closed

    @property
    def portal(self) -> SyncPortal:
        """The memory's own background loop (sync wrappers, automatic saving), started on first use."""
        return self._life.portal

    def scope(self, app_name: str, user_id: str) -> Scope:
        """The checked scope of (app_name, user_id); an ``InvalidInputError`` naming the field."""
        return inputs.scope(app_name, user_id)

    @property
    def facts_error(self) -> str | None:
        """The fact layer's last distillation error (None: none, or no fact layer)."""
        return next((e for r in self._router.routes() if (e := r.facts.last_error) is not None), None)

    @property
    def event_ledger(self) -> Ledger:
        """The ledger of this memory's own index: the store's own, or a side ledger beside it
        (``located`` gives the one of the index a user lives in)."""
        return self._own.ledger

    # -- ADK BaseMemoryService ----------------------------------------------------------

    @override
    async def add_session_to_memory(  # type: ignore[override]  # returns what it did; ADK's returns None
        self,
        session: Any,
        *,
        auto_save_memory_policy: Any = None,
        reconsider: bool = False,
        lenient: bool = False,
        ttl: Any = None,
    ) -> SaveResult:
        """Save what is new in ``session`` (ADK Session, dict or ``longterm.Session``; its events
        in any shape of ``longterm.shapes``, under ``events`` or ``messages``).

        An event in no known shape fails the save before anything is written
        (``InvalidInputError``); with ``lenient=True`` (automatic saving) the others are saved
        and it is left out unmarked, logged once, so the same id saves once it is fixed.
        ``reconsider=True`` considers every event of the session again (e.g. under another
        policy), including ones erased before: writes overwrite by id, never duplicate (what its
        owner corrected or what expired stays so). ``ttl`` (seconds or a timedelta, from now): how
        long its memories live (default the memory's ``ttl``).
        """
        policy, expires = self._policy(auto_save_memory_policy), self._expiry(ttl)
        return await self._own.saver.session(session, policy, reconsider=reconsider, lenient=lenient, expires=expires)

    def _expiry(self, ttl: Any = None, expires_at: Any = None) -> float | None:
        return lifetimes.expiry(self.clock_now(), ttl=ttl, expires_at=expires_at, default=self.ttl)

    def _policy(self, policy: Any) -> MemoryAutoSavePolicy:
        return self.auto_save_memory_policy if policy is None else resolve_policy(policy)

    async def add_sessions_to_memory(
        self, sessions: Sequence[Any], *, auto_save_memory_policy: Any = None, concurrency: int = 4
    ) -> list[SaveResult]:
        """Save many sessions, ``concurrency`` at a time (imports, migrations).

        Reading and filtering one session overlaps with the engine writing another, which
        on the local backend nearly doubles throughput on two cores. Each session keeps
        its own all-or-nothing save; the first failure is raised after the others finish.
        """
        batch = inputs.items("sessions", sessions, "sessions (to save one, use add_session_to_memory)")
        return await self._own.saver.sessions(batch, self._policy(auto_save_memory_policy), concurrency, self._expiry())

    @override
    async def add_events_to_memory(  # type: ignore[override]  # returns what it did; ADK's returns None
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Any],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> SaveResult:
        """Save a delta of events (ADK's API); the default policy and the ledger apply."""
        scope = inputs.scope(app_name, user_id)
        sid = deltas.EVENTS if session_id is None else name_id("session_id", session_id)
        raw = inputs.items("events", events, "events (ADK Events, OpenAI or LangChain messages, dicts or strings)")
        meta = inputs.metadata(custom_metadata)
        return await self._own.saver.events(scope, sid, raw, self.auto_save_memory_policy, meta, self._expiry())

    @override
    async def add_memory(  # type: ignore[override]  # returns what it did; ADK's returns None
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[Any],
        custom_metadata: Mapping[str, object] | None = None,
        ttl: Any = None,
    ) -> SaveResult:
        """Write explicit memories (``MemoryEntry``-like: content, author, timestamp, id) as they are,
        living ``ttl`` (seconds or a timedelta; default the memory's ``ttl``)."""
        scope = inputs.scope(app_name, user_id)
        items = inputs.items("memories", memories, "memories (MemoryEntry objects or dicts)")
        return await self._own.saver.memories(scope, items, inputs.metadata(custom_metadata), self._expiry(ttl))

    @override
    async def search_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int | None = None,
        kind: SearchKind = "all",
        min_score: float | None = None,
        context: int = 0,
        now: datetime | float | str | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> SearchMemoryResponse:
        """The memories of (app, user) that best match ``query``, best first.

        ``custom_metadata["score"]`` is in [0, 1] with one meaning on every backend (the share of
        the question's words a memory holds, blended with its vector similarity where the store
        has vectors: ``retrieval.calibration``); ``raw_score`` is the engine's own.
        ``min_score`` leaves out hits scoring under it.

        ``context=N``: each hit's N turns before and after it in its session (the question with
        the answer), in ``custom_metadata["context"]``, read from the store now; near-identical
        hits fold into one. A time the question names ("last week", "in May 2023", "上个月")
        favours the memories of that time, relative to ``now`` (default: the clock).

        ``kind`` (with facts on): ``"all"`` (default) returns matching current facts first, then
        evidence, so an agent sees what is true now before older words that may contradict it;
        ``"facts"`` or ``"evidence"`` only one kind. Superseded facts are never returned here
        (``list_facts(as_of=...)`` and ``fact_history`` read them).

        ``filters`` (``longterm.core.filters``: metadata, session, author, role, time) narrows the
        memories before the engine's top-k cut, so ``top_k`` matching ones come back when they
        exist; facts are not filtered by metadata (they hold none of the user's).
        """
        scope = inputs.scope(app_name, user_id)
        hits = await self.search_hits(
            scope, query, top_k, kind=kind, min_score=min_score, context=context, now=now, filters=filters
        )
        return self._own.searcher.response(hits)

    @override
    async def delete_memory(  # type: ignore[override]  # returns how many went; ADK's returns None
        self, *, app_name: str, user_id: str, memory_id: str | None = None, session_id: str | None = None
    ) -> int:
        """Delete one memory by id, or one session's memories (``session_id``); how many went.

        With neither it is refused: ADK's method deletes "a single memory item by its id", and
        ADK's ``Context.delete_memory()`` passes None, which erased every memory of the user here;
        that is ``delete_memories``. What is erased stays erased: the ledger keeps the events as
        handled, so saving a session that is still live writes only its new events
        (``reconsider=True`` on a save brings a session's events back explicitly).
        """
        inputs.scope(app_name, user_id)  # the scope's own errors first
        if memory_id is None and session_id is None:
            raise InvalidInputError(
                "delete_memory erases one memory (memory_id=) or one session (session_id=); to erase every "
                "memory of the user in the app, call delete_memories(app_name=..., user_id=...)."
            )
        return await self._erase(app_name, user_id, memory_id, session_id)

    async def _erase(self, app_name: str, user_id: str, memory_id: str | None, session_id: str | None) -> int:
        """One memory, one session, or (neither) every memory of (app, user) erased; how many went."""
        scope = inputs.scope(app_name, user_id)
        if memory_id is not None and session_id is not None:
            raise InvalidInputError("pass memory_id or session_id, not both.")
        if memory_id is not None:
            inputs.text_id("memory_id", memory_id)
        if session_id is not None:
            session_id = name_id("session_id", session_id)
        return await self._own.eraser.erase(scope, memory_id=memory_id, session_id=session_id)

    async def delete_memories(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        before: datetime | float | str | None = None,
        filters: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> int:
        """``delete_all`` (the simple API's) for any app: erase the memories of (app, user) of
        ``session_id``, saved before ``before``, passing ``filters`` (none: all of them); how many
        went (``dry_run``: would go, nothing erased)."""
        spec = narrowed(filters, session_id, before)
        if not dry_run and (spec is None or (before is None and not filters)):
            return await self._erase(app_name, user_id, None, session_id)
        records = self.iter_records(app_name=app_name, user_id=user_id, filters=spec)
        ids = [r.id async for r in records if not is_fact(r)]
        if dry_run:
            return len(ids)
        return await self._own.eraser.erase(inputs.scope(app_name, user_id), memory_ids=ids)

    # -- scoped reads beyond ADK --------------------------------------------------------

    async def search_hits(
        self,
        scope: Scope,
        query: str,
        top_k: int | None = None,
        *,
        kind: SearchKind = "all",
        min_score: float | None = None,
        context: int = 0,
        now: datetime | float | str | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """The scope's best hits for ``query``, scored by the core on one scale (``score`` in
        [0, 1], ``retrieval.calibration``; the engine's own in ``extra["raw_score"]``), those
        under ``min_score`` left out; ``context``, ``now`` and ``filters`` as ``search_memory``
        takes them."""
        k = self.top_k if top_k is None else top_k
        where = living(
            inputs.filters(filters, facts_pass=kind != "evidence" and self.facts is not None), self.clock_now()
        )
        ask = Ask(query, k, kind, min_score, self.rescoring, context, self.reranker, self.rerank_top_n, where)
        return await self._own.searcher.hits(scope, ask, now)

    async def get_user_profile(self, user_id: str | None = None, *, app_name: str | None = None) -> str:
        """The user's current facts as a compact list, to preload into a prompt ("" when facts
        are off or none are known yet). VeADK's shape works too: ``get_user_profile(user_id)``
        (the app is then this memory's ``app_name``, else its index)."""
        if user_id is None:
            raise InvalidInputError("get_user_profile needs a user_id.")
        scope = inputs.scope(app_name or self.app_name or self.index, user_id)
        return await (await self._route(scope)).facts.profile(scope)

    async def count(self, *, app_name: str, user_id: str, filters: Mapping[str, Any] | None = None) -> int:
        """How many memories (app, user) holds (that pass ``filters``: ``longterm.core.filters``)."""
        scope, where = inputs.scope(app_name, user_id), living(inputs.filters(filters), self.clock_now())
        return await (await self._route(scope)).reader.count(scope, where)

    async def iter_records(
        self, *, app_name: str, user_id: str, filters: Mapping[str, Any] | None = None
    ) -> AsyncIterator[MemoryRecord]:
        """Every record of (app, user) (that passes ``filters``), each once."""
        scope, where = inputs.scope(app_name, user_id), living(inputs.filters(filters), self.clock_now())
        async for rec in (await self._route(scope)).reader.scan(scope, where):
            yield rec

    # -- blocking twins for scripts (``longterm._sync.sync_twin``) --------------------------------

    add_session_to_memory_sync = sync_twin(add_session_to_memory)
    add_events_to_memory_sync = sync_twin(add_events_to_memory)
    search_memory_sync = sync_twin(search_memory)
    delete_memory_sync = sync_twin(delete_memory)
    delete_memories_sync = sync_twin(delete_memories)
    get_user_profile_sync = sync_twin(get_user_profile)
    located_sync = sync_twin(located)
    count_sync = sync_twin(count)
