"""Spans of longterm's work, and the facade's calls traced and counted.

The seam: ``span(name, links=(), **attrs)`` yields a ``Span`` (``set``, ``ids``); ``failed(span,
exc, backend)`` marks a failure by its class; ``link_here()`` links later work to the current
span; ``saving(kind)``, ``searching``, ``erasing`` decorate the facade's async calls. Where
they go is ``providers``' business: with nothing listening a span is a no-op and a decorated
call runs as it is.

Why attributes pass ``_clean``: OpenTelemetry takes scalars and lists of them only, and every
key is prefixed ``longterm.`` so an exporter's other spans never collide with ours.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from .providers import content_on, enabled, meters, quiet, tracer, tracing

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


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
    trace = tracing()
    if trace is None:
        return None
    ctx = trace.get_current_span().get_span_context()
    return trace.Link(ctx) if ctx.is_valid else None


@contextmanager
def span(name: str, links: Sequence[Any] = (), **attrs: Any) -> Iterator[Span]:
    """One unit of work as a span named ``name`` (a no-op without OpenTelemetry).

    A failure inside sets the span's status to error with ``error.type`` (the exception's
    class: its message may quote the user) and counts it in ``longterm.errors``."""
    trace = tracing()
    if trace is None:
        try:
            yield Span()
        except BaseException as exc:
            failed(None, exc, attrs.get("backend"))
            raise
        return
    kept = [link for link in links if link is not None]
    with tracer(trace).start_as_current_span(
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
    trace = tracing()
    if current is not None and current.is_recording() and trace is not None:
        current.set_attribute("error.type", kind)
        current.set_status(trace.Status(trace.StatusCode.ERROR, kind))
    made = meters()
    if made is not None and not isinstance(exc, GeneratorExit):
        made.errors.add(1, {"backend": str(backend or ""), "error.type": kind})


# -- the facade's operations ----------------------------------------------------------------------


def _where(memory: object) -> dict[str, Any]:
    return {"backend": getattr(memory, "backend_name", ""), "index": getattr(memory, "index", "")}


def saving(kind: str) -> Callable[[F], F]:
    """Decorate a facade save (``kind``: session, events, memories): a ``longterm.save`` span
    and ``longterm.saves`` / ``longterm.events``, from the ``SaveResult`` it returns."""

    def wrap(fn: F) -> F:
        if not enabled():
            return fn

        @functools.wraps(fn)
        async def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            if quiet():
                return await fn(self, *args, **kwargs)
            where = _where(self)
            backend = {"backend": where["backend"]}
            made = meters()
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
    if not enabled():
        return fn

    @functools.wraps(fn)
    async def traced(self: Any, scope: Any, *args: Any, **kwargs: Any) -> Any:
        if quiet():
            return await fn(self, scope, *args, **kwargs)
        where = _where(self)
        made = meters()
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
    if not enabled():
        return fn

    @functools.wraps(fn)
    async def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
        if quiet():
            return await fn(self, *args, **kwargs)
        where = _where(self)
        target = "memory" if kwargs.get("memory_id") else "session" if kwargs.get("session_id") else "user"
        with span("longterm.erase", target=target, **where) as s:
            deleted = await fn(self, *args, **kwargs)
            s.set(deleted=int(deleted))
            made = meters()
            if made is not None and deleted:
                made.erased.add(int(deleted), {"backend": where["backend"]})
            return deleted

    return traced  # type: ignore[return-value]
