"""OpenTelemetry for longterm: spans and metrics, free when OpenTelemetry is absent.

The seam:
- ``span(name, links=(), **attrs)``: a context manager around one unit of work; yields a
  ``Span`` whose ``set(**attrs)`` adds attributes. A failure inside marks the span as an
  error with ``error.type`` (the exception's class, never its message) and counts it in
  ``longterm.errors``. Without ``opentelemetry-api`` it does nothing.
- ``saving(kind)``, ``searching``, ``erasing``: decorators of the facade's async methods
  (one line each in ``memory.py``), which open the span and record the metrics below.
- ``link_here()``: the current span's context as a link, for work that runs later on
  another loop (auto-saves link to the turn that scheduled them).
- ``register_backlog(kind, owner, read, **attrs)``: an observable gauge's source, read at
  each collection (``kind`` is ``"embeddings"`` or ``"facts"``; ``owner`` held weakly).
- ``use(meter_provider=, tracer_provider=)``, ``use_meters(provider)``: providers of
  longterm's own (the MCP server's ``/metrics``, tests); by default the global ones
  OpenTelemetry's API holds.
- ``pseudonym(value)``: an id as logs and spans may carry it.

Metrics: counters ``longterm.saves`` {backend, outcome = ok | error}, ``longterm.events``
{backend, outcome = kept | dropped | refused}, ``longterm.errors`` {backend, error.type},
``longterm.erased`` {backend}; histogram ``longterm.search.duration`` (s) {backend}; gauges
``longterm.embeddings.backlog`` and ``longterm.facts.backlog`` {backend}.

Why so: telemetry must never carry what users said nor whose it is. Span attributes are
the backend, the index, counts, the arms a search used and whether it degraded; metric
labels hold no index (it defaults to the app's name), app, user or id. With
``LONGTERM_TELEMETRY_CONTENT=1`` spans also carry the app, user and session ids and
``pseudonym`` gives ids as they are (for debugging one's own store, never by default).
google-adk brings ``opentelemetry-api``, so most agents have it; the SDK and exporters are
the extra ``otel``. Everything here is cheap when no SDK is configured (the API's no-op
providers) and nothing at all when the API is not installed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

try:  # google-adk brings the API; without it every helper here does nothing
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised where the API is not installed
    _metrics = None  # type: ignore[assignment]
    _trace = None  # type: ignore[assignment]

#: The environment variable that lets spans and logs carry ids (app, user, session, memory).
CONTENT_ENV = "LONGTERM_TELEMETRY_CONTENT"
#: Histogram bounds of search latency, in seconds.
SEARCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Backlog kinds a gauge exists for.
BACKLOGS = ("embeddings", "facts")

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
Owner = TypeVar("Owner")


def enabled() -> bool:
    """OpenTelemetry's API is importable (spans and metrics go to its providers)."""
    return _trace is not None


def content_on() -> bool:
    """``LONGTERM_TELEMETRY_CONTENT=1`` (or true/yes/on): ids may go into spans and logs."""
    return os.environ.get(CONTENT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def pseudonym(value: object) -> str:
    """``value`` (an id) as telemetry and logs carry it: itself with ``LONGTERM_TELEMETRY_CONTENT=1``,
    else the first 8 hex digits of its SHA-256 (``#1a2b3c4d``): lines about one session can be
    told apart and matched against a known id, and none names it."""
    text = str(value)
    if content_on():
        return text
    return "#" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


# -- providers ------------------------------------------------------------------------------

_lock = threading.Lock()
_meter_provider: Any = None
_tracer_provider: Any = None
_instruments: _Instruments | None = None


def use(*, meter_provider: Any = None, tracer_provider: Any = None) -> None:
    """Send longterm's metrics / spans to these providers instead of the global ones (None: the global)."""
    global _meter_provider, _tracer_provider, _instruments
    with _lock:
        _meter_provider, _tracer_provider, _instruments = meter_provider, tracer_provider, None


def use_meters(meter_provider: Any) -> None:
    """Send longterm's metrics to ``meter_provider`` (None: the global one); spans stay where they go."""
    global _meter_provider, _instruments
    with _lock:
        _meter_provider, _instruments = meter_provider, None


def _tracer() -> Any:
    assert _trace is not None
    return _trace.get_tracer("longterm", tracer_provider=_tracer_provider)


class _Instruments:
    """The instruments of one meter provider (made on first use, again after ``use``)."""

    def __init__(self, meter: Any) -> None:
        self.saves = meter.create_counter("longterm.saves", unit="{save}", description="Saves by outcome")
        self.events = meter.create_counter(
            "longterm.events", unit="{event}", description="New events of saves: kept, dropped by the policy, refused"
        )
        self.errors = meter.create_counter("longterm.errors", unit="{error}", description="Failed calls by class")
        self.erased = meter.create_counter("longterm.erased", unit="{memory}", description="Memories erased")
        self.search = meter.create_histogram(
            "longterm.search.duration",
            unit="s",
            description="Search latency",
            explicit_bucket_boundaries_advisory=list(SEARCH_BUCKETS),
        )
        for kind in BACKLOGS:
            meter.create_observable_gauge(
                f"longterm.{kind}.backlog",
                callbacks=[functools.partial(_observe, kind)],
                unit="{record}",
                description=f"Records waiting for {kind}",
            )


def _meters() -> _Instruments | None:
    global _instruments
    if _metrics is None:
        return None
    made = _instruments
    if made is None:
        with _lock:
            if _instruments is None:
                _instruments = _Instruments(_metrics.get_meter("longterm", meter_provider=_meter_provider))
            made = _instruments
    return made


# -- backlogs -------------------------------------------------------------------------------

_backlogs: dict[str, list[tuple[weakref.ref[Any], Callable[[Any], int | None], dict[str, str]]]] = {
    k: [] for k in BACKLOGS
}


def register_backlog(kind: str, owner: Owner, read: Callable[[Owner], int | None], **attrs: str) -> None:
    """Report ``read(owner)`` as ``longterm.<kind>.backlog`` at each collection, with ``attrs``
    (e.g. ``backend="redis"``; never an id), while ``owner`` lives. ``read`` must be cheap and
    must not block (a count the owner keeps); None or an exception leaves that point out."""
    if kind not in _backlogs:
        raise ValueError(f"backlog kind must be one of {', '.join(BACKLOGS)}, got {kind!r}")
    with _lock:
        _backlogs[kind].append((weakref.ref(owner), read, dict(attrs)))
    _meters()  # the gauges exist from now on


def _observe(kind: str, options: Any) -> Iterator[Any]:
    """The gauge callback: one observation per live registered owner."""
    from opentelemetry.metrics import Observation

    with _lock:
        sources = list(_backlogs[kind])
        _backlogs[kind][:] = [s for s in sources if s[0]() is not None]
    for ref, read, attrs in sources:
        owner = ref()
        if owner is None:
            continue
        try:
            value = read(owner)
        except Exception:
            continue
        if value is not None:
            yield Observation(int(value), attrs)


# -- spans ------------------------------------------------------------------------------------


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry accepts (None left out; sequences as lists of str)."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, (set, frozenset, tuple, list)):
            value = sorted(str(v) for v in value)
        elif not isinstance(value, (str, bool, int, float)):
            value = str(value)
        out[key if key.startswith(("longterm.", "error.")) else f"longterm.{key}"] = value
    return out


class Span:
    """What ``span`` yields: ``set(**attrs)`` (keys prefixed ``longterm.``); a no-op
    without OpenTelemetry. ``ids(**ids)`` sets ids only with ``LONGTERM_TELEMETRY_CONTENT=1``."""

    __slots__ = ("_span",)

    def __init__(self, span: Any = None) -> None:
        self._span = span

    def set(self, **attrs: Any) -> None:
        if self._span is not None and self._span.is_recording():
            self._span.set_attributes(_clean(attrs))

    def ids(self, **ids: Any) -> None:
        if content_on():
            self.set(**ids)


def link_here() -> Any:
    """The current span's context as a link (None: no span is recording here)."""
    if _trace is None:
        return None
    ctx = _trace.get_current_span().get_span_context()
    return _trace.Link(ctx) if ctx.is_valid else None


@contextmanager
def span(name: str, links: Sequence[Any] = (), **attrs: Any) -> Iterator[Span]:
    """One unit of work as a span named ``name`` (a no-op without OpenTelemetry).

    A failure inside sets the span's status to error with ``error.type`` (the exception's
    class: its message may quote the user) and counts it in ``longterm.errors``."""
    if _trace is None:
        yield Span()
        return
    kept = [link for link in links if link is not None]
    with _tracer().start_as_current_span(
        name, links=kept, attributes=_clean(attrs), record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield Span(current)
        except BaseException as exc:
            failed(current, exc, attrs.get("backend"))
            raise


def failed(current: Any, exc: BaseException, backend: object) -> None:
    """Mark ``current`` (a span, or None) failed by ``exc`` and count the error, by class only."""
    kind = type(exc).__name__
    if current is not None and current.is_recording():
        assert _trace is not None
        current.set_attribute("error.type", kind)
        current.set_status(_trace.Status(_trace.StatusCode.ERROR, kind))
    made = _meters()
    if made is not None and not isinstance(exc, GeneratorExit):
        made.errors.add(1, {"backend": str(backend or ""), "error.type": kind})


# -- the facade's operations ----------------------------------------------------------------------


def _where(memory: object) -> dict[str, Any]:
    return {"backend": getattr(memory, "backend_name", ""), "index": getattr(memory, "index", "")}


def saving(kind: str) -> Callable[[F], F]:
    """Decorate a facade save (``kind``: session, events, memories): a ``longterm.save`` span
    and ``longterm.saves`` / ``longterm.events``, from the ``SaveResult`` it returns."""

    def wrap(fn: F) -> F:
        if _trace is None:
            return fn

        @functools.wraps(fn)
        async def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            where = _where(self)
            backend = {"backend": where["backend"]}
            made = _meters()
            with span("longterm.save", operation=kind, **where) as s:
                try:
                    result = await fn(self, *args, **kwargs)
                except BaseException:
                    if made is not None:
                        made.saves.add(1, {**backend, "outcome": "error"})
                    raise
                new, kept = int(getattr(result, "new_events", 0)), int(getattr(result, "saved", 0))
                refused = int(getattr(result, "refused", 0))
                counts = {"kept": kept, "dropped": max(0, new - kept), "refused": refused}
                s.set(**{"events.new": new, **{f"events.{k}": v for k, v in counts.items()}})
                s.ids(session_id=getattr(result, "session_id", None))
                if made is not None:
                    made.saves.add(1, {**backend, "outcome": "ok"})
                    for outcome, n in counts.items():
                        if n:
                            made.events.add(n, {**backend, "outcome": outcome})
                return result

        return traced  # type: ignore[return-value]

    return wrap


def searching(fn: F) -> F:
    """Decorate the facade's search: a ``longterm.search`` span (hits, arms used, degraded)
    and ``longterm.search.duration``."""
    if _trace is None:
        return fn

    @functools.wraps(fn)
    async def traced(self: Any, scope: Any, *args: Any, **kwargs: Any) -> Any:
        where = _where(self)
        made = _meters()
        started = time.perf_counter()
        with span("longterm.search", **where) as s:
            s.ids(app_name=getattr(scope, "app_name", None), user_id=getattr(scope, "user_id", None))
            try:
                hits = await fn(self, scope, *args, **kwargs)
            finally:
                if made is not None:
                    made.search.record(time.perf_counter() - started, {"backend": where["backend"]})
            arms = {a for h in hits for a in (getattr(h, "arms", None) or {})}
            degraded = any(getattr(h, "extra", {}).get("degraded") for h in hits)
            s.set(hits=len(hits), arms=arms, degraded=degraded)
            return hits

    return traced  # type: ignore[return-value]


def erasing(fn: F) -> F:
    """Decorate the facade's erase: a ``longterm.erase`` span (what was asked: one, a session,
    all; how many went) and ``longterm.erased``."""
    if _trace is None:
        return fn

    @functools.wraps(fn)
    async def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
        where = _where(self)
        target = "memory" if kwargs.get("memory_id") else "session" if kwargs.get("session_id") else "user"
        with span("longterm.erase", target=target, **where) as s:
            deleted = await fn(self, *args, **kwargs)
            s.set(deleted=int(deleted))
            made = _meters()
            if made is not None and deleted:
                made.erased.add(int(deleted), {"backend": where["backend"]})
            return deleted

    return traced  # type: ignore[return-value]


__all__ = [
    "CONTENT_ENV",
    "Span",
    "content_on",
    "enabled",
    "erasing",
    "link_here",
    "pseudonym",
    "register_backlog",
    "saving",
    "searching",
    "span",
    "use",
    "use_meters",
]
