"""Reranking: a model that reads the question beside each of a search's first hits and orders them again.

The seam: ``resolve_reranker(spec, timeout=)`` makes a ``Reranker`` (None: off) from a callable
``(query, texts) -> scores`` (plain or ``async``), the URL of an HTTP endpoint speaking the
common ``/rerank`` shape (Cohere, Jina, TEI, vLLM, Infinity: ``{"query", "documents", "top_n"}``
in, ``{"results": [{"index", "relevance_score"}]}`` out), or a dict ``{"url", "model",
"api_key", "headers", "timeout"}``. ``await reranked(reranker, query, hits, n)`` reorders the
first ``n`` hits by the reranker's scores and returns them with ``order``, the value each hit
is ranked by from then on (``retrieval.context.rerank`` takes it), or the hits as they came
when the reranker failed, was late or answered nonsense.

Why the score stays and only the order moves: ``score`` is the calibrated one (the README's
meaning, ``min_score`` thresholds carry between stores); a reranker's scale is its own (a
probability, a logit). So each reranked hit keeps its calibrated ``score``, shows the
reranker's in ``arms["rerank"]``, and is ranked by the calibrated values of the first ``n``
hits handed out in the reranker's order: the context and time steps after it lend and boost
on the same scale as before. Why it degrades instead of raising: a reranker is a remote
model in front of a store that answered; a search past the reranker's timeout answers in
the fused order, each of the first ``n`` hits saying so (``arms["rerank_failed"]`` and
``extra["degraded"]``), within the timeout (a late plain callable is left to finish on its
thread).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..config import env
from ..errors import ConfigurationError, require
from ..records import Hit

log = logging.getLogger(__name__)

#: Seconds a reranker may take when neither it nor the memory (``timeout=``) says.
DEFAULT_TIMEOUT = 10.0
#: How many of a search's first hits are reranked unless ``rerank_top_n`` says otherwise.
DEFAULT_TOP_N = 20
#: The environment variable an HTTP reranker's key is read from when its dict names none.
API_KEY_ENV = "LONGTERM_RERANKER_API_KEY"

ScoreFunction = Callable[[str, list[str]], Sequence[float] | Awaitable[Sequence[float]]]


class HttpReranker:
    """A ``/rerank`` endpoint as a blocking ``(query, texts) -> scores`` (one ``httpx.Client``).

    Sends ``{"query", "documents", "top_n"}`` (and ``"model"`` when given); reads ``results``
    (or a bare list, as TEI answers) of ``{"index", "relevance_score"}`` (or ``"score"``)."""

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"a reranker URL must start with http:// or https://, got {url!r}.")
        self._httpx = require("httpx", package="httpx", extra="embeddings", purpose="An HTTP reranker")
        self.url, self.model, self.timeout = url, model, timeout
        key = api_key or env(API_KEY_ENV)
        self.headers = {**({"Authorization": f"Bearer {key}"} if key else {}), **dict(headers or {})}
        # Made now, not at the first search: a client's first making takes ~0.3 s (its TLS
        # context), which would spend a short timeout before the request left.
        self._client: Any = self._httpx.Client(timeout=self.timeout, headers=self.headers)

    def __call__(self, query: str, texts: list[str]) -> list[float]:
        body: dict[str, Any] = {"query": query, "documents": texts, "top_n": len(texts)}
        if self.model:
            body["model"] = self.model
        resp = self._client.post(self.url, json=body)
        resp.raise_for_status()
        data = resp.json()
        results = data.get("results") if isinstance(data, dict) else data
        scores = [math.nan] * len(texts)
        for r in results or []:
            scores[int(r["index"])] = float(r["relevance_score"] if "relevance_score" in r else r["score"])
        return scores

    def close(self) -> None:
        self._client.close()


class Reranker:
    """A score function for (query, texts), bounded by ``timeout`` seconds (module docstring)."""

    def __init__(self, score: ScoreFunction, *, timeout: float = DEFAULT_TIMEOUT, name: str = "") -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ConfigurationError(f"a reranker's timeout must be a positive number of seconds, got {timeout!r}.")
        self.score, self.timeout = score, float(timeout)
        self.name = name or getattr(score, "__name__", type(score).__name__)

    async def scores(self, query: str, texts: list[str]) -> list[float]:
        """One finite score per text, within ``timeout``; raises whatever went wrong."""

        async def ask() -> Sequence[float]:
            call = getattr(self.score, "__call__", None)  # noqa: B004  # an object with an async __call__
            if inspect.iscoroutinefunction(self.score) or inspect.iscoroutinefunction(call):
                got = self.score(query, texts)
            else:  # a blocking function (an HTTP call, a local model): off the loop
                got = await asyncio.to_thread(self.score, query, texts)
            if inspect.isawaitable(got):
                return await got
            return got

        got = list(await asyncio.wait_for(ask(), self.timeout))
        values = [float(s) for s in got]
        if len(values) != len(texts) or not all(math.isfinite(v) for v in values):
            raise ValueError(f"expected {len(texts)} finite scores, got {got[:5]!r}{'...' if len(got) > 5 else ''}")
        return values


def resolve_reranker(spec: Any, *, timeout: float | None = None) -> Reranker | None:
    """A ``Reranker`` from None, a ``Reranker``, a callable, a URL or a dict (module docstring);
    ``timeout`` (the memory's) bounds it unless the dict names its own."""
    if spec is None or isinstance(spec, Reranker):
        return spec
    bound = DEFAULT_TIMEOUT if timeout is None else timeout
    if isinstance(spec, str):
        spec = {"url": spec}
    if isinstance(spec, Mapping):
        opts = dict(spec)
        if "url" not in opts:
            raise ConfigurationError("a reranker dict needs a 'url' (e.g. {'url': 'http://127.0.0.1:8080/rerank'}).")
        bound = opts.pop("timeout", bound)
        try:
            http = HttpReranker(opts.pop("url"), timeout=bound, **opts)
        except TypeError as exc:
            raise ConfigurationError(f"invalid options for a reranker: {exc}") from None
        return Reranker(http, timeout=bound, name=http.url)
    if callable(spec):
        return Reranker(spec, timeout=bound)
    raise ConfigurationError(
        f"reranker must be None, a callable (query, texts) -> scores, a URL or a dict, got {type(spec).__name__}."
    )


def head_size(top_n: int, k: int) -> int:
    """How many first hits a search reranks: ``rerank_top_n``, and at least the ``k`` it returns."""
    return max(top_n, k)


async def reranked(
    reranker: Reranker | None, query: str, hits: list[Hit], n: int
) -> tuple[list[Hit], dict[str, float] | None]:
    """The first ``n`` of ``hits`` in the reranker's order, the rest after them as they were, and
    the value each hit is ranked by (module docstring); without a reranker, or when it failed,
    ``hits`` in their order and None (the failure said in the first ``n`` hits)."""
    head, tail = hits[:n], hits[n:]
    if reranker is None or not head:
        return hits, None
    try:
        scores = await reranker.scores(query, [h.record.text for h in head])
    except Exception as exc:  # any failure of a model we do not own: the fused order stands
        said = str(exc) or "no answer in time"
        why = f"reranker {reranker.name} failed ({type(exc).__name__}: {said}); fused order kept"
        log.warning("%s", why)
        return [_failed(h, why) for h in head] + tail, None
    ranked = sorted(range(len(head)), key=lambda i: -scores[i])  # stable: ties keep the fused order
    values = sorted((h.score for h in head), reverse=True)
    out = [head[i].model_copy(update={"arms": {**head[i].arms, "rerank": scores[i]}}) for i in ranked]
    order = {h.record.id: v for h, v in zip(out, values, strict=True)}
    floor = values[-1]
    order.update({h.record.id: min(h.score, floor) for h in tail})  # after the reranked ones
    return out + tail, order


def _failed(hit: Hit, why: str) -> Hit:
    before = hit.extra.get("degraded")
    extra = {**hit.extra, "degraded": f"{before}; {why}" if before else why}
    return hit.model_copy(update={"arms": {**hit.arms, "rerank_failed": 1.0}, "extra": extra})
