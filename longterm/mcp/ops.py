"""``/metrics`` and ``/healthz`` of ``longterm mcp --transport http``: what an operator scrapes.

The seam: ``routes(memories, app_name=, tokens=, host=)`` returns the two Starlette routes
``http_app`` serves beside ``/mcp``:
- ``/metrics``: longterm's metrics (``longterm.telemetry``) in Prometheus text, from a meter
  provider of this server's own (needs the extra ``otel``: ``opentelemetry-sdk`` and
  ``opentelemetry-exporter-prometheus``; without it the answer is a 501 naming the extra).
  Labels are the backend, outcomes and error classes: never an app, a user or any id.
- ``/healthz``: 200 ``{"status": "ok"}`` when every store the server uses answers a count
  within ``HEALTH_SECONDS``, else 503 with what failed.

Why the token rule: bound to a loopback address only this machine reaches the server, and
a scraper or a probe there needs no secret; bound elsewhere, both need a token of the token
file (any user's), as ``/mcp`` does: the metrics say how busy the server is, the health
probe whether its store is down.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from .. import telemetry
from ..errors import LongTermMemoryError
from .auth import Tokens

if TYPE_CHECKING:
    from ..ports import MemoryPort

log = logging.getLogger(__name__)

#: A Starlette endpoint: a request in, a response out.
Endpoint = Callable[[Request], Awaitable[Response]]

#: Seconds ``/healthz`` waits for a store's answer before it says the store is unreachable.
HEALTH_SECONDS = 3.0
#: Addresses that only this machine reaches.
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: What ``/metrics`` answers without the extra.
NO_EXPORTER = (
    "metrics need OpenTelemetry's SDK and Prometheus exporter: pip install 'longterm[otel]' "
    "(opentelemetry-sdk, opentelemetry-exporter-prometheus)\n"
)


def prometheus_registry() -> Any:
    """A Prometheus registry fed by a meter provider of this process's own, which longterm's
    metrics now go to (``telemetry.use``); None without the SDK or the exporter."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from prometheus_client import CollectorRegistry
    except ImportError:
        return None
    registry = CollectorRegistry(auto_describe=True)
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "longterm-mcp"})
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)], resource=resource)
    telemetry.use_meters(provider)
    return registry


def _guarded(endpoint: Endpoint, tokens: Tokens, host: str) -> Endpoint:
    """``endpoint``, open on loopback, behind any token of the file elsewhere."""
    open_here = host in LOOPBACK

    async def guarded(request: Request) -> Response:
        if not open_here and tokens.user(request.headers.get("authorization")) is None:
            return JSONResponse(
                {"error": "invalid_token", "error_description": "send Authorization: Bearer <your token>"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="longterm", error="invalid_token"'},
            )
        response: Response = await endpoint(request)
        return response

    return guarded


def _metrics(registry: Any) -> Endpoint:
    async def metrics(_: Request) -> Response:
        if registry is None:
            return PlainTextResponse(NO_EXPORTER, status_code=501)
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return metrics


async def _reach(memory: MemoryPort, app_name: str, user_id: str) -> str | None:
    """None when ``memory``'s store answers a count within ``HEALTH_SECONDS``, else why not."""
    try:
        await asyncio.wait_for(memory.count(app_name=app_name, user_id=user_id), HEALTH_SECONDS)
        return None
    except (asyncio.TimeoutError, TimeoutError):
        return f"backend {memory.backend_name} did not answer within {HEALTH_SECONDS:g} s"
    except LongTermMemoryError as exc:
        return str(exc)


def _healthz(per_user: Mapping[str, MemoryPort], app_name: str) -> Endpoint:
    # One probe per store: users on one index share one memory.
    probes = {id(m): (m, user) for user, m in per_user.items()}
    backends = sorted({m.backend_name for m, _ in probes.values()})
    was_down = False

    async def healthz(_: Request) -> Response:
        nonlocal was_down
        found = await asyncio.gather(*(_reach(m, app_name, u) for m, u in probes.values()))
        problems = [p for p in found if p is not None]
        if bool(problems) != was_down:  # one line when an outage starts, one when it ends
            was_down = bool(problems)
            if problems:
                log.warning("health check: a store is unreachable: %s", problems[0], extra={"backend": backends})
            else:
                log.warning("health check: every store answers again", extra={"backend": backends})
        body: dict[str, Any] = {"status": "unavailable" if problems else "ok", "backends": backends}
        if problems:
            body["problems"] = problems
        return JSONResponse(body, status_code=503 if problems else 200)

    return healthz


def routes(per_user: Mapping[str, MemoryPort], *, app_name: str, tokens: Tokens, host: str) -> Sequence[Route]:
    """``/metrics`` and ``/healthz`` for ``http_app`` (see the module docstring)."""
    registry = prometheus_registry()
    if registry is not None:  # every series at zero before the first save or search
        for backend in sorted({m.backend_name for m in per_user.values()}):
            telemetry.prime(backend)
    return [
        Route("/metrics", endpoint=_guarded(_metrics(registry), tokens, host), methods=["GET"]),
        Route("/healthz", endpoint=_guarded(_healthz(per_user, app_name), tokens, host), methods=["GET"]),
    ]
