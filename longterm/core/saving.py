"""A save as the engine core runs it, from the records a policy kept to the ledger marks.

The seam: an ``Engine`` holds one ``Saving`` over its runner, its embedding and its write
primitives (``Writes``, held weakly). ``save(records, scope, session_id, event_ids)`` and
``upsert(records)`` each: record the embedder before the store's first write (and decide what a
memory without one writes with, ``core.embedding``), refuse a record over the size limit
(``core.limits``), embed the texts where the save path does (vectors of another dimension than
the store's are refused there, before anything is written), then write on a worker, and record
the store's dimension where that write made it known (``core.identity``). A save writes its records and ledger marks in
one step, the engine's ``_commit``, where the engine declares ``atomic_save``; otherwise the
records first (``_write``, or ``_write_new`` for a save that must not bring an erased memory
back), then the marks (``_ledger_mark``), so a crash between them costs a rewrite of the
same ids, never a lost memory. Then the background embedder is woken, when there is one.
``save_planned(scope, session_id, plan)`` is a whole save in one worker call: the ledger
read, ``plan(saved, also_saved)`` (the records and the events they cover) and the write, where no
embedding happens on the save path (``one_call``).

Why an object of its own: the order of these steps is the promise a save makes (nothing
written before it is checked and embedded; the ledger never ahead of the records), and it
is the same for every engine. Why one call: each hop to a worker thread waits for the
scheduler, and on a busy machine that wait, not the work, was most of a small save's time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, TypeVar

from ..records import MemoryRecord, Scope
from . import limits
from .aliases import Records, Vectors
from .embedding import Embedding
from .runner import Hook, Runner
from .selection import unsaved


class Plan(Protocol):
    """What a save plans (``saves.SavePlan``): the records to write and every event they cover."""

    @property
    def records(self) -> Sequence[MemoryRecord]: ...

    @property
    def covered(self) -> Sequence[str]: ...


PlanT = TypeVar("PlanT", bound=Plan)
#: A save's plan from the events the ledger holds for its session and for the other sessions asked.
Planner = Callable[[set[str], set[str]], PlanT]


class Commit(Protocol):
    """``Engine._commit``: ``new_only`` is passed by name, so an override taking ``**kw`` keeps working."""

    def __call__(
        self,
        records: Records,
        vectors: Vectors,
        scope: Scope,
        session_id: str,
        event_ids: Sequence[str],
        *,
        new_only: bool = False,
    ) -> None: ...


class Writes(NamedTuple):
    """The engine's write primitives (bound methods; see ``core.engine``)."""

    write: Callable[[Records, Vectors], None]
    write_new: Callable[[Records, Vectors], None]
    rewrite: Callable[[Records, Vectors], Sequence[str]]
    commit: Commit
    ledger_saved: Callable[[Scope, str], set[str]]
    ledger_mark: Callable[[Scope, str, Sequence[str]], None]
    record_bytes: Callable[[MemoryRecord], int]


class Saving:
    """An engine's saves and upserts (see the module docstring)."""

    def __init__(
        self,
        runner: Runner,
        embedding: Embedding,
        writes: Writes,
        *,
        atomic: bool,
        limit: int | None,
        rewrites: bool = False,
    ) -> None:
        self.atomic = atomic
        """``atomic_save``: records and marks in one ``_commit``."""
        self.rewrites = rewrites
        """``rewrites_alive``: ``rewrite`` writes only over records the store still holds (``_rewrite``)."""
        self.limit = limit
        """Largest record a save accepts (``max_record_bytes``); a larger one fails the save."""
        self._runner, self._embedding = runner, embedding
        self._write, self._write_new, self._commit = Hook(writes.write), Hook(writes.write_new), Hook(writes.commit)
        self._rewrite = Hook(writes.rewrite)
        self._saved, self._mark = Hook(writes.ledger_saved), Hook(writes.ledger_mark)
        self._bytes = Hook(writes.record_bytes)

    def check_sizes(self, records: Records) -> None:
        """Refuse the save when one of ``records`` is over the limit (counting is blocking work)."""
        limits.check(records, self.limit, self._bytes, self._runner.label.name)

    async def _before_write(self, records: Records) -> Vectors:
        """The embedder recorded, the sizes checked, the records embedded where the save path does."""
        await self._embedding.before_write(bool(records))
        if doubtful := limits.doubtful(records, self.limit):
            await self._runner.run("checking memory sizes", self.check_sizes, doubtful)
        return await self._embedding.passages(records)

    async def upsert(self, records: Records) -> None:
        if records:
            vectors = await self._before_write(records)
            await self._runner.run("saving memories", self._upsert_now, list(records), vectors)
            self._embedding.wake()

    def _upsert_now(self, records: Records, vectors: Vectors) -> None:
        self._write(records, vectors)
        self._embedding.written(vectors)

    async def rewrite(self, records: Records) -> list[str]:
        """``records`` written over the records of their ids the store still holds (``rewrites``;
        otherwise an ``upsert``); the ids written."""
        if not records:
            return []
        vectors = await self._before_write(records)
        written = await self._runner.run("saving memories", self._rewrite_now, list(records), vectors)
        self._embedding.wake()
        return written

    def _rewrite_now(self, records: Records, vectors: Vectors) -> list[str]:
        if not self.rewrites:
            self._upsert_now(records, vectors)
            return [r.id for r in records]
        written = list(self._rewrite(records, vectors))
        self._embedding.written(vectors)
        return written

    async def save(
        self, records: Records, scope: Scope, session_id: str, event_ids: Sequence[str], new_only: bool
    ) -> None:
        vectors = await self._before_write(records)
        args = (list(records), vectors, scope, session_id, list(event_ids), new_only)
        await self._runner.run("saving memories", self._now, *args)
        if records:
            self._embedding.wake()

    @property
    def one_call(self) -> bool:
        """True when a save can be planned and written in one worker call: no embedding on the
        save path (it is awaited before the write, off the worker)."""
        return self._embedding.writer is None or self._embedding.later

    async def save_planned(
        self, scope: Scope, session_id: str, plan: Planner[PlanT], new_only: bool, also: Sequence[str] = ()
    ) -> PlanT:
        """Read the ledger, plan (``plan(saved, also_saved)``) and write, in one call on a worker
        (``one_call`` must hold); the plan is returned. ``also``: other ledger sessions of ``scope``,
        read in the same call, their events handed to the plan as ``also_saved``. The first save of a
        memory without an embedder on a store with one is made in steps: it decides what the save
        writes with (``core.embedding``)."""
        await self._embedding.before_write(records=False)
        planned: PlanT
        if self._embedding.identity.needs_writer:
            read = await self._runner.run("reading the ledger", self._read, scope, session_id, also)
            planned = plan(*read)
            await self.save(planned.records, scope, session_id, planned.covered, new_only)
            return planned
        args = (scope, session_id, plan, new_only, also)
        planned = await self._runner.run("saving memories", self._plan_now, *args)
        if planned.records:
            self._embedding.wake()
        return planned

    def _read(self, scope: Scope, session_id: str, also: Sequence[str]) -> tuple[set[str], set[str]]:
        """The events the ledger holds for ``session_id``, and for the sessions ``also``."""
        return self._saved(scope, session_id), set().union(*(self._saved(scope, s) for s in also))

    def _plan_now(
        self, scope: Scope, session_id: str, plan: Planner[PlanT], new_only: bool, also: Sequence[str]
    ) -> PlanT:
        planned = plan(*self._read(scope, session_id, also))
        records = list(planned.records)
        if doubtful := limits.doubtful(records, self.limit):
            self.check_sizes(doubtful)  # already on the worker: counted here, as ``_before_write`` has it done
        self._now(records, None, scope, session_id, list(planned.covered), new_only)
        return planned

    def _now(
        self, records: Records, vectors: Vectors, scope: Scope, session_id: str, event_ids: list[str], new_only: bool
    ) -> None:
        """On a worker: in one step where atomic; else the records (with ``new_only``, those of
        events the ledger does not hold, read just before), then the ledger."""
        if self.atomic:
            self._commit(records, vectors, scope, session_id, event_ids, new_only=new_only)
        else:
            if new_only:
                records, vectors = unsaved(records, vectors, self._saved(scope, session_id))
            if records:
                (self._write_new if new_only else self._write)(records, vectors)
            if event_ids:
                self._mark(scope, session_id, event_ids)
        if records:
            self._embedding.written(vectors)
