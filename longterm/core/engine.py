"""The engine core: what every storage engine shares, written once.

The seam: an engine subclasses ``Engine`` and implements a few **blocking primitives**
(``_open``, ``_write``, ``_fulltext``, ``_nearest``, ``_remove``, ``_count``, ``_page``,
``_close``, ``_meta_get``/``_meta_set``, and where it can, its ledger storage
``_ledger_saved``/``_ledger_mark``). The core turns them into the async backend contract
(``upsert``, ``save``, ``search``, ``delete``, ``count``, ``scan``, ``close``, and the
ledger's ``saved``/``mark_saved``) and owns, once for every engine:

- **one concurrency model**: primitives run on the engine's own worker threads (one for
  an embedded store, a pool for a server), so any event loop, the sync wrappers and
  several threads with their own loops can share one memory; no client is ever bound to
  a loop, and the event loop never blocks on I/O or CPU work;
- **deadlines**: with ``timeout`` set, a caller waits at most that long for any one
  operation (preparing the engine included), then gets a ``BackendUnavailableError``;
- **preparing**: ``_open`` runs once before the first operation, and again when an error
  rule says the engine lost its schema (a server restarted empty);
- **embeddings** off the loop and batched, **hybrid fusion**, and **visible degradation**
  (a failed vector arm answers from full text and says so in every hit);
- **embedding later** (``embed_later=True``, for an engine with ``_unembedded`` and
  ``_write_vectors``): a save writes text only and returns, searchable at once by full
  text; a background thread then embeds what the store lists as unembedded, in batches,
  each batch's vectors written and taken off the list in one step (exactly once, and a
  restart resumes the list). Search uses the vectors that exist;
- **the embedder identity check**: a store remembers which embedder wrote its vectors and
  refuses another, the same on every engine. Opened without an embedder, any store
  answers from full text; a store made without vectors and opened with an embedder
  answers from full text too, saying so in every hit (``longterm migrate`` into a new
  index adds the vectors);
- **error classification**: each engine lists ``Rule``s (``core.errors``); only
  ``LongTermMemoryError``s leave the core;
- **fork**: in a child of ``os.fork`` (``multiprocessing``'s default on Linux) every live
  engine gets new worker threads, locks and a fresh ``_prepared`` (``_after_fork``, run by
  ``os.register_at_fork`` and never on a save or a search), and forgets what it inherited
  (``_forget_after_fork``): the child opens connections of its own and never touches the
  parent's; an embedded store that serves one process refuses there with a clear error;
- **lifetimes**: nothing the core starts keeps a dropped engine alive (the background
  embedder holds it weakly), so its threads end; an engine holding an embedded lock
  releases it from a ``weakref.finalize`` of its own.

Why so (kombu's virtual transport is the model): five engines wrote this machinery five
times and drifted; a primitive is small enough for a stranger to implement and test.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import json
import logging
import os
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

from .. import telemetry
from ..errors import BackendError, BackendUnavailableError, ConfigurationError, InvalidInputError, LongTermMemoryError
from ..records import Hit, MemoryRecord, Scope
from ..retrieval.embedders import Embedder, Kind
from ..retrieval.hybrid import Hybrid
from ..retrieval.text import query_terms
from .errors import Rule, translate
from .ledger import SideLedger

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Texts embedded per call: bounds memory and lets a long save interleave with searches.
EMBED_BATCH = 64
_TIMEOUT_CM = sys.version_info >= (3, 11)
#: Seconds before the background embedder retries after a failure (a save wakes it sooner).
LATER_RETRY = 30.0
#: Meta key under which a store remembers the embedder that wrote its vectors.
EMBEDDER_KEY = "embedder"


def _embed_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=2, thread_name_prefix="longterm-embed")


#: Embedding runs here, apart from the engines' threads: a model busy with a long save
#: must not hold up an engine's searches. Embedders are thread-safe (see retrieval.embedders).
_EMBED_POOL = _embed_pool()
#: Every engine alive in this process, for ``_after_fork_in_child`` (weakly: never keeps one alive).
_LIVE: weakref.WeakSet[Engine] = weakref.WeakSet()
#: What a forked child inherited and must neither use nor release (see ``keep``).
ORPHANS: list[Any] = []


def keep(obj: Any) -> None:
    """In a forked child: keep ``obj`` (inherited from the parent) for the process's life, never
    destroyed, not even at exit: its destructor would close, flush or unlock what the parent still
    uses (a client's sockets, a store's files and locks)."""
    if obj is not None:
        ORPHANS.append(obj)
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def _after_fork_in_child() -> None:
    """``os.register_at_fork(after_in_child=...)``: the child has only the thread that forked;
    whatever waited on the parent's other threads would wait forever. New pools and locks."""
    global _EMBED_POOL
    keep(_EMBED_POOL)
    _EMBED_POOL = _embed_pool()
    for engine in list(_LIVE):
        engine._after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


@dataclass(frozen=True)
class Query:
    """A search's text and its terms (``retrieval.text.query_terms``, unstemmed: letters and
    digits only, at most 256), computed once for every arm."""

    text: str
    terms: list[str]


class Engine:
    """Base of every built-in engine; see the module docstring for the division of work."""

    name: ClassVar[str] = ""
    #: What to do when the engine cannot be reached (appended to the error).
    unreachable: ClassVar[str] = "Check that it is running and reachable."
    #: The ``backend_config`` key that sets ``timeout`` (named in the deadline's error).
    timeout_key: ClassVar[str] = "timeout"
    #: How hits of ``_fulltext`` are labelled in ``Hit.arms`` (an engine whose only arm is not
    #: BM25, such as mem0's vector search, names it).
    text_arm: ClassVar[str] = "fulltext"
    #: The engine's error table when it is static (``_rules`` returns it).
    rules: ClassVar[Sequence[Rule]] = ()

    def __init__(
        self,
        *,
        where: str,
        store_id: str,
        workers: int = 1,
        timeout: float | None = None,
        embed_later: bool = False,
        max_record_bytes: int | None = None,
        **hybrid: Any,
    ) -> None:
        self.where = where
        """Where the store is, for messages (never a password)."""
        self.store_id = store_id
        """The store's identity (engine, location, index): what a ledger belongs to."""
        self.timeout = timeout
        self.max_record_bytes = max_record_bytes
        """Largest record a save accepts, as ``_record_bytes`` counts it; a larger one fails the save."""
        self.hybrid = Hybrid(**hybrid)
        self.embedder: Embedder | None = self.hybrid.embedder
        self._workers = max(1, workers)
        self._closed = False
        self._threads()
        self.vectors_off: str | None = None
        """Why this store answers from full text although an embedder is configured."""
        self.embed_later = (
            embed_later and self.embedder is not None and type(self)._unembedded is not Engine._unembedded
        )
        """Save text only and embed in the background (engines without the two primitives embed on the save path)."""
        self._stopping = False
        _LIVE.add(self)

    def _threads(self) -> None:
        """What lives in this process only: the worker pool, the locks, the background embedder's
        state; ``_prepared`` False (``_open`` runs before the next call). Made anew after a fork."""
        self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=f"longterm-{self.name}")
        self._prepare_lock = threading.Lock()
        self._prepared = False
        self._busy = threading.Condition()
        self._active = 0
        """Primitives running now (``_call``); ``_shut`` waits for them to end."""
        self._wake = threading.Event()
        self._later_lock = threading.Lock()
        self._later: threading.Thread | None = None

    def _after_fork(self) -> None:
        """In a forked child (see ``_after_fork_in_child``): new threads and locks, the side ledger's
        and the engine's inherited connections forgotten (``_forget_after_fork``), never closed."""
        keep(self._pool)  # its threads are not in this process: never join them
        self._threads()
        if self.side_ledger is not None:
            self.side_ledger.forget()
        try:
            self._forget_after_fork()
        except Exception:  # the child must go on; the engine's next call says what is wrong
            log.warning(
                "%s %s: forgetting the parent's connections after fork failed", self.name, self.where, exc_info=True
            )

    side_ledger: SideLedger | None = None
    """Where the ledger and meta live when the engine cannot keep them (closed with it)."""

    # -- primitives: blocking, run on the engine's threads ------------------------------------

    def _open(self) -> None:
        """Connect and create what is missing (schema, index, collection). Idempotent."""

    def _write(self, records: Sequence[MemoryRecord], vectors: np.ndarray | None) -> None:
        """Insert or replace ``records`` by id (``vectors[i]`` is record i's, when embedding);
        return once the engine confirmed the write."""
        raise NotImplementedError

    def _fulltext(self, scope: Scope, query: Query, k: int) -> list[tuple[MemoryRecord, float]]:
        """The scope's ``k`` best records for ``query.terms`` (BM25), best first."""
        raise NotImplementedError

    def _nearest(self, scope: Scope, vector: np.ndarray, k: int) -> list[tuple[MemoryRecord, float]]:
        """The scope's ``k`` records nearest to ``vector`` (cosine), best first."""
        raise BackendError(f"the {self.name} engine has no vector search.")

    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        """Delete the scope's records with ``ids``, else those of ``session_id``, else all of
        them; return how many went. Atomic where the engine allows; never half-reported."""
        raise NotImplementedError

    def _count(self, scope: Scope) -> int:
        raise NotImplementedError

    def _page(self, scope: Scope, cursor: Any, size: int) -> tuple[list[MemoryRecord], Any]:
        """One page of the scope's records from ``cursor`` (None: the start), and the next
        cursor (None: done). Every record exactly once, in an order of the engine's choosing."""
        raise NotImplementedError

    def _page_by_time(self, scope: Scope, cursor: Any, size: int, newest_first: bool) -> tuple[list[MemoryRecord], Any]:
        """One page of the scope's records by time (newest or oldest first) from ``cursor`` (None:
        the start), and the next cursor (JSON-able; None: done). This default reads the whole
        scope and sorts it (correct on every engine); an engine with an index on time overrides it."""
        records: list[MemoryRecord] = []
        page_cursor: Any = None
        while True:
            page, page_cursor = self._page(scope, page_cursor, 1000)
            records.extend(page)
            if page_cursor is None:
                return sorted_page(records, cursor, size, newest_first)

    def _scopes(self) -> list[tuple[str, str, int]]:
        """(app, user, count) of every scope of this index holding at least one record, for
        ``stats`` and ``migrate``. Every built-in engine implements it."""
        raise NotImplementedError

    def _indices(self) -> list[str]:
        """The ``index`` names (as a caller passes them in ``backend_config``, not the engine's
        physical names) of every index of this store's location and prefix that holds records,
        this one included when it does: the CLI, MCP and UI find a user in whichever holds it."""
        raise NotImplementedError

    # An engine that cannot keep its ledger and meta itself sets ``self.side_ledger`` (a
    # ``SideLedger`` file beside the store, moved and erased with it); these four then use it.

    def _meta_get(self, key: str) -> str | None:
        """A value the store keeps about itself (e.g. which embedder wrote it)."""
        return self._side().meta_get(key)

    def _meta_set(self, key: str, value: str) -> None:
        self._side().meta_set(key, value)

    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        """The event ids of this session the store has handled (its ledger)."""
        return self._side().saved(scope, session_id)

    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        """Mark ``event_ids`` handled (default: a ``_commit`` of no records, where an engine has one)."""
        if self.side_ledger is None and type(self)._commit is not Engine._commit:
            return self._commit((), None, scope, session_id, event_ids)
        self._side().mark(scope, session_id, event_ids)

    def _commit(
        self,
        records: Sequence[MemoryRecord],
        vectors: np.ndarray | None,
        scope: Scope,
        session_id: str,
        event_ids: Sequence[str],
    ) -> None:
        """A save: the records, then (after the engine confirmed them) the ledger. An engine
        that can do both in one transaction overrides this."""
        if records:
            self._write(records, vectors)
        if not event_ids:
            return
        if type(self)._ledger_mark is Engine._ledger_mark:  # the default would call this _commit again
            self._side().mark(scope, session_id, event_ids)
        else:
            self._ledger_mark(scope, session_id, event_ids)

    def _commit_new(
        self,
        records: Sequence[MemoryRecord],
        vectors: np.ndarray | None,
        scope: Scope,
        session_id: str,
        event_ids: Sequence[str],
    ) -> None:
        """``_commit`` of the records whose events the ledger does not hold yet, read just before
        (one round trip of a window; an engine with transactions overrides it to read inside)."""
        records, vectors = unsaved(records, vectors, self._ledger_saved(scope, session_id))
        self._commit(records, vectors, scope, session_id, event_ids)

    def _search(self, scope: Scope, query: Query, vector: np.ndarray | None, k: int, degraded: str | None) -> list[Hit]:
        """Hybrid search: both arms, fused. An engine that fuses natively overrides this."""
        depth = self.hybrid.depth(k)
        text = self._fulltext(scope, query, depth)
        near: list[tuple[MemoryRecord, float]] = []
        if vector is not None:
            try:
                near = self._nearest(scope, vector, depth)
            except Exception as exc:  # degrade visibly: full text still answers
                err, _ = self._translate(exc, "searching by vector")
                degraded = f"vector search failed ({err}); results are full text only"
                log.warning("%s %s: %s", self.name, self.where, degraded)
        by_id = {rec.id: rec for rec, _ in (*text, *near)}
        fused = self.hybrid.fuse({"fulltext": [(r.id, s) for r, s in text], "vector": [(r.id, s) for r, s in near]})
        extra = {"degraded": degraded} if degraded else {}
        return [Hit(record=by_id[i], score=s, arms=a, extra=extra) for i, s, a in fused[:k]]

    def _unembedded(self, limit: int) -> list[tuple[Any, str]]:
        """With ``embed_later``: at most ``limit`` records saved without a vector, oldest first,
        as (key, text) pairs (the key is the engine's own, handed back to ``_write_vectors``)."""
        raise NotImplementedError

    def _write_vectors(self, keys: Sequence[Any], vectors: np.ndarray) -> None:
        """Store ``vectors[i]`` for ``keys[i]`` and take those records off the unembedded list, in
        one step; a record changed or deleted since ``_unembedded`` read it is left alone."""
        raise NotImplementedError

    #: Whether a save writes its records and its ledger marks in one atomic step (a transaction, a
    #: script): where not, ``longterm doctor`` checks that they agree.
    atomic_save: ClassVar[bool] = False
    #: Whether an erase leaves bytes in the engine's files that ``_purge`` compacts (an AOF,
    #: Lucene segments): read by ``purge``, the one place that asks (kombu's ``implements``).
    purges: ClassVar[bool] = False
    #: What ``purge`` says for an engine that has nothing for it to do.
    purge_note: ClassVar[str] = "nothing to compact: this engine keeps no copy of what an erase deleted"

    def _purge(self) -> None:
        """With ``purges``: compact the engine's files so what erases deleted leaves them; blocking,
        as long as the engine needs (an operator's command, run without the call deadline)."""
        raise NotImplementedError

    def _close(self) -> None:
        """Release connections and locks."""

    def _forget_after_fork(self) -> None:
        """In a forked child, before any other call: drop (never close: the parent still uses
        them) the connections, clients and locks inherited from the parent, so that the next
        call opens its own (the core runs ``_open`` again). An embedded store that serves one
        process raises a ``BackendError`` saying so from its next call instead."""

    def _rules(self) -> Sequence[Rule]:
        """This engine's error table (see ``core.errors``): ``rules``, unless built at run time."""
        return self.rules

    # -- machinery -------------------------------------------------------------------------

    def _shut(self) -> None:
        with self._busy:  # what runs on another worker ends before the connection does
            if not self._busy.wait_for(lambda: self._active == 0, timeout=self.timeout):
                log.warning("%s %s: closing while %d operations still run", self.name, self.where, self._active)
        try:
            self._close()
        finally:
            if self.side_ledger is not None:
                self.side_ledger.close()

    def _side(self) -> SideLedger:
        if self.side_ledger is None:
            raise NotImplementedError(
                f"{type(self).__name__} keeps no ledger: implement _ledger_saved/_ledger_mark and "
                "_meta_get/_meta_set, or set self.side_ledger = SideLedger(path, store_id)"
            )
        return self.side_ledger

    def _translate(self, exc: BaseException, what: str) -> tuple[LongTermMemoryError, bool]:
        return translate(
            exc, self._rules(), engine=self.name, where=self.where, what=what, unreachable=self.unreachable
        )

    def _prepare(self) -> None:
        with self._prepare_lock:
            if self._prepared:
                return
            self._open()
            have = self._meta_get(EMBEDDER_KEY)
            if have is None:  # a store (or index) nothing was written to: recorded with the first write,
                self._unrecorded = True  # so opening it, to read, never writes (nor waits for a writer)
            else:
                self._accept_embedder(have)
            self._prepared = True
            if self.embed_later and not self.vectors_off and self._later is None:
                args = (weakref.ref(self), self._wake)
                self._later = threading.Thread(
                    target=_embed_loop, args=args, name=f"longterm-{self.name}-embed", daemon=True
                )
                # A dropped engine's embedder wakes and ends (at exit, daemon threads just stop).
                weakref.finalize(self, self._wake.set).atexit = False
                self._later.start()
                self._wake.set()  # what an earlier run left unembedded, too

    def _closed_error(self) -> BackendError:
        return BackendError(f"the {self.name} store at {self.where} is closed; open a new LongTermMemory.")

    def _call(self, what: str, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """``fn(*args)`` on this thread: prepared first, errors translated, counted in ``_active``.

        Checked against ``_closed`` under ``_busy``, so nothing starts once ``close`` began and
        ``_shut`` can wait for what started before: no primitive runs on a closed connection."""
        with self._busy:
            if self._closed:
                raise self._closed_error()
            self._active += 1
        try:
            for attempt in (0, 1):
                try:
                    self._prepare()
                    return fn(*args)
                except (KeyboardInterrupt, SystemExit, GeneratorExit):
                    raise
                except BaseException as exc:  # native engines panic with BaseExceptions (pyo3's PanicException)
                    err, reopen = self._translate(exc, what)
                    if reopen and attempt == 0 and not self._closed:
                        log.warning(
                            "%s %s: %s; preparing the store again and retrying once", self.name, self.where, err
                        )
                        with self._prepare_lock:
                            self._prepared = False
                        continue
                    if err is exc:
                        raise
                    raise err from exc
            raise AssertionError("unreachable")
        finally:
            with self._busy:
                self._active -= 1
                self._busy.notify_all()

    async def _run(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the engine's threads, awaited from any loop, within the deadline.

        A closed engine answers with its "closed" error (never the pool's RuntimeError)."""
        if self._closed:
            raise self._closed_error()
        try:
            submitted = self._pool.submit(self._call, what, fn, args)
        except RuntimeError:  # the pool shut down between the check and the submit
            raise self._closed_error() from None
        future = asyncio.wrap_future(submitted)
        if self.timeout is None:
            return await future
        try:
            if _TIMEOUT_CM:  # 3.11+: no task per call (about 40 us less than wait_for)
                async with asyncio.timeout(self.timeout):  # type: ignore[attr-defined,unused-ignore]
                    return await future
            return await asyncio.wait_for(future, self.timeout)
        except (asyncio.TimeoutError, TimeoutError):
            raise BackendUnavailableError(
                f"{self.name} at {self.where} did not answer within {self.timeout:g} s while {what}. Check that it "
                f"is up and not overloaded, or raise backend_config[{self.timeout_key!r}]."
            ) from None

    async def _embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        assert self.embedder is not None
        embed = functools.partial(self.embedder.embed, kind=kind)
        loop = asyncio.get_running_loop()
        with telemetry.span("longterm.embed", backend=self.name, kind=kind, texts=len(texts)):
            parts = [
                await loop.run_in_executor(_EMBED_POOL, embed, list(texts[i : i + EMBED_BATCH]))
                for i in range(0, len(texts), EMBED_BATCH)
            ]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _embed_batch(self) -> int:
        """Embed one batch of the records saved without vectors; how many (0: none left)."""
        assert self.embedder is not None
        if self._closed:
            raise self._closed_error()
        with self._later_lock:
            read = self._pool.submit(self._call, "reading memories to embed", self._unembedded, (EMBED_BATCH,))
            batch = read.result(self.timeout)
            if batch:
                vectors = self.embedder.embed([text for _, text in batch], kind="passage")
                args = ([key for key, _ in batch], vectors)
                self._pool.submit(self._call, "saving vectors", self._write_vectors, args).result(self.timeout)
            return len(batch)

    def _embed_pass(self) -> float | None:
        """One wake of the background embedder: drain the list; seconds until a retry (None: none)."""
        try:
            while self._embed_batch() and not self._stopping:
                pass
            return None
        except BaseException as exc:  # the list stays in the store: the next wake resumes it
            if not self._stopping:
                log.warning("%s %s: embedding saved memories failed (%s); retrying", self.name, self.where, exc)
            return LATER_RETRY

    async def embed_backlog(self) -> int:
        """With ``embed_later``: embed now whatever is saved without vectors; return how many.

        For scripts and tests that need every vector before going on; the background thread
        does the same on its own."""
        if not self.embed_later:
            return 0
        await self._ready()
        loop, done = asyncio.get_running_loop(), 0
        try:
            while n := await loop.run_in_executor(_EMBED_POOL, self._embed_batch):
                done += n
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise BackendError(
                f"embedding saved memories with {self.embedder and self.embedder.id!r} failed after {done}: "
                f"{type(exc).__name__}: {exc}. They stay listed; the background embedder retries them."
            ) from exc
        return done

    async def _ready(self) -> None:
        """Prepare the store now (within the deadline), when what comes next depends on it."""
        if not self._prepared:
            await self._run("opening the store", lambda: None)

    def _record_bytes(self, r: MemoryRecord) -> int:
        """What ``max_record_bytes`` counts: the text and, unless it is just the text, the content
        (compact UTF-8 JSON, as stored). An engine that limits something else overrides this."""
        if r.text_only_content():
            return len(r.text.encode())
        return len(r.text.encode()) + len(json.dumps(r.content, ensure_ascii=False, separators=(",", ":")).encode())

    def _over_limit(self, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """The records that may be over ``max_record_bytes``: a cheap test, fit for the event loop."""
        limit = self.max_record_bytes
        if limit is None:
            return []
        # No UTF-8 character is over 4 bytes; only the others need their bytes counted.
        return [r for r in records if not (4 * len(r.text) <= limit and r.text_only_content())]

    def _check_sizes(self, records: Sequence[MemoryRecord]) -> None:
        """Refuse the save when one of ``records`` is over the limit (counting is blocking work)."""
        for r in records:
            size = self._record_bytes(r)
            if self.max_record_bytes is not None and size > self.max_record_bytes:
                raise InvalidInputError(
                    f"event {r.event_id!r} of session {r.session_id!r} is {size} bytes, over the {self.name} "
                    f"backend's limit of {self.max_record_bytes}; raise backend_config['max_record_bytes'] or "
                    "exclude such events with the auto-save policy."
                )

    async def _passages(self, records: Sequence[MemoryRecord]) -> np.ndarray | None:
        """Check the records' sizes, then embed them where the save path does; before any write."""
        if doubtful := self._over_limit(records):
            await self._run("checking memory sizes", self._check_sizes, doubtful)
        if self.embedder is None or self.embed_later or not records:
            return None
        await self._ready()
        if self.vectors_off:
            return None
        try:
            return await self._embed([r.text for r in records], "passage")
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise BackendError(
                f"embedding {len(records)} memories with {self.embedder.id!r} failed: {type(exc).__name__}: {exc}. "
                "Nothing was saved; the next save retries them."
            ) from exc

    # -- the backend contract (what the facade calls) ------------------------------------

    _unrecorded = False
    """The store has no embedder identity yet (``_prepare``): the first write records it."""

    def _accept_embedder(self, have: str) -> None:
        """This memory's embedder against ``have``, the one the store recorded: a store made
        without one answers from full text (``vectors_off``), another one is refused."""
        want = self.embedder.id if self.embedder is not None else ""
        if want and not have:
            self.vectors_off = (
                f"this store was made without an embedder, so it holds no vectors for {want!r}; results are "
                "full text only. `longterm migrate` into a new index adds the vectors"
            )
            log.warning("%s %s: %s", self.name, self.where, self.vectors_off)
        elif want and have != want:
            raise ConfigurationError(
                f"the {self.name} store at {self.where} was written with {have or 'no embedder'!r}, but this "
                f"memory is configured with {want or 'no embedder'!r}. Vectors of different embedders never "
                "mix: configure the embedder the store was made with, or use another index (or erase it)."
            )

    def _record_embedder(self) -> None:
        """Before the first write of a store opened without an embedder identity: record ours; if
        another process recorded one meanwhile, judge ours against it as ``_prepare`` does."""
        have = self._meta_get(EMBEDDER_KEY)
        if have is None:
            self._meta_set(EMBEDDER_KEY, self.embedder.id if self.embedder is not None else "")
        else:
            self._accept_embedder(have)
        self._unrecorded = False

    async def _before_write(self) -> None:
        await self._ready()
        if self._unrecorded:
            await self._run("saving memories", self._record_embedder)

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace ``records`` by id; return once the engine confirmed it."""
        if records:
            await self._before_write()
            vectors = await self._passages(records)
            await self._run("saving memories", self._write, list(records), vectors)
            if self.embed_later:
                self._wake.set()

    async def save(
        self,
        records: Sequence[MemoryRecord],
        scope: Scope,
        session_id: str,
        event_ids: Sequence[str],
        *,
        new_only: bool = False,
    ) -> None:
        """Write ``records`` and then mark ``event_ids`` handled in this store's ledger.

        ``new_only``: leave out records of events the ledger holds by now (another worker saved
        them, or the user erased them, since the caller read it): a save planned from a stale
        read never brings an erased memory back."""
        await self._before_write()
        vectors = await self._passages(records)
        commit = self._commit_new if new_only else self._commit
        await self._run("saving memories", commit, list(records), vectors, scope, session_id, list(event_ids))
        if self.embed_later and records:
            self._wake.set()

    async def search(self, scope: Scope, query: str, top_k: int) -> list[Hit]:
        """The scope's records best matching ``query``, best first, at most ``top_k``."""
        terms = query_terms(query, stem=False)
        if not terms:
            return []
        q = Query(query, terms)
        if self.embedder is not None:
            await self._ready()
        if self.embedder is None or self.vectors_off:
            rows = await self._run("searching", self._fulltext, scope, q, top_k)
            extra = {"degraded": self.vectors_off} if self.vectors_off else {}
            return [Hit(record=rec, score=s, arms={self.text_arm: s}, extra=extra) for rec, s in rows[:top_k]]
        vector: np.ndarray | None = None
        degraded = None
        try:
            vector = (await self._embed([query], "query"))[0]
        except Exception as exc:  # degrade visibly: full text still answers
            degraded = f"query embedding failed ({type(exc).__name__}: {exc}); results are full text only"
            log.warning("%s %s: %s", self.name, self.where, degraded)
        return await self._run("searching", self._search, scope, q, vector, top_k, degraded)

    async def delete(self, scope: Scope, ids: Sequence[str] | None = None, *, session_id: str | None = None) -> int:
        """Delete ``ids``, else one session's records, else every record of ``scope``; how many."""
        id_list = None if ids is None else list(ids)
        return await self._run("deleting memories", self._remove, scope, id_list, session_id)

    async def count(self, scope: Scope) -> int:
        return await self._run("counting memories", self._count, scope)

    async def scan(self, scope: Scope, batch_size: int = 500) -> AsyncIterator[MemoryRecord]:
        """Every record of ``scope``, each exactly once."""
        cursor: Any = None
        while True:
            records, cursor = await self._run("reading memories", self._page, scope, cursor, batch_size)
            for rec in records:
                yield rec
            if cursor is None:
                return

    async def page_by_time(
        self, scope: Scope, cursor: Any = None, size: int = 100, *, newest_first: bool = True
    ) -> tuple[list[MemoryRecord], Any]:
        """One page of ``scope`` by time and the next page's cursor (``_page_by_time``)."""
        return await self._run("reading memories", self._page_by_time, scope, cursor, size, newest_first)

    async def scopes(self) -> list[tuple[str, str, int]]:
        """(app, user, count) of every scope of this index with records (``_scopes``)."""
        return await self._run("listing users", self._scopes)

    async def indices(self) -> list[str]:
        """The index names of this store that hold records (``_indices``)."""
        return await self._run("listing indices", self._indices)

    async def purge(self) -> str:
        """Compact what erases left in the engine's files (``_purge``, where ``purges``); a
        sentence saying what was done. No deadline: a force merge takes what it takes."""
        if not self.purges:
            return self.purge_note
        if self._closed:
            raise self._closed_error()
        await asyncio.wrap_future(self._pool.submit(self._call, "purging", self._purge, ()))
        return f"{self.name} compacted: what erases deleted is gone from its files"

    async def saved(self, scope: Scope, session_id: str) -> set[str]:
        """The ledger: event ids of this session already handled by this store."""
        return await self._run("reading the ledger", self._ledger_saved, scope, session_id)

    async def mark_saved(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        if event_ids:
            await self._run("writing the ledger", self._ledger_mark, scope, session_id, list(event_ids))

    async def close(self) -> None:
        """Release the engine; a second close does nothing.

        Closed first, released second: from here on every operation (queued, or asked for
        from any thread or loop) fails with the "closed" error instead of reaching the
        connection that ``_shut`` releases once the running ones ended."""
        with self._busy:
            if self._closed:
                return
            self._closed = True
        self._stopping = True  # the background embedder stops at its next step
        self._wake.set()
        # Released once the running operations end, even when this wait is cancelled (a shutdown
        # hook's deadline): the cancellation is the caller's to hear, the release still happens.
        shut = self._pool.submit(self._shut)
        try:
            await asyncio.shield(asyncio.wrap_future(shut))
        except Exception:  # closing: nothing left to release, but say what happened
            log.debug("closing %s %s", self.name, self.where, exc_info=True)
        finally:
            self._pool.shutdown(wait=False)
            close = getattr(self.embedder, "close", None)
            if callable(close):
                close()


def _embed_loop(ref: weakref.ref[Engine], wake: threading.Event) -> None:
    """The background thread of ``embed_later``: woken by saves, drains the list, retries failures.

    It holds its engine weakly between wakes: a dropped engine's thread ends (its finalizer wakes it)."""
    retry: float | None = None
    while True:
        wake.wait(retry)
        wake.clear()
        engine = ref()
        if engine is None or engine._stopping:
            return
        retry = engine._embed_pass()
        del engine


def unsaved(
    records: Sequence[MemoryRecord], vectors: np.ndarray | None, done: set[str]
) -> tuple[Sequence[MemoryRecord], np.ndarray | None]:
    """``records`` (and their rows of ``vectors``) whose event is not in ``done``, a ledger read."""
    keep = [i for i, r in enumerate(records) if r.event_id not in done]
    if len(keep) == len(records):
        return records, vectors
    return [records[i] for i in keep], None if vectors is None else vectors[keep]


def sorted_page(records: list[MemoryRecord], at: Any, size: int, newest_first: bool) -> tuple[list[MemoryRecord], Any]:
    """A page by time of ``records`` (all of a scope) after position ``at`` ((time, id); None: the
    start), and the next position: ``_page_by_time`` of an engine without an index on time."""
    records = sorted(records, key=lambda r: (r.timestamp, r.id), reverse=newest_first)
    if at is not None:
        key = (float(at[0]), str(at[1]))
        records = [r for r in records if ((r.timestamp, r.id) < key if newest_first else (r.timestamp, r.id) > key)]
    page = records[:size]
    return page, ([page[-1].timestamp, page[-1].id] if len(records) > size else None)
