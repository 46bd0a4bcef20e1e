"""A search as the engine core runs it: terms, the arms it can use, fusion, visible degradation.

The seam: an ``Engine`` holds one ``Searching`` over its runner, its embedding, its
``Hybrid`` settings and its read primitives (``Reads``, held weakly). ``search(scope, query,
top_k)``, for a query with terms (the engine found them; none: no hits): without an embedder, or on a store made
without vectors, it asks full text alone (``_fulltext``; the hits say why, when vectors were
asked for); otherwise it embeds the query and asks both arms: fused by the engine itself
(``_search``) where it declares ``native_hybrid``, else full text and vectors (``_nearest``)
fused here (``retrieval.hybrid``). Reads run through the engine's ``_read``, so an engine with
readers of its own (the local store) keeps searches off its writer. ``search_then(..., then)``
runs ``then(hits)`` in the same read, right after the hits are found: what a search reads next
(the neighbours of the hits that lend score, ``core.neighbours.search_lending``) costs no hop.
The read's deadline covers both, and ``then`` is not started once its caller stopped waiting
(a deadline passed, a cancel): a reader thread is not held for an answer no one takes.

Why degradation is visible: a failed query embedding or vector arm still answers from full
text, and every hit says so (``Hit.extra["degraded"]``), so a caller never mistakes a
degraded answer for the best one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeAlias, TypeVar

from ..records import Hit, MemoryRecord, Scope
from ..retrieval.hybrid import Hybrid
from .embedding import Embedding
from .runner import Hook, Runner
from .where import Where, deeper, given, takes_where

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

Scored: TypeAlias = "list[tuple[MemoryRecord, float]]"
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Query:
    """A search's text and its terms (``retrieval.text.query_terms``, unstemmed: letters and
    digits only, at most 256), computed once for every arm."""

    text: str
    terms: list[str]


class Read(Protocol):
    """``Engine._read``: a primitive that only reads, run where the engine runs reads."""

    async def __call__(self, what: str, fn: Callable[..., T], *args: object) -> T: ...


class Reads(NamedTuple):
    """The engine's read primitives (bound methods; see ``core.engine``)."""

    read: Read
    fulltext: Callable[..., Scored]
    nearest: Callable[..., Scored]
    native: Callable[..., list[Hit]]


def _nothing(_hits: list[Hit]) -> None:
    """``search``'s ``then``: nothing read after the hits."""


def _first(row: tuple[MemoryRecord, float]) -> MemoryRecord:
    return row[0]


def _record(hit: Hit) -> MemoryRecord:
    return hit.record


class Searching:
    """An engine's searches (see the module docstring)."""

    def __init__(
        self,
        runner: Runner,
        embedding: Embedding,
        hybrid: Hybrid,
        reads: Reads,
        *,
        native: bool,
        text_arm: str,
        filters_exact: bool = False,
    ) -> None:
        self.native = native
        self.filters_exact = filters_exact
        """The engine applies a whole filter itself (``core.capabilities``): no second look."""
        """``native_hybrid``: the engine fuses both arms in its ``_search``."""
        self.text_arm = text_arm
        self._runner, self._embedding, self._hybrid = runner, embedding, hybrid
        self._read, self._fulltext = Hook(reads.read), Hook(reads.fulltext)
        self._nearest, self._native = Hook(reads.nearest), Hook(reads.native)

    async def search(self, scope: Scope, q: Query, top_k: int, where: Where | None = None) -> list[Hit]:
        """The scope's records best matching ``q`` (terms found, at least one), best first, at most
        ``top_k``; with ``where``, of those that pass it (filtered before the cut: ``core.where``)."""
        hits, _ = await self.search_then(scope, q, top_k, _nothing, where)
        return hits

    def _deeper(
        self, fetch: Callable[[int], list[R]], k: int, where: Where | None, record: Callable[[R], MemoryRecord]
    ) -> list[R]:
        return deeper(fetch, k, where, record, exact=self._exact(where, self._fulltext))

    def _exact(self, where: Where | None, primitive: Callable[..., object]) -> bool:
        """What ``primitive`` returns for ``where`` needs no second look: it takes the filter, and
        applies all of it."""
        return where is None or (takes_where(primitive) and (self.filters_exact or where.exact))

    async def search_then(
        self, scope: Scope, q: Query, top_k: int, then: Callable[[list[Hit]], T], where: Where | None = None
    ) -> tuple[list[Hit], T | None]:
        """``search``, and ``then(hits)`` run right after it in the same read on the engine's
        thread: what a search reads next (its hits' neighbours) costs no second hop. One
        deadline for both, as for one operation; a failure of ``then`` fails the search. None
        for ``then``'s answer: it was not run, because the caller stopped waiting first."""
        embedding = self._embedding
        if embedding.embedder is not None:
            await self._runner.ready()
        gone = threading.Event()  # set on the loop when the caller stopped waiting

        def after(hits: list[Hit]) -> T | None:
            return None if gone.is_set() else then(hits)

        if embedding.embedder is None or embedding.vectors_off:
            extra = {"degraded": embedding.vectors_off} if embedding.vectors_off else {}

            def found() -> tuple[list[Hit], T | None]:
                rows = self._deeper(
                    lambda n: self._fulltext(scope, q, n, **given(where, self._fulltext)), top_k, where, _first
                )
                hits = [Hit(record=rec, score=s, arms={self.text_arm: s}, extra=extra) for rec, s in rows[:top_k]]
                return hits, after(hits)

        else:
            vector, degraded = await embedding.query(q.text)

            def found() -> tuple[list[Hit], T | None]:
                if self.native:
                    native = self._native

                    def fetch(n: int) -> list[Hit]:
                        return native(scope, q, vector, n, degraded, **given(where, native))

                    hits = deeper(fetch, top_k, where, _record, exact=self._exact(where, native))
                else:
                    hits = self.both_arms(scope, q, vector, top_k, degraded, where)
                return hits, after(hits)

        try:
            return await self._read("searching", found)
        except BaseException:  # a deadline passed, a cancel, an error: nothing more to read
            gone.set()
            raise

    def both_arms(
        self,
        scope: Scope,
        query: Query,
        vector: np.ndarray | None,
        k: int,
        why: str | None,
        where: Where | None = None,
    ) -> list[Hit]:
        """On a worker: full text and vectors, fused here (also for a native engine that fuses only
        some ways, as Qdrant does RRF only); with ``where``, each arm's best that pass it."""
        depth = self._hybrid.depth(k)
        text = self._deeper(
            lambda n: self._fulltext(scope, query, n, **given(where, self._fulltext)), depth, where, _first
        )
        near: Scored = []
        if vector is not None:
            try:
                near = deeper(
                    lambda n: self._nearest(scope, vector, n, **given(where, self._nearest)),
                    depth,
                    where,
                    _first,
                    exact=self._exact(where, self._nearest),
                )
            except Exception as exc:  # degrade visibly: full text still answers
                err, _ = self._runner.translate(exc, "searching by vector")
                why = f"vector search failed ({err}); results are full text only"
                log.warning("%s %s: %s", self._runner.label.name, self._runner.label.where, why)
        by_id = {rec.id: rec for rec, _ in (*text, *near)}
        fused = self._hybrid.fuse({"fulltext": [(r.id, s) for r, s in text], "vector": [(r.id, s) for r, s in near]})
        extra = {"degraded": why} if why else {}
        return [Hit(record=by_id[i], score=s, arms=a, extra=extra) for i, s, a in fused[:k]]
