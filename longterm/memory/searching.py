"""The search pipeline: check, decide how many to fetch, ask the engine, score, filter, cut.

The seam: a ``Searcher`` over one memory's parts with ``hits(scope, query, k, kind=, min_score=,
rescoring=)`` (the scope's best hits, scored by the core on one scale: ``score`` in [0, 1],
``retrieval.calibration``; the engine's own in ``extra["raw_score"]``) and ``response(hits)``
(ADK's ``SearchMemoryResponse`` of them). ``fetch_size`` is the one place that decides how many
hits to ask the engine for.

Why fetch more than ``k``: re-scoring reorders a wider pool (``Rescoring.candidates`` per hit
wanted), and with facts on one search fills both kinds (and drops superseded facts), so it
asks ``FACT_OVERFETCH`` times as many.

Why a query is cut (``MAX_QUERY_CHARS``, at a word's end) on the loop: the engine looks up only
a query's first 256 distinct terms, which any real question reaches long before the cut;
measured, terms of 16 K characters take ~8 ms, of a 1.7 MB paste ~1 s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractContextManager
from datetime import datetime

from .. import telemetry
from ..core.engine import Engine
from ..core.errors import guard
from ..core.neighbours import Lending
from ..entries import MemoryEntry, SearchMemoryResponse, make_content
from ..errors import InvalidInputError
from ..facts import SearchKind, is_fact, split_hits
from ..records import Hit, MemoryRecord, Scope
from ..retrieval import context as neighbourhood
from ..retrieval.calibration import calibrate
from ..retrieval.rescoring import Rescoring
from ..retrieval.when import window
from . import inputs
from .wiring import Wiring

#: With facts on, a search fetches this many times ``top_k`` to fill both kinds.
FACT_OVERFETCH = 3
#: A query is cut to this many characters (at a word's end) before the engine takes its terms.
MAX_QUERY_CHARS = 16_384
#: ``custom_metadata`` keys a search result sets itself: a memory's own metadata never shows
#: under these names (a saved ``"backend"`` or ``"score"`` would pass for the library's).
RESERVED_METADATA = frozenset(
    {"session_id", "event_id", "score", "raw_score", "backend", "role", "event_types", "arms", "degraded"}
    | {"relevance", "recency", "backend_score"}  # rescoring's parts (``importance`` is the user's input)
    | {"context", "folded", "lent", "when"}  # what re-ranking added (``retrieval.context``)
)
#: The arms' weights of a store whose hybrid names none.
DEFAULT_WEIGHTS = {"fulltext": 0.7, "vector": 0.3}


def _lenders(hits: list[Hit]) -> list[MemoryRecord]:
    """The hits whose neighbours lend them score (``retrieval.context``): the first evidence
    hits, facts left out. Run by the engine right after its search (``search_lending``)."""
    return [h.record for h in hits if not is_fact(h.record)][: neighbourhood.LENDERS]


def _no_lenders(hits: list[Hit]) -> list[MemoryRecord]:
    """A search of facts alone: no hit lends (facts have no session neighbours)."""
    return []


def _ids(records: Iterable[MemoryRecord]) -> list[str]:
    return [r.id for r in records]


def lending(backend: object) -> Lending | None:
    """The backend's one-read search (``search_lending``: its hits and the lenders' neighbours)
    where it answers as its ``search`` and ``neighbours`` would; None: ask those apart.

    An ``Engine`` subclass that overrides ``search`` or ``neighbours`` (and not
    ``search_lending``) is asked them apart: the core's one-read form stands on the core's own
    two and would bypass the override."""
    read: Lending | None = getattr(backend, "search_lending", None)
    if read is None or not isinstance(backend, Engine):
        return read  # a backend's own, or none
    cls = type(backend)
    if cls.search_lending is Engine.search_lending and (
        cls.search is not Engine.search or cls.neighbours is not Engine.neighbours
    ):
        return None
    return read


def query_prefix(query: str) -> str:
    """``query`` cut to ``MAX_QUERY_CHARS`` at the end of a word (see the module docstring)."""
    if len(query) <= MAX_QUERY_CHARS:
        return query
    cut = query[:MAX_QUERY_CHARS]
    if query[MAX_QUERY_CHARS].isspace():
        return cut
    head = cut.rsplit(None, 1)  # drop the word the cut went through
    return head[0] if len(head) == 2 else cut


def fetch_size(k: int, rescoring: Rescoring, facts_on: bool) -> int:
    """How many hits to ask the engine for, to return ``k`` (see the module docstring)."""
    fetch = min(inputs.MAX_TOP_K, k * rescoring.candidates) if rescoring.enabled else k
    if facts_on:  # room for both kinds (and superseded facts, dropped)
        fetch = min(inputs.MAX_TOP_K, fetch * FACT_OVERFETCH)
    return fetch


def entry(hit: Hit, backend: str) -> MemoryEntry:
    """ADK's ``MemoryEntry`` of ``hit``: its content, and the library's metadata over the memory's own."""
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
        **({"context": [turn(c) for c in hit.context]} if hit.context else {}),
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


def turn(record: MemoryRecord) -> dict[str, object]:
    """One neighbouring turn as ``custom_metadata["context"]`` lists it."""
    return {
        "id": record.id,
        "event_id": record.event_id,
        "author": record.author,
        "role": record.role,
        "text": record.text,
        "timestamp": record.iso_timestamp(),
    }


class Searcher:
    """Every search of a memory (see the module docstring), over one memory's parts."""

    def __init__(self, parts: Wiring, index: str, locate: Callable[[Scope], Awaitable[Searcher]] | None = None) -> None:
        self.parts = parts
        self.backend_name, self.index = parts.name, index  # what telemetry labels a search with
        self.locate = locate
        """The searcher of the index a scope lives in (``memory.routing``); None: this one."""

    def _guard(self, what: str) -> AbstractContextManager[None]:
        return guard(what, f"backend {self.backend_name!r}")

    @telemetry.searching
    async def hits(
        self,
        scope: Scope,
        query: str,
        k: int,
        *,
        kind: SearchKind,
        min_score: float | None,
        rescoring: Rescoring,
        context: int = 0,
        now: datetime | float | str | None = None,
    ) -> list[Hit]:
        """``_hits`` on the index ``scope`` lives in, in one span."""
        target = self if self.locate is None else await self.locate(scope)
        return await target._hits(
            scope, query, k, kind=kind, min_score=min_score, rescoring=rescoring, context=context, now=now
        )

    async def _hits(
        self,
        scope: Scope,
        query: str,
        k: int,
        *,
        kind: SearchKind,
        min_score: float | None,
        rescoring: Rescoring,
        context: int = 0,
        now: datetime | float | str | None = None,
    ) -> list[Hit]:
        """The scope's best ``k`` hits for ``query`` of ``kind``, those under ``min_score`` left out;
        a hit's session neighbours lend it score (``retrieval.context``), hits inside a time the
        question names (relative to ``now``) gain; with ``context``, each carries its ``context``
        turns before and after, and near-identical hits fold into one."""
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, got {type(query).__name__}.")
        query = query_prefix(query)
        inputs.bounded_int("top_k", k)
        inputs.kind(kind)
        inputs.min_score(min_score)
        context = inputs.context(context)
        when = window(query, inputs.now(now))
        fetch = fetch_size(k, rescoring, self.parts.facts is not None)
        pick = _no_lenders if kind == "facts" else _lenders
        one_read = lending(self.parts.backend)  # the hits and the lenders' neighbours in one hop
        with self._guard("searching memories"):
            if one_read is not None:
                found, lent = await one_read(scope, query, fetch, pick, 1)
            else:
                found, lent = await self.parts.backend.search(scope, query, fetch), None
        hits = calibrate(query, found, self._fusion_weights())
        # Context and time are relevance: they act on the calibrated scores, before re-scoring
        # mixes in recency and importance, and before the kinds are split.
        evidence = [h for h in hits if not is_fact(h.record)] if kind != "facts" else []
        lenders = evidence[: neighbourhood.LENDERS]
        # Calibration keeps the order, so the engine read around these very hits; checked all
        # the same (a backend without ``search_lending``, or one whose order changed, reads them now).
        around = lent if lent is not None and _ids(pick(found)) == _ids(h.record for h in lenders) else None
        if around is None:
            around = await self._neighbours(scope, [h.record for h in lenders], 1)
        relevant = neighbourhood.shares_a_term(query)
        hits = neighbourhood.rerank(hits, lenders if around else [], around or [], when, relevant=relevant)
        hits = split_hits(rescoring.rescore(hits), kind)
        if min_score is not None:
            hits = [h for h in hits if h.score >= min_score]
        if not context:
            return hits[:k]
        hits = neighbourhood.fold(hits)[:k]
        around = await self._neighbours(scope, [h.record for h in hits], context)
        if around is None:
            return hits
        return [
            h.model_copy(update={"context": [*before, *after]}) for h, (before, after) in zip(hits, around, strict=True)
        ]

    async def _neighbours(self, scope: Scope, anchors: list[MemoryRecord], n: int) -> list[neighbourhood.Around] | None:
        """Each anchor's ``n`` turns before and after it, read from the store now (None: the
        backend cannot say; a backend that is no ``Engine`` may lack ``neighbours``)."""
        read = getattr(self.parts.backend, "neighbours", None)
        if read is None or not anchors:
            return None if read is None else []
        with self._guard("reading a hit's neighbours"):
            around: list[neighbourhood.Around] = await read(scope, anchors, n, n)
        return around

    def response(self, hits: list[Hit]) -> SearchMemoryResponse:
        """ADK's answer of a search: each hit a ``MemoryEntry``, best first."""
        backend = self.backend_name
        return SearchMemoryResponse(memories=[entry(h, backend) for h in hits])

    def _fusion_weights(self) -> dict[str, float] | None:
        """The store's arm weights when its searches use vectors now, else None (words only)."""
        engine = self.parts.backend
        if getattr(engine, "embedder", None) is None or getattr(engine, "vectors_off", None):
            return None
        hybrid = getattr(engine, "hybrid", None)
        return dict(getattr(hybrid, "weights", DEFAULT_WEIGHTS))
