"""Where longterm's spans and metrics go: OpenTelemetry's API, loaded once something may listen.

The seam: ``tracing()`` and ``metering()`` return ``opentelemetry.trace`` / ``.metrics`` when a
provider may be listening, else None; ``tracer(trace)`` is longterm's tracer; ``meters()`` the
instruments of the current meter provider (``Instruments``); ``quiet()`` says nothing listens
at all. ``use`` / ``use_meters`` set providers of longterm's own; ``register_backlog`` adds a
gauge's source. ``enabled()``: the API is installed. ``content_on()`` and ``pseudonym(value)``:
whether ids may be told, and an id as told.

Why the API is imported only once something may be listening: a provider can only be set by
code that imports ``opentelemetry.trace`` or ``opentelemetry.metrics`` (an SDK, an
instrumentation, ADK's runner), by ``OTEL_PYTHON_TRACER_PROVIDER`` / ``OTEL_PYTHON_METER_PROVIDER``,
or through ``use``. Until one of those holds, every span and metric would go to the API's
no-op providers, so they are skipped and the API stays unimported (~8 ms of a process's
start); each call checks again (a few lookups), and the first that finds a listener loads it.
A registered backlog loads the metrics API at once: its gauge must exist for a provider set
later, before any other call.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, TypeVar

#: The environment variable that lets spans and logs carry ids (app, user, session, memory).
CONTENT_ENV = "LONGTERM_TELEMETRY_CONTENT"
#: Histogram bounds of search latency, in seconds.
SEARCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Backlog kinds a gauge exists for.
BACKLOGS = ("embeddings", "facts")

Owner = TypeVar("Owner")


def _installed() -> bool:
    """opentelemetry-api is installed (``find_spec`` imports the namespace package only)."""
    return (
        importlib.util.find_spec("opentelemetry") is not None
        and importlib.util.find_spec("opentelemetry.trace") is not None
    )


#: opentelemetry-api is installed (google-adk brings it); without it every helper here does nothing.
_API = _installed()
#: ``opentelemetry.trace`` / ``opentelemetry.metrics`` once a listener may exist (module docstring).
_trace: ModuleType | None = None
_metrics: ModuleType | None = None

_lock = threading.Lock()
_meter_provider: Any = None
_tracer_provider: Any = None
_instruments: Instruments | None = None


def enabled() -> bool:
    """OpenTelemetry's API is importable (spans and metrics go to its providers)."""
    return _API


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


def _listened(module: str, own: object, variable: str) -> bool:
    """Whether a provider of ``module``'s kind may be set: the module was imported by someone,
    longterm was given one (``use``), or the environment names one (module docstring)."""
    return _API and (module in sys.modules or own is not None or bool(os.environ.get(variable)))


def tracing() -> ModuleType | None:
    """``opentelemetry.trace`` when a tracer provider may be listening, else None (nothing to send)."""
    global _trace
    if _trace is None and _listened("opentelemetry.trace", _tracer_provider, "OTEL_PYTHON_TRACER_PROVIDER"):
        from opentelemetry import trace

        _trace = trace
    return _trace


def metering(*, always: bool = False) -> ModuleType | None:
    """``opentelemetry.metrics`` when a meter provider may be listening (``always``: whenever the
    API is installed), else None."""
    global _metrics
    if _metrics is None and (
        _listened("opentelemetry.metrics", _meter_provider, "OTEL_PYTHON_METER_PROVIDER") or (always and _API)
    ):
        from opentelemetry import metrics

        _metrics = metrics
    return _metrics


def quiet() -> bool:
    """Nothing may be listening (no tracer nor meter provider could be set): a call skips its span."""
    return tracing() is None and metering() is None


def tracer(trace: ModuleType) -> Any:
    """longterm's tracer, from its own provider (``use``) or the global one."""
    return trace.get_tracer("longterm", tracer_provider=_tracer_provider)


class Instruments:
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


def meters(*, always: bool = False) -> Instruments | None:
    """The instruments, made on first use (None: no meter provider may be listening, see ``metering``)."""
    global _instruments
    metrics = metering(always=always)
    if metrics is None:
        return None
    made = _instruments
    if made is None:
        with _lock:
            if _instruments is None:
                _instruments = Instruments(metrics.get_meter("longterm", meter_provider=_meter_provider))
            made = _instruments
    return made


def prime(backend: str) -> None:
    """Every counter's series for ``backend`` at zero, so a scraper sees them before any traffic
    (a counter is otherwise first exported at its first add); the latency histogram comes with
    the first search."""
    made = meters(always=True)
    if made is None:
        return
    for outcome in ("ok", "error"):
        made.saves.add(0, {"backend": backend, "outcome": outcome})
    for outcome in ("kept", "dropped", "refused"):
        made.events.add(0, {"backend": backend, "outcome": outcome})
    made.erased.add(0, {"backend": backend})


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
    meters(always=True)  # the gauges exist from now on, for a provider set later too


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
