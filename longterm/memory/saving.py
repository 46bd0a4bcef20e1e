"""The save pipeline: read the input, ask the ledger what is new, plan, write, then move the ledger.

The seam: a ``Saver`` over one memory's parts (``Wiring``) with ``session(...)`` (ADK's
``add_session_to_memory``), ``sessions(...)`` (many, overlapped), ``events(...)`` (a delta of
events as new events of one session), ``memories(...)`` (explicit memories, as they are) and
``records(...)`` (records as they are: migration, restore). Each returns what it did.

Why the ledger moves last: a save either lands or raises. If the backend fails, the ledger
still says the events are unsaved and the next save retries them; record ids are derived,
so a retry (or a second worker doing the same save) overwrites, never duplicates. Where the
ledger is the store's own, records and ledger go in one call (one transaction where it can).
Every save queues its records for the fact layer, which distils them in the background.

Why big saves read and plan on a worker thread: reading and planning cost ~25 us of CPU per
event (measured on the local backend: 20,000 events held the loop ~0.5 s), a thread hop ~55 us,
a small save ~0.5 ms; past ``OFF_LOOP_EVENTS`` the hops cost less than the loop they spare.
"""

from __future__ import annotations

import asyncio
import logging
import time
import unicodedata
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar

from typing_extensions import TypeVarTuple, Unpack

from .. import telemetry
from ..core.errors import guard
from ..errors import InvalidInputError
from ..policies import MemoryAutoSavePolicy, resolve_policy
from ..records import MemoryRecord, SaveResult, Scope, record_id
from ..saves import SavePlan, make_record, plan_save
from ..sessions import SessionView, event_ids, read_events, read_session, to_event
from . import deltas
from .inputs import scope as checked_scope
from .lifetimes import SETTLED
from .wiring import Wiring

log = logging.getLogger(__name__)

#: A save of more events than this reads and plans them on a worker thread (see the module docstring).
OFF_LOOP_EVENTS = 100
#: Refused events a memory remembers having logged (then it forgets them all and logs anew).
LOGGED_REFUSALS = 10_000

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
#: The saver of the index a scope lives in (``memory.routing``).
Locate = Callable[[Scope], Awaitable["Saver"]]


async def _cpu(off_loop: bool, fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:
    """``fn(*args)``, on a worker thread when ``off_loop``: the CPU part of a big save must not
    hold the caller's loop (other agents' turns, timers) for its duration."""
    return await asyncio.to_thread(fn, *args) if off_loop else fn(*args)


def _event_count(session: Any) -> int:
    """How many events ``session`` holds, cheaply (0 when it has no list: ``read_session`` says why)."""
    events = session.get("events") if isinstance(session, dict) else getattr(session, "events", None)
    return len(events) if isinstance(events, (list, tuple)) else 0


def _direct_records(
    scope: Scope, memories: list[Any], metadata: Mapping[str, object] | None, now: float
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
            event.timestamp = now
        rec = make_record(scope.app_name, scope.user_id, "_direct", event, policy, metadata)
        if rec is not None:
            records.append(rec)
    return records, len(seen)


def _expiring(records: list[MemoryRecord], expires: float | None) -> list[MemoryRecord]:
    """``records``, each expiring at ``expires`` (None: as they are)."""
    if expires is None:
        return records
    return [r.model_copy(update={"expires_at": expires}) for r in records]


def in_nfc(record: MemoryRecord) -> MemoryRecord:
    """``record`` with its app, user and session ids in NFC and the id those derive; the record
    itself when they are NFC already (``records.name_id``: exports of older stores)."""
    ids = (record.app_name, record.user_id, record.session_id)
    app, user, session = (unicodedata.normalize("NFC", v) for v in ids)
    if (app, user, session) == ids:
        return record
    rid = record_id(app, user, session, record.event_id)
    return record.model_copy(update={"app_name": app, "user_id": user, "session_id": session, "id": rid})


class Saver:
    """Every way a memory saves (see the module docstring), over one memory's parts."""

    def __init__(self, parts: Wiring, index: str, locate: Locate | None = None) -> None:
        self.parts = parts
        self.backend_name, self.index = parts.name, index  # what telemetry labels a save with
        self.locate = locate
        """The saver of the index a session's scope lives in (``memory.routing``); None: this one."""
        self.refused_logged: set[tuple[str, str, str, str]] = set()
        self.clock: Callable[[], float] = time.time
        """The memory's clock (``LongTermMemory(clock=)``): the time of an event given without one."""
        self.on_expiring: Callable[[Scope, float], None] | None = None
        """Told (scope, moment) after a save wrote memories that expire (``memory.sweeping``)."""
        self.before_reconsider: Callable[[Scope], Awaitable[object]] | None = None
        """Run on a scope before a ``reconsider=True`` save: sweeps what expired, which the save would
        otherwise write back alive under its own expiry (a restart leaves expired memories unswept)."""

    def _guard(self, what: str) -> AbstractContextManager[None]:
        return guard(what, f"backend {self.backend_name!r}")

    @telemetry.saving("session")
    async def session(
        self,
        session: Any,
        policy: MemoryAutoSavePolicy,
        *,
        reconsider: bool = False,
        lenient: bool = False,
        expires: float | None = None,
    ) -> SaveResult:
        """Save what is new in ``session`` under ``policy`` (``LongTermMemory.add_session_to_memory``),
        each memory expiring at ``expires`` (None: never)."""
        big = _event_count(session) > OFF_LOOP_EVENTS
        view = await _cpu(big, partial(read_session, lenient=lenient), session)
        scope = checked_scope(view.app_name, view.user_id)
        self._log_refused(view)
        if reconsider and self.before_reconsider is not None:
            await self.before_reconsider(scope)
        target = self if self.locate is None else await self.locate(scope)
        plan = await target._plan_and_write(
            scope, view, policy, None, reconsider=reconsider, off_loop=big, expires=expires, now=self.clock()
        )
        self._expiring(scope, expires, plan.records)
        if log.isEnabledFor(logging.DEBUG):  # the pseudonym is a hash: not made for a line nobody logs
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

    async def sessions(
        self, sessions: list[Any], policy: MemoryAutoSavePolicy, concurrency: int, expires: float | None = None
    ) -> list[SaveResult]:
        """Save ``sessions``, ``concurrency`` at a time; the first failure raised after the others finish."""
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise InvalidInputError(f"concurrency must be an integer of at least 1, got {concurrency!r}.")
        gate = asyncio.Semaphore(concurrency)

        async def one(session: Any) -> SaveResult:
            async with gate:
                return await self.session(session, policy, expires=expires)

        results = await asyncio.gather(*(one(s) for s in sessions), return_exceptions=True)
        done: list[SaveResult] = []
        for r in results:
            if isinstance(r, BaseException):
                raise r
            done.append(r)
        return done

    @telemetry.saving("events")
    async def events(
        self,
        scope: Scope,
        sid: str,
        raw: list[Any],
        policy: MemoryAutoSavePolicy,
        meta: Mapping[str, object] | None,
        expires: float | None = None,
    ) -> SaveResult:
        """Save ``raw`` events (any shape) as new events of session ``sid`` of ``scope``."""
        big = len(raw) > OFF_LOOP_EVENTS

        def read() -> SessionView:
            events, _ = read_events(raw)
            return SessionView(scope.app_name, scope.user_id, sid, event_ids(events), events)

        view = await _cpu(big, read)
        target = self if self.locate is None else await self.locate(scope)
        now = self.clock()
        plan = await target._plan_and_write(
            scope, view, policy, meta, reconsider=False, off_loop=big, expires=expires, now=now
        )
        self._expiring(scope, expires, plan.records)
        return SaveResult(
            session_id=sid, new_events=plan.new_events, saved=len(plan.records), memory_ids=[r.id for r in plan.records]
        )

    @telemetry.saving("memories")
    async def memories(
        self, scope: Scope, items: list[Any], meta: Mapping[str, object] | None, expires: float | None = None
    ) -> SaveResult:
        """Write explicit memories (``MemoryEntry``-like: content, author, timestamp, id) as they are."""
        records, new = await _cpu(len(items) > OFF_LOOP_EVENTS, _direct_records, scope, items, meta, self.clock())
        records = _expiring(records, expires)
        target = self if self.locate is None else await self.locate(scope)
        with self._guard("saving memories"):
            await target.parts.backend.upsert(records)
        target._schedule_facts(scope, records)
        self._expiring(scope, expires, records)
        return SaveResult(session_id="_direct", new_events=new, saved=len(records), memory_ids=[r.id for r in records])

    def _expiring(self, scope: Scope, expires: float | None, records: list[MemoryRecord]) -> None:
        if expires is not None and records and self.on_expiring is not None:
            self.on_expiring(scope, expires)

    async def records(self, batch: Sequence[object]) -> None:
        """Write records as they are, each with the id its app, user, session and event derive,
        into the index its (app, user) lives in; ids in another Unicode form than NFC (an export
        of an older store) are written as their NFC twin (``in_nfc``)."""
        checked: list[MemoryRecord] = []
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
            checked.append(in_nfc(rec))
        groups: dict[tuple[str, str], list[MemoryRecord]] = {}
        for rec in checked:
            groups.setdefault((rec.app_name, rec.user_id), []).append(rec)
        for (app, user), group in groups.items():
            scope = Scope(app_name=app, user_id=user)
            target = self if self.locate is None else await self.locate(scope)
            with self._guard("saving memories"):
                await target.parts.backend.upsert(group)

    async def _plan_and_write(
        self,
        scope: Scope,
        view: SessionView,
        policy: MemoryAutoSavePolicy,
        meta: Mapping[str, object] | None,
        *,
        reconsider: bool,
        off_loop: bool,
        expires: float | None = None,
        now: float | None = None,
    ) -> SavePlan:
        """The ledger read, the plan and the write: in one call on the engine's worker where the
        store is its own ledger and nothing is embedded on the way (``Saving.one_call``), else in
        three steps. ``reconsider``: plan every event, whatever the ledger holds, and write them all
        (``new_only`` off)."""
        engine, sid, ledger = self.parts.engine, view.session_id, self.parts.ledger
        # An event handled with its session and without it is one event; a reconsidered save considers
        # them all again (an event a delta's policy dropped can be kept with its session then).
        also = () if reconsider else deltas.others(sid)
        if sid == deltas.EVENTS:
            with self._guard("reading the ledger"):
                view = deltas.without(view, await deltas.in_sessions(ledger, scope, view.event_ids))
        settled: set[str] = set()
        if reconsider:  # what its owner corrected, or what expired and was swept, stays so
            with self._guard("reading the ledger"):
                settled = await ledger.saved(scope, SETTLED)

        def plan(saved: set[str], elsewhere: set[str]) -> SavePlan:
            mine = deltas.without(view, deltas.handled(view.event_ids, elsewhere))
            planned = plan_save(mine, set() if reconsider else saved, policy, meta, now)
            planned.records = _expiring([r for r in planned.records if r.id not in settled], expires)
            return planned

        if engine is not None and engine.saving.one_call:
            with self._guard("saving memories"):
                planned = await engine.saving.save_planned(scope, sid, plan, not reconsider, also)
            self._schedule_facts(scope, planned.records)
            return planned
        with self._guard("reading the ledger"):
            saved = set() if reconsider else await ledger.saved(scope, sid)
            elsewhere = set().union(*[await ledger.saved(scope, s) for s in also])
        planned = await _cpu(off_loop, plan, saved, elsewhere)
        await self._write(scope, sid, planned.records, planned.covered, new_only=not reconsider)
        return planned

    def _schedule_facts(self, scope: Scope, records: list[MemoryRecord]) -> None:
        if self.parts.facts is not None and records:
            self.parts.facts.schedule(scope, records)  # queued only: distilled in the background

    async def _write(
        self, scope: Scope, session_id: str, records: list[MemoryRecord], covered: list[str], new_only: bool = True
    ) -> None:
        parts = self.parts
        with self._guard("saving memories"):
            if parts.engine is not None:  # the store's own ledger: one call (one transaction where it can)
                # new_only: what another worker saved or the user erased since the ledger was read stays so
                await parts.engine.save(records, scope, session_id, covered, new_only=new_only)
            else:
                if records:
                    await parts.backend.upsert(records)
                # Only now, after the backend confirmed, does the ledger move.
                await parts.ledger.mark_saved(scope, session_id, covered)
        self._schedule_facts(scope, records)

    def _log_refused(self, view: SessionView) -> None:
        """Say once per event that a lenient save left it out (every auto-save would repeat it)."""
        for r in view.refused:
            key = (view.app_name, view.user_id, view.session_id, r.event_id or f"#{r.index}")
            if key in self.refused_logged:
                continue
            if len(self.refused_logged) > LOGGED_REFUSALS:
                self.refused_logged.clear()
            self.refused_logged.add(key)
            log.warning("not saved (left unmarked; fix it and it saves): %s", r.reason)
