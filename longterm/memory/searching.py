"""The search pipeline: check, decide how many to fetch, ask the engine, score, filter, cut.

The seam: a ``Searcher`` over one memory's parts with ``hits(scope, query, k, kind=, min_score=,
rescoring=)`` (the scope's best hits, scored by the core on one scale: ``score`` in [0, 1],
``retrieval.calibration``; the engine's own in ``extra["raw_score"]``) and ``response(hits)``
(ADK's ``SearchMemoryResponse`` of them). ``fetch_size`` is the one place that decides how many
hits to ask the engine for.

Why fetch more than ``k``: the steps after the engine's (neighbours lending score, the time a
question names, re-scoring) can only promote what was fetched, so a search asks for at least
``POOL`` hits (LoCoMo dev hit@5 0.592 with the engine's first 5, 0.659 with 20, the Chinese
sets the same or better, a paired bootstrap's interval above zero: ``bench/pool.py``, docs
"Recall, round four"); re-scoring reorders a wider pool still (``Rescoring.candidates`` per
hit wanted), and with facts on one search fills both kinds (and drops superseded facts), so
it asks ``FACT_OVERFETCH`` times as many.

Why a query is cut (``MAX_QUERY_CHARS``, at a word's end) on the loop: the engine looks up only
a query's first 256 distinct terms, which any real question reaches long before the cut;
measured, terms of 16 K characters take ~8 ms, of a 1.7 MB paste ~1 s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import datetime

from .. import telemetry
from ..core.engine import Engine
from ..core.errors import guard
from ..core.neighbours import Lending
from ..core.where import Where, takes_where
from ..entries import MemoryEntry, SearchMemoryResponse, make_content
from ..errors import ConfigurationError, InvalidInputError
from ..facts import SearchKind, is_fact, split_hits
from ..records import Hit, MemoryRecord, Scope
from ..retrieval import context as neighbourhood
from ..retrieval.calibration import calibrate
from ..retrieval.rerank import Reranker, head_size, reranked
from ..retrieval.rescoring import Rescoring
from ..retrieval.when import TimeWindow, window
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


def _picker(kind: SearchKind) -> Callable[[list[Hit]], list[MemoryRecord]]:
    return _no_lenders if kind == "facts" else _lenders


def _alive(around: list[neighbourhood.Around] | None, where: Where | None) -> list[neighbourhood.Around] | None:
    """``around`` without the turns that expired by the moment of the search (``where.alive_at``):
    a hit's context, as the hits themselves, never shows what expired."""
    at = None if where is None else where.alive_at
    if around is None or at is None:
        return around

    def kept(turns: list[MemoryRecord]) -> list[MemoryRecord]:
        return [r for r in turns if r.expires_at is None or r.expires_at > at]

    return [(kept(before), kept(after)) for before, after in around]


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
    fetch = max(fetch, POOL)
    if facts_on:  # room for both kinds (and superseded facts, dropped)
        fetch = min(inputs.MAX_TOP_K, fetch * FACT_OVERFETCH)
    return fetch


#: The fewest hits a search ranks after the engine's cut (module docstring).
POOL = 20


@dataclass(frozen=True)
class Ask:
    """One search's question and what it asked for (``Searcher.hits``' arguments)."""

    query: str
    k: int
    kind: SearchKind
    min_score: float | None
    rescoring: Rescoring
    context: int
    reranker: Reranker | None
    rerank_top_n: int
    where: Where | None = None


def checked(ask: Ask) -> Ask:
    """``ask`` with its arguments checked (``memory.inputs``) and its query cut (``query_prefix``)."""
    if not isinstance(ask.query, str):
        raise InvalidInputError(f"query must be a string, got {type(ask.query).__name__}.")
    inputs.bounded_int("top_k", ask.k)
    inputs.kind(ask.kind)
    inputs.min_score(ask.min_score)
    return replace(ask, query=query_prefix(ask.query), context=inputs.context(ask.context))


def kept(hits: list[Hit], ask: Ask) -> list[Hit]:
    """Re-scored (recency, importance: ``Rescoring``), split by kind, those under ``min_score`` left out."""
    hits = split_hits(ask.rescoring.rescore(hits), ask.kind)
    if ask.min_score is not None:
        hits = [h for h in hits if h.score >= ask.min_score]
    return hits


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
    async def hits(self, scope: Scope, ask: Ask, now: datetime | float | str | None = None) -> list[Hit]:
        """``_hits`` on the index ``scope`` lives in, in one span; ``ask.where``: of the memories
        that pass it, filtered by the engine before its cut (``core.where``)."""
        target = self if self.locate is None else await self.locate(scope)
        return await target._hits(scope, ask, now)

    async def _hits(self, scope: Scope, ask: Ask, now: datetime | float | str | None) -> list[Hit]:
        """The scope's best ``k`` hits for the question, in docs/architecture.md's steps: the ones
        under ``min_score`` left out; the first reranked (``retrieval.rerank``); a hit's session
        neighbours lend it score (``retrieval.context``), hits inside a time the question names
        (relative to ``now``) gain; with ``context``, each carries its ``context`` turns before
        and after, and near-identical hits fold into one."""
        ask = checked(ask)  # 2: the arguments checked, the query cut
        when = window(ask.query, inputs.now(now))  # 2: the time the question names
        found, lent = await self._found(scope, ask)  # 3-4: the engine's hits, fused, with the lenders' turns
        hits = calibrate(ask.query, found, self._fusion_weights())  # 5: one scale on every engine
        hits, order = await reranked(ask.reranker, ask.query, hits, head_size(ask.rerank_top_n, ask.k))  # 6
        hits = await self._in_context(scope, ask, found, lent, hits, when, order)  # 7: neighbours lend, time gains
        if ask.where is not None:  # a neighbour that joined the hits passes the filter as they did
            hits = [h for h in hits if ask.where.admits(h.record)]
        return await self._cut(scope, ask, kept(hits, ask))  # 8: re-scored, split, thresholded, cut, folded

    async def _found(self, scope: Scope, ask: Ask) -> tuple[list[Hit], list[neighbourhood.Around] | None]:
        """The engine's hits (``fetch_size`` of them) and, where it reads them in the same call
        (``search_lending``), the neighbours of the hits that lend score."""
        fetch = fetch_size(ask.k, ask.rescoring, self.parts.facts is not None)
        if ask.reranker is not None:
            fetch = min(inputs.MAX_TOP_K, max(fetch, head_size(ask.rerank_top_n, ask.k)))
        one_read = lending(self.parts.backend)  # the hits and the lenders' neighbours in one hop
        with self._guard("searching memories"):
            search = self.parts.backend.search
            if ask.where is not None and takes_where(one_read if one_read is not None else search):
                filtered = {"where": ask.where}
                if one_read is not None:
                    return await one_read(scope, ask.query, fetch, _picker(ask.kind), 1, **filtered)
                return await search(scope, ask.query, fetch, **filtered), None
            if ask.where is not None and ask.where.filter is not None:
                raise ConfigurationError(
                    f"backend {self.backend_name!r} takes no filters (its search has no where=), so it cannot "
                    "filter before its top-k cut; search without filters=, or use a built-in backend."
                )
            # no filter, or only the moment of the read: what expired is left out of the hits below
            if one_read is not None:
                return await one_read(scope, ask.query, fetch, _picker(ask.kind), 1)
            return await self.parts.backend.search(scope, ask.query, fetch), None

    async def _in_context(
        self,
        scope: Scope,
        ask: Ask,
        found: list[Hit],
        lent: list[neighbourhood.Around] | None,
        hits: list[Hit],
        when: TimeWindow | None,
        order: dict[str, float] | None,
    ) -> list[Hit]:
        """Context and time are relevance: they act on the calibrated scores (in the reranker's
        order, when one ordered them), before re-scoring mixes in recency and importance, and
        before the kinds are split."""
        evidence = [h for h in hits if not is_fact(h.record)] if ask.kind != "facts" else []
        lenders = evidence[: neighbourhood.LENDERS]
        # Calibration keeps the order, so the engine read around these very hits; checked all
        # the same (a backend without ``search_lending``, or an order a reranker changed, reads them now).
        pick = _picker(ask.kind)
        around = lent if lent is not None and _ids(pick(found)) == _ids(h.record for h in lenders) else None
        if around is None:
            around = await self._neighbours(scope, [h.record for h in lenders], 1)
        around = _alive(around, ask.where)
        relevant = neighbourhood.shares_a_term(ask.query)
        return neighbourhood.rerank(hits, lenders if around else [], around or [], when, relevant=relevant, order=order)

    async def _cut(self, scope: Scope, ask: Ask, hits: list[Hit]) -> list[Hit]:
        """The first ``k``; with ``context``, near-identical hits folded and each with its turns."""
        if not ask.context:
            return hits[: ask.k]
        hits = neighbourhood.fold(hits)[: ask.k]
        around = _alive(await self._neighbours(scope, [h.record for h in hits], ask.context), ask.where)
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
