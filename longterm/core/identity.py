"""The embedder a store records, and the embedder a memory writes it with: the identity check.

The seam: an ``Embedding`` (``core.embedding``) holds one ``Identity``. ``prepare()`` reads what
the store recorded, on opening it: the embedder's id (``EMBEDDER_KEY``) and its dimension
(``DIM_KEY``) in the store's meta, and judges this memory's embedder against them;
``record()`` writes the id before the first write of a store that recorded none; ``check`` refuses
vectors of another dimension before any write; ``written`` records the dimension after the first
write that makes it known. What it decides, others read: ``vectors_off`` (searches answer from
full text, saying why), ``refused`` (writes with this memory's embedder fail, saying why) and
``needs_writer`` (this memory has no embedder but the store has one: ``core.embedding`` loads the
store's built-in one for the save, or lists the save's records as pending, or refuses it).

The rules, the same on every engine:

- a store remembers the embedder that wrote its vectors, by id and dimension, and refuses another
  (``ConfigurationError`` naming both): another id on opening; another dimension under the same id
  (a model changed, its id kept) before any write, and a search with it answers from full text;
- a store made without an embedder, opened with one, answers from full text (``vectors_off``);
- a store that recorded only its embedder's id (made before dimensions were recorded) records the
  dimension at its next write with vectors (the local engine learns it on opening, from the
  vectors it holds: ``backends.local.upgrade``);
- opening a store, to read, never writes: what is recorded is written with the first write.

Why apart from the embedding machinery: which embedder a memory may write with is a rule about
the store, decided once on opening and once before the first write; batches and background
threads are another job.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..errors import BackendError, ConfigurationError
from ..retrieval.embedders import Embedder, builtin_embedder
from .runner import Hook, Label, Runner

log = logging.getLogger(__name__)

#: Meta key under which a store remembers the embedder that wrote its vectors ("": none).
EMBEDDER_KEY = "embedder"
#: Meta key under which a store remembers the dimension of its vectors.
DIM_KEY = "embedder_dim"


class Identity:
    """The store's recorded embedder and this memory's against it (see the module docstring)."""

    def __init__(
        self,
        embedder: Embedder | None,
        label: Label,
        meta_get: Callable[[str], str | None],
        meta_set: Callable[[str, str], None],
        own: Callable[[], Embedder | None] | None = None,
    ) -> None:
        self.embedder = embedder
        """The embedder this memory was configured with (None: full text only)."""
        self.label = label
        self.recorded: str | None = None
        """The id the store recorded ("": made without an embedder; None: nothing recorded yet)."""
        self.dim: int | None = None
        """The dimension of the store's vectors, where recorded (or learned)."""
        self.unrecorded = False
        """The store has no embedder identity yet: the first write records it (``record``)."""
        self.vectors_off: str | None = None
        """Why this store answers from full text although an embedder is configured."""
        self.refused: str | None = None
        """Why a write with this memory's embedder is refused (vectors of another dimension)."""
        self.loaded: Embedder | None = None
        """The store's built-in embedder, loaded for this memory's saves (``settle``)."""
        self.pending_for: str | None = None
        """The store's embedder this memory's saves leave their vectors to, listed as pending (``settle``)."""
        self._settled = False
        self._get, self._set = Hook(meta_get), Hook(meta_set)
        self._own = Hook(own) if own is not None else None

    def own(self) -> Embedder | None:
        """The embedder of an engine that embeds by itself (``embeds_itself``), once it is open."""
        return self._own() if self._own is not None else None

    # -- on opening, and before the first write (blocking, on a worker) ----------------------

    def prepare(self) -> None:
        """On opening the store: judge this memory's embedder against what the store recorded. A
        store (or index) nothing was written to is recorded with the first write, so opening it,
        to read, never writes (nor waits for a writer)."""
        have = self._get(EMBEDDER_KEY)
        if have is None:
            self.unrecorded = True
        else:
            self._accept(have)

    def _accept(self, have: str) -> None:
        """This memory's embedder against ``have``, the id the store recorded, and its dimension."""
        self.recorded = have
        dim = self._get(DIM_KEY)
        self.dim = int(dim) if dim and dim.isdigit() else self.dim
        want, lb = (self.embedder.id if self.embedder is not None else ""), self.label
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
        writer = self.embedder or self.own()
        if writer is not None and self.dim is not None:
            try:
                width: int | None = writer.dim
            except Exception:  # a service asked for its dimension is down: the first vector says
                width = None
            if width is not None and width != self.dim:
                self.refused = self.mismatch(writer, width)
                if self.embedder is not None:
                    self.vectors_off = self.refused + "; results are full text only"
                log.warning("%s %s: %s", lb.name, lb.where, self.refused)

    def record(self) -> None:
        """Before the first write of a store opened without an embedder identity: record ours; if
        another process recorded one meanwhile, judge ours against it as ``prepare`` does."""
        have = self._get(EMBEDDER_KEY)
        if have is None:
            self.recorded = self.embedder.id if self.embedder is not None else ""
            self._set(EMBEDDER_KEY, self.recorded)
        else:
            self._accept(have)
        self.unrecorded = False

    # -- the dimension -----------------------------------------------------------------------

    def mismatch(self, writer: Embedder, width: int) -> str:
        """What a write of ``width``-dimensional vectors by ``writer`` into this store is told."""
        lb = self.label
        return (
            f"the {lb.name} store at {lb.where} holds {self.dim}-dimensional vectors of embedder "
            f"{self.recorded or writer.id!r}, but this memory's {writer.id!r} makes {width}-dimensional ones. "
            "Vectors of different dimensions never mix: configure the embedder the store was made with "
            f"({self.dim} dimensions), give a changed model an id of its own, or use another index (or erase it)"
        )

    def check(self, writer: Embedder, width: int) -> None:
        """Refuse ``writer``'s vectors of ``width`` dimensions where the store holds another."""
        if self.dim is not None and width != self.dim:
            raise ConfigurationError(self.mismatch(writer, width) + ".")

    def written(self, width: int | None) -> None:
        """On a worker, after a write: the store's dimension recorded where it is not yet and the
        write made it known (``width``: its vectors', or its writer's; None: unknown)."""
        if width is not None and self.dim is None and self.recorded:
            self._set(DIM_KEY, str(width))
            self.dim = width

    # -- a memory without an embedder on a store with one -----------------------------------

    @property
    def needs_writer(self) -> bool:
        """This memory has no embedder, but the store recorded one (and the engine does not embed by
        itself), and its first write of records has not yet decided what its saves do (``settle``)."""
        return self.embedder is None and self._own is None and bool(self.recorded) and not self._settled

    async def settle(self, runner: Runner, pend: Callable[[], None], *, pends: bool, refill: bool) -> None:
        """What a memory without an embedder writes with, on a store that recorded one: the store's
        built-in embedder, loaded now (off the loop), else (``pends``: the engine declares
        ``embeds_later``, and this is a save, not a ``refill``) no vectors, its records listed as
        pending (``pend``, on the engine's worker), else nothing: the write is refused."""
        have, lb = self.recorded or "", self.label
        try:
            self.loaded = await asyncio.get_running_loop().run_in_executor(None, builtin_embedder, have)
        except Exception as exc:  # installed, but it would not load: the save fails, saying so
            raise BackendError(
                f"loading the store's embedder {have!r} for a save failed: {type(exc).__name__}: {exc}. Nothing was "
                "saved; open the memory with an embedder (embedder=...), or repair the model's installation."
            ) from exc
        if self.loaded is not None:
            log.info("%s %s: saving with the store's embedder %r, loaded for saves", lb.name, lb.where, have)
        elif pends and not refill:
            await runner.run("saving memories", pend)
            self.pending_for = have
            log.warning(
                "%s %s: saving without vectors: this memory has no embedder and the store's, %r, is not built in "
                "(or not installed); the memories wait for their vectors until the store is opened with it "
                "(`longterm reembed`)",
                lb.name,
                lb.where,
                have,
            )
        elif refill:
            raise ConfigurationError(
                f"the {lb.name} store at {lb.where} holds vectors of embedder {have!r}, which is not a built-in one "
                "that is installed: name it (--embedder, or the memory's embedder=...) to give memories their vectors."
            )
        else:
            raise ConfigurationError(
                f"the {lb.name} store at {lb.where} holds vectors of embedder {have!r}, and this memory has none (nor "
                f"is {have!r} a built-in one that is installed), so it would save without them. Open the memory with "
                f"{have!r} (embedder=..., or --embedder): a store's memories never go without its vectors."
            )
        self._settled = True
