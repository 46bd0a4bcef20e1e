"""OpenTelemetry for longterm: spans and metrics, free when OpenTelemetry is absent.

The seam:
- ``span(name, links=(), **attrs)``: a context manager around one unit of work; yields a
  ``Span`` whose ``set(**attrs)`` adds attributes. A failure inside marks the span as an
  error with ``error.type`` (the exception's class, never its message) and counts it in
  ``longterm.errors``. Without ``opentelemetry-api`` it does nothing.
- ``saving(kind)``, ``searching``, ``erasing``: decorators of the facade's async methods
  (one line each in ``memory/``), which open the span and record the metrics below.
- ``link_here()``: the current span's context as a link, for work that runs later on
  another loop (auto-saves link to the turn that scheduled them).
- ``register_backlog(kind, owner, read, **attrs)``: an observable gauge's source, read at
  each collection (``kind`` is ``"embeddings"`` or ``"facts"``; ``owner`` held weakly).
- ``use(meter_provider=, tracer_provider=)``, ``use_meters(provider)``: providers of
  longterm's own (the MCP server's ``/metrics``, tests); by default the global ones
  OpenTelemetry's API holds.
- ``pseudonym(value)``: an id as logs and spans may carry it.

Where: ``providers`` loads the API when something may listen and holds the providers, the
instruments and the backlog gauges; ``spans`` makes spans and decorates the facade's calls.

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
the extra ``otel``. With nothing listening (no provider set, none named in the environment)
the API is not even imported and a span costs a few lookups (``providers``); without the API
installed, nothing at all.
"""

from __future__ import annotations

from .providers import (
    BACKLOGS,
    CONTENT_ENV,
    SEARCH_BUCKETS,
    content_on,
    enabled,
    prime,
    pseudonym,
    register_backlog,
    use,
    use_meters,
)
from .spans import Span, erasing, failed, link_here, saving, searching, span

__all__ = [
    "BACKLOGS",
    "CONTENT_ENV",
    "SEARCH_BUCKETS",
    "Span",
    "content_on",
    "enabled",
    "erasing",
    "failed",
    "link_here",
    "pseudonym",
    "prime",
    "register_backlog",
    "saving",
    "searching",
    "span",
    "use",
    "use_meters",
]
