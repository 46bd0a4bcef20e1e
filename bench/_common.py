"""Helpers shared by the benchmark scripts: percentiles and a timed run through the API."""

from __future__ import annotations

import time
from typing import Any

USERS = 100


def pct(values: list[float], p: float) -> float:
    """The p-th percentile of ``values`` (seconds), in milliseconds."""
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] * 1000


async def through_api(memory: Any, data: list[dict], queries: list[str], app: str = "bench") -> dict:
    """Save ``data`` session by session, then ask ``queries`` round-robin over the users."""
    n = sum(len(s["events"]) for s in data)
    start = time.perf_counter()
    for s in data:
        await memory.add_session_to_memory(s)
    rate = n / (time.perf_counter() - start)
    lat = []
    for i, q in enumerate(queries):
        t = time.perf_counter()
        await memory.search_memory(app_name=app, user_id=f"user-{i % USERS}", query=q)
        lat.append(time.perf_counter() - t)
    await memory.close()
    return {"rate": rate, "lat": lat}
