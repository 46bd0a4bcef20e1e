"""An engine's embedder as the core uses it: batched off the loop, later in the background, checked.

The seam: an ``Engine`` holds one ``Embedding`` (over its ``Runner``). ``passages(records)``
embeds a save's texts where the save path does, ``query(text)`` a search's (degrading to
full text, visibly, when that fails or its vector's dimension is not the store's);
``prepare()`` and ``before_write()`` are the embedder identity check (``core.identity``: the
store's embedder by id and dimension, the same on every engine); ``start()``, ``wake()``,
``backlog()``, ``refill()`` and ``stop()`` run embedding later.

- **embeddings** run off the loop, in batches of ``EMBED_BATCH``, on a pool apart from the
  engines' threads: a model busy with a long save must not hold up an engine's searches;
- **embedding later** (an engine declaring ``embeds_later``, with ``_unembedded`` and
  ``_write_vectors``): with ``embed_later=True`` a save writes text only and returns, searchable
  at once by full text; a background thread embeds what the store lists as unembedded, in
  batches, each batch's vectors written and taken off the list in one step (exactly once; a
  restart resumes the list). A memory opened with the store's embedder drains what the list
  holds, ``embed_later`` or not; ``refill()`` lists every record without a vector first;
- **a save without the store's embedder** is never silently without vectors: a memory with no
  embedder on a store that recorded one loads the store's at its first write of records when it
  is a built-in one that is installed (``builtin_embedder``; never on opening, never for a read);
  else, with ``embeds_later``, writes text and lists the records as pending (``_embed_pending``)
  for the next memory opened with the embedder; else its save is refused, naming the embedder;
- **lifetimes**: the background thread holds this object weakly between wakes, so a dropped
  engine's thread ends (a finalizer wakes it).

Why numpy is imported where vectors are made: a memory without an embedder never loads it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, NamedTuple

from .. import telemetry
from ..errors import BackendError, ConfigurationError, LongTermMemoryError
from ..records import MemoryRecord, Scope
from ..retrieval.embedders import Embedder, Kind
from .fork import keep
from .identity import DIM_KEY, EMBEDDER_KEY, Identity
from .runner import Hook, Runner

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

#: Texts embedded per call: bounds memory and lets a long save interleave with searches.
EMBED_BATCH = 64
#: Seconds before the background embedder retries after a failure (a save wakes it sooner).
LATER_RETRY = 30.0

__all__ = ["DIM_KEY", "EMBEDDER_KEY", "EMBED_BATCH", "Embedding", "Store"]


def _embed_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=2, thread_name_prefix="longterm-embed")


#: Embedding runs here, apart from the engines' threads. Embedders are thread-safe (see retrieval.embedders).
_EMBED_POOL = _embed_pool()


def _after_fork_in_child() -> None:
    """In a forked child: the parent's embedding threads are not here; a pool of the child's own."""
    global _EMBED_POOL
    keep(_EMBED_POOL)
    _EMBED_POOL = _embed_pool()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Store(NamedTuple):
    """The engine's primitives embedding uses (bound methods of the engine, held weakly)."""

    unembedded: Callable[[int], list[tuple[object, str]]]
    """At most ``limit`` (key, text) pairs saved without a vector (``embeds_later``)."""
    write_vectors: Callable[[Sequence[object], np.ndarray], None]
    """Their vectors, written and taken off the list in one step (``embeds_later``)."""
    meta_get: Callable[[str], str | None]
    meta_set: Callable[[str, str], None]
    pend: Callable[[], None]
    """From now on, what this engine writes is listed as saved without a vector (``embeds_later``)."""
    listing: Callable[[Scope | None], int]
    """List every record of the index (of a scope) that has no vector; how many (``embeds_later``)."""
    own: Callable[[], Embedder | None]
    """The engine's own embedder, once open (``embeds_itself``)."""


class Embedding:
    """An engine's embedder, its identity check and its background embedding (module docstring)."""

    def __init__(
        self,
        embedder: Embedder | None,
        runner: Runner,
        store: Store,
        *,
        later: bool,
        pends: bool = False,
        embeds_itself: bool = False,
    ) -> None:
        self.later = later
        """Save text only and embed in the background (otherwise on the save path)."""
        self.pends = pends
        """The engine lists records saved without a vector (``embeds_later``)."""
        self.identity = Identity(
            embedder, runner.label, store.meta_get, store.meta_set, store.own if embeds_itself else None
        )
        self._runner = runner
        self._unembedded, self._write_vectors = Hook(store.unembedded), Hook(store.write_vectors)
        self._pend, self._listing = Hook(store.pend), Hook(store.listing)
        self._stopping = False
        self._filling = False  # a ``refill`` opened the store: it drains the list itself, and counts it
        self._fresh()

    @property
    def embedder(self) -> Embedder | None:
        """The embedder this memory was configured with (None: full text only)."""
        return self.identity.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder | None) -> None:
        self.identity.embedder = embedder

    @property
    def writer(self) -> Embedder | None:
        """What this memory's saves embed with: its embedder, else the store's, loaded for saves."""
        return self.identity.embedder or self.identity.loaded

    @property
    def vectors_off(self) -> str | None:
        """Why this store answers from full text although an embedder is configured."""
        return self.identity.vectors_off

    def _fresh(self) -> None:
        """The background embedder's state: made anew after a fork (its thread is not in the child)."""
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def after_fork(self) -> None:
        """In a forked child: the background embedder's thread is not here; it starts anew on the next prepare."""
        self._fresh()

    # -- the identity check (``core.identity``) ------------------------------------------------

    def prepare(self) -> None:
        """On opening the store (blocking): judge the embedder it recorded (``Identity.prepare``)."""
        self.identity.prepare()

    async def before_write(self, records: bool = True) -> None:
        """Before a write (of ``records``, or of ledger marks only): the identity recorded where it is
        not, a write with an embedder of another dimension than the store's refused; then, for a
        write of records, what a memory without an embedder writes with decided (module docstring)
        and its writer's dimension checked against the store's."""
        await self._runner.ready()
        identity = self.identity
        if identity.unrecorded:
            await self._runner.run("saving memories", identity.record)
        if identity.refused:
            raise ConfigurationError(identity.refused + ".")
        if not records:
            return
        if identity.needs_writer:
            await identity.settle(self._runner, self._pend, pends=self.pends, refill=False)
        writer = self.writer or identity.own()
        if writer is not None and identity.dim is not None:
            identity.check(writer, writer.dim)

    def written(self, vectors: np.ndarray | None) -> None:
        """On a worker, after a write: the store's dimension recorded where a write makes it known."""
        writer = self.writer or self.identity.own()
        if self.identity.dim is None and self.identity.recorded and (vectors is not None or writer is not None):
            self.identity.written(vectors.shape[1] if vectors is not None else writer.dim if writer else None)

    # -- embedding on the save and search paths ------------------------------------------

    async def embed(self, texts: Sequence[str], kind: Kind, embedder: Embedder | None = None) -> np.ndarray:
        import numpy as np

        model = embedder or self.embedder
        assert model is not None
        embed = functools.partial(model.embed, kind=kind)
        loop = asyncio.get_running_loop()
        with telemetry.span("longterm.embed", backend=self._runner.label.name, kind=kind, texts=len(texts)):
            parts = [
                await loop.run_in_executor(_EMBED_POOL, embed, list(texts[i : i + EMBED_BATCH]))
                for i in range(0, len(texts), EMBED_BATCH)
            ]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    async def passages(self, records: Sequence[MemoryRecord]) -> np.ndarray | None:
        """The records' vectors where the save path embeds (None: no embedder, embedding later, or
        a store without vectors); before any write, checked against the store's dimension."""
        writer = self.writer
        if writer is None or self.later or not records:
            return None
        await self._runner.ready()
        if self.vectors_off:
            return None
        try:
            vectors = await self.embed([r.text for r in records], "passage", writer)
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise BackendError(
                f"embedding {len(records)} memories with {writer.id!r} failed: {type(exc).__name__}: {exc}. "
                "Nothing was saved; the next save retries them."
            ) from exc
        self.identity.check(writer, vectors.shape[1])
        return vectors

    async def query(self, text: str) -> tuple[np.ndarray | None, str | None]:
        """The query's vector, or None and why: a failed embedding, or a vector of another dimension
        than the store's, degrades visibly, full text still answers."""
        lb = self._runner.label
        try:
            vector = (await self.embed([text], "query"))[0]
        except Exception as exc:
            degraded = f"query embedding failed ({type(exc).__name__}: {exc}); results are full text only"
            log.warning("%s %s: %s", lb.name, lb.where, degraded)
            return None, degraded
        if self.identity.dim is not None and vector.shape[-1] != self.identity.dim:
            assert self.embedder is not None
            degraded = self.identity.mismatch(self.embedder, vector.shape[-1]) + "; results are full text only"
            log.warning("%s %s: %s", lb.name, lb.where, degraded)
            return None, degraded
        return vector, None

    # -- embedding later ------------------------------------------------------------------

    def start(self) -> None:
        """Once the store is prepared (on its worker): the background embedder, when this memory embeds
        later, or has the store's embedder and the store lists records saved without vectors."""
        if self._thread is not None or self.embedder is None or self.vectors_off or not self.pends:
            return
        if not self.later and (self._filling or not self._unembedded(1)):
            return
        self._thread = threading.Thread(
            target=_embed_loop,
            args=(weakref.ref(self), self._wake),
            name=f"longterm-{self._runner.label.name}-embed",
            daemon=True,
        )
        # A dropped engine's embedder wakes and ends (at exit, daemon threads just stop).
        weakref.finalize(self, self._wake.set).atexit = False
        self._thread.start()
        self._wake.set()  # what an earlier run left unembedded, too

    def wake(self) -> None:
        """After a save that wrote text only: the background embedder has work."""
        if self.later:
            self._wake.set()

    def stop(self) -> None:
        """Closing: the background embedder stops at its next step."""
        self._stopping = True
        self._wake.set()

    def close(self) -> None:
        """Release the embedder's own connections, where it has any."""
        close = getattr(self.embedder, "close", None)
        if callable(close):
            close()

    def batch(self) -> int:
        """Embed one batch of the records saved without vectors; how many (0: none left)."""
        writer = self.writer
        assert writer is not None
        if self._runner.closed:
            raise self._runner.closed_error()
        if self.identity.refused:
            raise ConfigurationError(self.identity.refused + ".")
        with self._lock:
            batch = self._runner.run_blocking("reading memories to embed", self._unembedded, EMBED_BATCH)
            if batch:
                vectors = writer.embed([text for _, text in batch], kind="passage")
                self.identity.check(writer, vectors.shape[1])
                self._runner.run_blocking("saving vectors", self._write_vectors, [key for key, _ in batch], vectors)
                if self.identity.dim is None:
                    self._runner.run_blocking("saving vectors", self.written, vectors)
            return len(batch)

    def drain(self) -> float | None:
        """One wake of the background embedder: drain the list; seconds until a retry (None: none)."""
        try:
            while self.batch() and not self._stopping:
                pass
            return None
        except ReferenceError:  # the engine was dropped meanwhile: nothing left to embed for
            self._stopping = True
            return None
        except BaseException as exc:  # the list stays in the store: the next wake resumes it
            if not self._stopping:  # the text only: a record holding the error would hold its frames
                lb = self._runner.label
                log.warning("%s %s: embedding saved memories failed (%s); retrying", lb.name, lb.where, str(exc))
            return None if isinstance(exc, ConfigurationError) else LATER_RETRY

    @property
    def stopping(self) -> bool:
        return self._stopping

    async def backlog(self) -> int:
        """Embed now whatever the store lists as saved without vectors; how many (0 without the
        store's embedder, or on an engine that lists none)."""
        if self.writer is None or not self.pends or self.vectors_off:
            return 0
        await self._runner.ready()
        loop, done = asyncio.get_running_loop(), 0
        try:
            while n := await loop.run_in_executor(_EMBED_POOL, self.batch):
                done += n
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise BackendError(
                f"embedding saved memories with {self.writer and self.writer.id!r} failed after {done}: "
                f"{type(exc).__name__}: {exc}. They stay listed; the background embedder retries them."
            ) from exc
        return done

    async def refill(self, scope: Scope | None) -> int:
        """Every record of the index (of ``scope``) without a vector listed, then embedded now with
        this memory's embedder, else the store's built-in one; how many (``longterm reembed``). The
        store opened by it starts no background embedder: this call drains the list, and counts it."""
        self._filling = True
        try:
            await self._runner.ready()
        finally:
            self._filling = False
        lb = self._runner.label
        if not self.pends:
            raise ConfigurationError(
                f"the {lb.name} engine cannot list the memories saved without vectors, so they cannot be "
                "given theirs here; its saves never go without them (without the store's embedder they are "
                "refused). To make every vector again, `longterm migrate --embedder ...` into another index."
            )
        if self.identity.refused or self.vectors_off:
            raise ConfigurationError(f"{self.identity.refused}." if self.identity.refused else self.vectors_off)
        if self.writer is None:
            if not self.identity.recorded:
                return 0  # a store made without an embedder: its memories have no vectors to give
            await self.identity.settle(self._runner, self._pend, pends=self.pends, refill=True)
        await self.before_write()
        await self._runner.run("listing memories without vectors", self._listing, scope)
        return await self.backlog()


def _embed_loop(ref: weakref.ref[Embedding], wake: threading.Event) -> None:
    """The background thread of embedding later: woken by saves, drains the list, retries failures.

    It holds its ``Embedding`` weakly between wakes: a dropped engine's thread ends (its finalizer wakes it)."""
    retry: float | None = None
    while True:
        wake.wait(retry)
        wake.clear()
        embedding = ref()
        if embedding is None or embedding.stopping:
            return
        retry = embedding.drain()
        if embedding.stopping:  # closed, or its engine dropped, while it drained
            return
        del embedding
