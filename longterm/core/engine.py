"""The engine core: the primitives every storage engine implements, and the contract built on them.

The seam: an engine subclasses ``Engine``, declares what it can do in **capability flags**
(class attributes, read by ``core.capabilities`` only, as kombu's ``Transport.implements``)
and implements a few **blocking primitives**: ``_open``, ``_write``, ``_fulltext``,
``_nearest``, ``_remove``, ``_count``, ``_page``, ``_scopes``, ``_indices`` (``core.listing``), ``_close``, its
ledger and meta (``_ledger_saved``, ``_ledger_mark``, ``_meta_get``, ``_meta_set``, or a
``side_ledger``), and the ones its flags name (``_commit``, ``_search``, ``_unembedded``,
``_write_vectors``, ``_embed_pending``, ``_list_unembedded``, ``_own_embedder``, ``_purge``),
and ``_session_rows`` (a default scans the scope). ``Engine`` turns them into the async backend
contract (``upsert``, ``save``, ``search``, ``delete``, ``count``, ``scan``, ``close``, the
ledger's ``saved``/``mark_saved``; ``neighbours`` and ``search_lending`` from its base
``core.neighbours.SessionReads``: a hit's session neighbours, alone or in a search's own call;
``embed_backlog`` and ``reembed`` from ``core.upkeep.VectorUpkeep``), composing, once for every
engine, a ``Runner`` (``core.runner``: threads, deadlines, preparing, error translation, fork,
lifetimes), an ``Embedding`` (``core.embedding``: batches, embedding later, the embedder
identity check by id and dimension), record size limits (``core.limits``) and hybrid fusion with visible
degradation (a failed vector arm answers from full text and says so in every hit).

Why so (kombu's virtual transport is the model): five engines wrote this machinery five
times and drifted; a primitive is small enough for a stranger to implement and test, and a
flag says what an engine can do where comparing methods only guessed it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, ClassVar, TypeVar

from typing_extensions import Unpack

from ..config.hybrid import HybridOptions
from ..errors import BackendError, ConfigurationError
from ..records import Hit, MemoryRecord, Scope
from ..retrieval.hybrid import Hybrid
from ..retrieval.text import query_terms
from . import limits
from .aliases import Ids, Records, Vectors
from .capabilities import Capabilities, capabilities
from .embedding import Embedding, Store
from .erasures import ErasureMarks
from .errors import Rule
from .ledger import EngineStoreLedger, SideLedger
from .listing import Listing
from .neighbours import SessionReads
from .runner import Hooks, Label, Runner
from .saving import Saving, Writes
from .searching import Query, Reads, Scored, Searching
from .selection import Cursor, Page, page_by_time, sorted_page, unsaved
from .upkeep import VectorUpkeep
from .where import Where, given

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Re-exported: where they were before the split (``Capabilities`` lives in ``core.capabilities``, the
#: page helpers in ``core.selection``).
__all__ = ["Capabilities", "Engine", "Query", "capabilities", "sorted_page", "unsaved"]


class Engine(Listing, SessionReads, ErasureMarks, VectorUpkeep, EngineStoreLedger):
    """Base of every built-in engine; see the module docstring for the division of work."""

    name: ClassVar[str] = ""
    #: What to do when the engine cannot be reached (appended to the error).
    unreachable: ClassVar[str] = "Check that it is running and reachable."
    #: The ``backend_config`` key that sets ``timeout`` (named in the deadline's error).
    timeout_key: ClassVar[str] = "timeout"
    #: How hits of ``_fulltext`` are labelled in ``Hit.arms`` (mem0's one arm is its vector search).
    text_arm: ClassVar[str] = "fulltext"
    #: The engine's error table when it is static (``_rules`` returns it).
    rules: ClassVar[Sequence[Rule]] = ()
    # The capability flags (what each promises: ``core.capabilities``), read by ``capabilities`` only.
    atomic_save: ClassVar[bool] = False
    keeps_ledger: ClassVar[bool] = True
    embeds_later: ClassVar[bool] = False
    embeds_itself: ClassVar[bool] = False
    native_hybrid: ClassVar[bool] = False
    purges: ClassVar[bool] = False
    marks_erasures: ClassVar[bool] = False
    filters_exact: ClassVar[bool] = False
    rewrites_alive: ClassVar[bool] = False
    #: What ``purge`` says for an engine that has nothing for it to do.
    purge_note: ClassVar[str] = "nothing to compact: this engine keeps no copy of what an erase deleted"
    side_ledger: SideLedger | None = None
    """Where the ledger and meta live without ``keeps_ledger`` (closed with the engine)."""

    def __init__(
        self,
        *,
        where: str,
        store_id: str,
        workers: int = 1,
        timeout: float | None = None,
        embed_later: bool = False,
        max_record_bytes: int | None = None,
        **hybrid: Unpack[HybridOptions],
    ) -> None:
        self.where = where
        """Where the store is, for messages (never a password)."""
        self.store_id = store_id
        """The store's identity (engine, location, index): what a ledger belongs to."""
        self.hybrid = Hybrid(**hybrid)
        caps, label = capabilities(self), Label(self.name, where, self.unreachable, self.timeout_key)
        hooks = Hooks(rules=self._rules, prepare=self._prepare_store, release=self._shut, forget=self._forget)
        self.runner = Runner(label, workers=workers, timeout=timeout, hooks=hooks)
        later = embed_later and self.hybrid.embedder is not None and caps.embeds_later
        store = Store(
            self._unembedded,
            self._write_vectors,
            self._meta_get,
            self._meta_set,
            self._embed_pending,
            self._list_unembedded,
            self._own_embedder,
        )
        pends, own = caps.embeds_later, caps.embeds_itself
        self.embedding = Embedding(
            self.hybrid.embedder, self.runner, store, later=later, pends=pends, embeds_itself=own
        )
        writes = Writes(
            self._write,
            self._write_new,
            self._rewrite,
            self._commit,
            self._ledger_saved,
            self._ledger_mark,
            self._record_bytes,
        )
        atomic, rewrites = caps.atomic_save, caps.rewrites_alive
        self.saving = Saving(
            self.runner, self.embedding, writes, atomic=atomic, limit=max_record_bytes, rewrites=rewrites
        )
        reads = Reads(self._read, self._fulltext, self._nearest, self._search)
        self.searching = Searching(
            self.runner,
            self.embedding,
            self.hybrid,
            reads,
            native=caps.native_hybrid,
            text_arm=self.text_arm,
            filters_exact=caps.filters_exact,
        )
        self.erasing = self._erasing() if caps.marks_erasures else None  # erases in marked steps

    @property
    def timeout(self) -> float | None:
        """Seconds a caller waits for any one operation (None: no deadline)."""
        return self.runner.timeout

    @property
    def _closed(self) -> bool:
        return self.runner.closed

    # -- primitives: blocking, run on the engine's threads ------------------------------------

    def _open(self) -> None:
        """Connect and create what is missing (schema, index, collection). Idempotent."""

    def _write(self, records: Records, vectors: Vectors) -> None:
        """Insert or replace ``records`` by id (``vectors[i]`` is record i's); return once confirmed."""
        raise NotImplementedError

    def _write_new(self, records: Records, vectors: Vectors) -> None:
        """``_write`` of a save that must not bring back what was erased since its ledger read."""
        self._write(records, vectors)

    def _rewrite(self, records: Records, vectors: Vectors) -> Ids:
        """With ``rewrites_alive``: each of ``records`` written over the record of its id only where the
        store still holds that record alive, in one step (no erase between the check and the write),
        keeping what the store stamped it with when saved (an erase under way still covers it); the ids
        written."""
        raise NotImplementedError(f"{type(self).__name__} declares rewrites_alive: it implements _rewrite")

    def _commit(
        self, records: Records, vectors: Vectors, scope: Scope, session_id: str, event_ids: Ids, new_only: bool = False
    ) -> None:
        """With ``atomic_save``: the records and the ledger marks in one step (a transaction, a
        script). ``new_only``: leave out records of events the ledger holds, read in that step."""
        raise NotImplementedError(f"{type(self).__name__} declares atomic_save: it implements _commit")

    def _fulltext(self, scope: Scope, query: Query, k: int, where: Where | None = None) -> Scored:
        """The scope's ``k`` best records for ``query.terms`` (BM25), best first; with ``where``, of
        the records its ``native`` tree passes (``core.where``), applied before the cut."""
        raise NotImplementedError

    def _nearest(self, scope: Scope, vector: np.ndarray, k: int, where: Where | None = None) -> Scored:
        """The scope's ``k`` records nearest to ``vector`` (cosine), best first (``where`` as ``_fulltext``)."""
        raise BackendError(f"the {self.name} engine has no vector search.")

    def _search(
        self, scope: Scope, query: Query, vector: np.ndarray | None, k: int, degraded: str | None, where: Where | None
    ) -> list[Hit]:
        """With ``native_hybrid``: the scope's ``k`` best hits, both arms fused by the engine (``where``
        as ``_fulltext``)."""
        raise NotImplementedError(f"{type(self).__name__} declares native_hybrid: it implements _search")

    def _remove(self, scope: Scope, ids: Ids | None, session_id: str | None) -> int:
        """Delete the scope's ``ids``, else ``session_id``'s, else all; how many went (never half-reported)."""
        raise NotImplementedError

    def _count(self, scope: Scope, where: Where | None = None) -> int:
        """How many records of ``scope`` pass ``where``'s ``native`` tree (all without it)."""
        raise NotImplementedError

    def _page(self, scope: Scope, cursor: Cursor, size: int, where: Where | None = None) -> Page:
        """A page from ``cursor`` (None: the start) and the next (None: done); each record once, any
        order; with ``where``, only records its ``native`` tree passes."""
        raise NotImplementedError

    def _page_by_time(
        self, scope: Scope, cursor: Cursor, size: int, newest_first: bool, where: Where | None = None
    ) -> Page:
        """``_page`` by time, the next cursor JSON-able; this default reads the scope and sorts it."""
        pager = partial(self._page, where=where) if given(where, self._page) else self._page
        return page_by_time(pager, scope, cursor, size, newest_first)

    # With ``keeps_ledger``, an engine implements these four; without, they use ``side_ledger``.

    def _meta_get(self, key: str) -> str | None:
        """A value the store keeps about itself (e.g. which embedder wrote it)."""
        return self._side().meta_get(key)

    def _meta_set(self, key: str, value: str) -> None:
        self._side().meta_set(key, value)

    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        """The event ids of this session the store has handled (its ledger)."""
        return self._side().saved(scope, session_id)

    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        self._side().mark(scope, session_id, event_ids)

    def _ledger_sessions(self, scope: Scope) -> list[str]:
        """The session ids this store's ledger holds for ``scope`` (moving or re-keying a scope)."""
        return self._side().sessions(scope)

    def _purge(self) -> None:
        """With ``purges``: compact the files so what erases deleted leaves them (no deadline)."""
        raise NotImplementedError

    def _close(self) -> None:
        """Release connections and locks."""

    def _forget_after_fork(self) -> None:
        """In a forked child: drop, never close, what the parent holds (or make the next call refuse)."""

    def _rules(self) -> Sequence[Rule]:
        """This engine's error table (see ``core.errors``): ``rules``, unless built at run time."""
        return self.rules

    def _record_bytes(self, r: MemoryRecord) -> int:
        """What ``max_record_bytes`` counts (``limits.record_bytes``; mem0 counts the text alone)."""
        return limits.record_bytes(r)

    # -- the runner's hooks, and its calls under the names engines and tests use ------------

    def _prepare_store(self) -> None:
        if not capabilities(self).keeps_ledger and self.side_ledger is None:
            raise ConfigurationError(f"{type(self).__name__} keeps no ledger of its own but set no side_ledger.")
        self._open()
        if self.erasing is not None:
            self.erasing.finish()  # an erase killed part-way, completed before anything else
        self.embedding.prepare()
        self.embedding.start()

    def _shut(self) -> None:
        """Once closed: after the running operations ended, the connections and the side ledger."""
        self.runner.wait_idle()
        try:
            self._close()
        finally:
            if self.side_ledger is not None:
                self.side_ledger.close()

    def _forget(self) -> None:
        """In a forked child: what the engine and its side ledger inherited, forgotten (never closed)."""
        self.embedding.after_fork()
        if self.side_ledger is not None:
            self.side_ledger.forget()
        try:
            self._forget_after_fork()
        except Exception:  # the child must go on; the engine's next call says what is wrong
            log.warning("%s %s: forgetting the parent's connections failed", self.name, self.where, exc_info=True)

    def _side(self) -> SideLedger:
        if self.side_ledger is None:
            raise NotImplementedError(
                f"{type(self).__name__} keeps no ledger: implement _ledger_saved/_ledger_mark and "
                "_meta_get/_meta_set, or set self.side_ledger = SideLedger(path, store_id)"
            )
        return self.side_ledger

    async def _run(self, what: str, fn: Callable[..., T], *args: object) -> T:
        return await self.runner.run(what, fn, *args)

    async def _read(self, what: str, fn: Callable[..., T], *args: object) -> T:
        """``_run`` of a primitive that only reads (an engine with readers of its own overrides it)."""
        return await self._run(what, fn, *args)

    # -- the backend contract (what the facade calls) ------------------------------------

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace ``records`` by id; return once the engine confirmed it (``core.saving``)."""
        await self.saving.upsert(records)

    async def rewrite(self, records: Sequence[MemoryRecord]) -> list[str]:
        """Write ``records`` over the records of their ids the store still holds; the ids written (an
        update's write: a memory erased since it was read stays erased). Without ``rewrites_alive``,
        an ``upsert`` of them all."""
        return await self.saving.rewrite(records)

    async def save(
        self, records: Sequence[MemoryRecord], scope: Scope, session_id: str, event_ids: Ids, *, new_only: bool = False
    ) -> None:
        """Write ``records`` and then mark ``event_ids`` handled in this store's ledger (``core.saving``).
        ``new_only``: leave out records of events the ledger holds by now (another worker saved them,
        or the user erased them, since the caller read it): a stale plan never brings one back."""
        await self.saving.save(records, scope, session_id, event_ids, new_only)

    async def search(self, scope: Scope, query: str, top_k: int, *, where: Where | None = None) -> list[Hit]:
        """The scope's records best matching ``query``, best first, at most ``top_k`` (``core.searching``);
        with ``where`` (``core.where``), the best of those that pass it: filtered before the cut."""
        terms = query_terms(query, stem=False)
        return await self.searching.search(scope, Query(query, terms), top_k, where) if terms else []

    async def delete(self, scope: Scope, ids: Sequence[str] | None = None, *, session_id: str | None = None) -> int:
        """Delete ``ids``, else one session's records, else every record of ``scope``; how many."""
        id_list = None if ids is None else list(ids)
        if id_list is None and self.erasing is not None:
            return await self._run("deleting memories", self.erasing.erase, scope, session_id)
        return await self._run("deleting memories", self._remove, scope, id_list, session_id)

    async def purge(self) -> str:
        """Compact what erases left in the engine's files (``_purge``, with ``purges``); a sentence
        saying what was done. No deadline: a force merge takes what it takes."""
        if not capabilities(self).purges:
            return self.purge_note
        await self.runner.run_unbounded("purging", self._purge)
        return f"{self.name} compacted: what erases deleted is gone from its files"

    async def saved(self, scope: Scope, session_id: str) -> set[str]:
        """The ledger: event ids of this session already handled by this store."""
        return await self._run("reading the ledger", self._ledger_saved, scope, session_id)

    async def mark_saved(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        if event_ids:
            await self._run("writing the ledger", self._ledger_mark, scope, session_id, list(event_ids))

    async def close(self) -> None:
        """Release the engine; a second close does nothing. Closed first, released second (``Runner``)."""
        if not self.runner.shut_out():
            return
        self.embedding.stop()
        try:
            await self.runner.release()
        finally:
            self.embedding.close()
