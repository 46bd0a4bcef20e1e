"""An engine's embedder as the core uses it: batched off the loop, later in the background, checked.

The seam: an ``Engine`` holds one ``Embedding`` (over its ``Runner``). ``passages(records)``
embeds a save's texts where the save path does, ``query(text)`` a search's (degrading to
full text, visibly, when that fails); ``prepare(have)`` and ``before_write()`` are the
embedder identity check; ``start()``, ``wake()``, ``backlog()`` and ``stop()`` run embedding
later.

- **embeddings** run off the loop, in batches of ``EMBED_BATCH``, on a pool apart from the
  engines' threads: a model busy with a long save must not hold up an engine's searches;
- **embedding later** (``embed_later=True``, for an engine declaring ``embeds_later``, with
  ``_unembedded`` and ``_write_vectors``): a save writes text only and returns, searchable at
  once by full text; a background thread then embeds what the store lists as unembedded, in
  batches, each batch's vectors written and taken off the list in one step (exactly once,
  and a restart resumes the list). Search uses the vectors that exist;
- **the embedder identity check**: a store remembers which embedder wrote its vectors
  (``EMBEDDER_KEY`` in its meta) and refuses another, the same on every engine. Opened
  without an embedder, any store answers from full text; a store made without vectors and
  opened with an embedder answers from full text too, saying so in every hit
  (``vectors_off``; ``longterm migrate`` into a new index adds the vectors);
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
from ..records import MemoryRecord
from ..retrieval.embedders import Embedder, Kind
from .fork import keep
from .runner import Hook, Runner

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

#: Texts embedded per call: bounds memory and lets a long save interleave with searches.
EMBED_BATCH = 64
#: Seconds before the background embedder retries after a failure (a save wakes it sooner).
LATER_RETRY = 30.0
#: Meta key under which a store remembers the embedder that wrote its vectors.
EMBEDDER_KEY = "embedder"


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


class Embedding:
    """An engine's embedder, its identity check and its background embedding (module docstring)."""

    def __init__(self, embedder: Embedder | None, runner: Runner, store: Store, *, later: bool) -> None:
        self.embedder = embedder
        self.later = later
        """Save text only and embed in the background (otherwise on the save path)."""
        self.vectors_off: str | None = None
        """Why this store answers from full text although an embedder is configured."""
        self.unrecorded = False
        """The store has no embedder identity yet (``prepare``): the first write records it."""
        self._runner = runner
        self._unembedded, self._write_vectors = Hook(store.unembedded), Hook(store.write_vectors)
        self._meta_get, self._meta_set = Hook(store.meta_get), Hook(store.meta_set)
        self._stopping = False
        self._fresh()

    def _fresh(self) -> None:
        """The background embedder's state: made anew after a fork (its thread is not in the child)."""
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def after_fork(self) -> None:
        """In a forked child: the background embedder's thread is not here; it starts anew on the next prepare."""
        self._fresh()

    # -- the identity check ---------------------------------------------------------------

    def prepare(self) -> None:
        """On opening the store (blocking): judge the embedder it recorded. A store (or index)
        nothing was written to is recorded with the first write, so opening it, to read, never
        writes (nor waits for a writer)."""
        have = self._meta_get(EMBEDDER_KEY)
        if have is None:
            self.unrecorded = True
        else:
            self._accept(have)

    def _accept(self, have: str) -> None:
        """This memory's embedder against ``have``, the one the store recorded: a store made
        without one answers from full text (``vectors_off``), another one is refused."""
        want, lb = (self.embedder.id if self.embedder is not None else ""), self._runner.label
        if want and not have:
            self.vectors_off = (
                f"this store was made without an embedder, so it holds no vectors for {want!r}; results are "
                "full text only. `longterm migrate` into a new index adds the vectors"
            )
            log.warning("%s %s: %s", lb.name, lb.where, self.vectors_off)
        elif want and have != want:
            raise ConfigurationError(
                f"the {lb.name} store at {lb.where} was written with {have or 'no embedder'!r}, but this "
                f"memory is configured with {want or 'no embedder'!r}. Vectors of different embedders never "
                "mix: configure the embedder the store was made with, or use another index (or erase it)."
            )

    def _record(self) -> None:
        """Before the first write of a store opened without an embedder identity: record ours; if
        another process recorded one meanwhile, judge ours against it as ``prepare`` does."""
        have = self._meta_get(EMBEDDER_KEY)
        if have is None:
            self._meta_set(EMBEDDER_KEY, self.embedder.id if self.embedder is not None else "")
        else:
            self._accept(have)
        self.unrecorded = False

    async def before_write(self) -> None:
        await self._runner.ready()
        if self.unrecorded:
            await self._runner.run("saving memories", self._record)

    # -- embedding on the save and search paths ------------------------------------------

    async def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        import numpy as np

        assert self.embedder is not None
        embed = functools.partial(self.embedder.embed, kind=kind)
        loop = asyncio.get_running_loop()
        with telemetry.span("longterm.embed", backend=self._runner.label.name, kind=kind, texts=len(texts)):
            parts = [
                await loop.run_in_executor(_EMBED_POOL, embed, list(texts[i : i + EMBED_BATCH]))
                for i in range(0, len(texts), EMBED_BATCH)
            ]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    async def passages(self, records: Sequence[MemoryRecord]) -> np.ndarray | None:
        """The records' vectors where the save path embeds (None: no embedder, embedding later, or
        a store without vectors); before any write."""
        if self.embedder is None or self.later or not records:
            return None
        await self._runner.ready()
        if self.vectors_off:
            return None
        try:
            return await self.embed([r.text for r in records], "passage")
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise BackendError(
                f"embedding {len(records)} memories with {self.embedder.id!r} failed: {type(exc).__name__}: {exc}. "
                "Nothing was saved; the next save retries them."
            ) from exc

    async def query(self, text: str) -> tuple[np.ndarray | None, str | None]:
        """The query's vector, or None and why: a failed embedding degrades visibly, full text still answers."""
        try:
            return (await self.embed([text], "query"))[0], None
        except Exception as exc:
            degraded = f"query embedding failed ({type(exc).__name__}: {exc}); results are full text only"
            log.warning("%s %s: %s", self._runner.label.name, self._runner.label.where, degraded)
            return None, degraded

    # -- embedding later ------------------------------------------------------------------

    def start(self) -> None:
        """Once the store is prepared: the background embedder, when this memory embeds later."""
        if self.later and not self.vectors_off and self._thread is None:
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
        assert self.embedder is not None
        if self._runner.closed:
            raise self._runner.closed_error()
        with self._lock:
            batch = self._runner.run_blocking("reading memories to embed", self._unembedded, EMBED_BATCH)
            if batch:
                vectors = self.embedder.embed([text for _, text in batch], kind="passage")
                self._runner.run_blocking("saving vectors", self._write_vectors, [key for key, _ in batch], vectors)
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
            return LATER_RETRY

    @property
    def stopping(self) -> bool:
        return self._stopping

    async def backlog(self) -> int:
        """Embed now whatever is saved without vectors; how many (0 unless embedding later)."""
        if not self.later:
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
                f"embedding saved memories with {self.embedder and self.embedder.id!r} failed after {done}: "
                f"{type(exc).__name__}: {exc}. They stay listed; the background embedder retries them."
            ) from exc
        return done


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
