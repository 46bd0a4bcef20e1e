"""Counting an engine's writes to its store, as the engine counts them: Redis the server's change
counter (``INFO persistence``: ``rdb_changes_since_last_save``), the local store SQLite's
``total_changes``, OpenSearch the documents sent in bulk requests to the data index, Qdrant the
points built for an upsert. Used by ``test_restore_writes.py`` and ``bench/restore_writes.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def write_counter(engine: Any, which: str) -> Callable[[], int]:
    """Writes so far on ``engine``'s store, as the engine counts them (see the module docstring)."""
    if which == "redis":
        return lambda: int(engine._r.info("persistence")["rdb_changes_since_last_save"])
    if which == "local":
        return lambda: int(engine._conn.total_changes)
    sent = [0]
    if which == "opensearch":
        bulk = engine.client.bulk

        def counted_bulk(body: bytes, **kw: Any) -> Any:
            sent[0] += body.count(f'"_index": "{engine.index}"'.encode())
            return bulk(body=body, **kw)

        engine.client.bulk = counted_bulk
    else:  # qdrant: the points an upsert builds
        points = engine._points

        def counted_points(records: Any, vectors: Any) -> Any:
            made = list(points(records, vectors))
            sent[0] += len(made)
            return iter(made)

        engine._points = counted_points
    return lambda: sent[0]
