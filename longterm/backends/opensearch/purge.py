"""Purging an OpenSearch index: what erases deleted, gone from its segments.

The seam: ``purge(client, index)`` flushes the translog into segments, then merges the data
index into one segment, which drops erased documents' bytes (Lucene keeps them until a
merge). A deleted document that a retention lease still holds (every shard copy's, renewed
every ``index.soft_deletes.retention_lease.sync_interval``, 30 s by default) survives a merge:
it waits for the leases to pass this purge's start (at most ``PURGE_WAIT``), then merges again.
"""

from __future__ import annotations

import time
from typing import Any

from .bulk import Incomplete

#: Seconds ``purge`` waits for retention leases to let go of erased documents (they renew every 30 s).
PURGE_WAIT = 45.0


def purge(client: Any, index: str) -> None:
    """Blocking, as long as it takes (an operator's command); ``Incomplete`` if leases still hold documents."""
    wait = {"request_timeout": PURGE_WAIT + 30}
    client.indices.flush(index=index, **wait)
    start = {n: max(c["seq_no"]["max_seq_no"] for c in copies) for n, copies in _shard_stats(client, index).items()}
    _merge(client, index, wait)
    deadline = time.monotonic() + PURGE_WAIT
    while _deleted_docs(client, index):
        held = [
            lease
            for n, copies in _shard_stats(client, index).items()
            for c in copies
            for lease in c.get("retention_leases", {}).get("leases", [])
            if lease["retaining_seq_no"] <= start.get(n, -1)
        ]
        if not held:
            _merge(client, index, wait)
            return
        if time.monotonic() > deadline:
            raise Incomplete(
                f"{len(held)} retention leases still hold erased documents after {PURGE_WAIT:g} s (a replica "
                "catching up?); they are merged away once the leases move on. Purge again in a minute"
            )
        time.sleep(1.0)


def _merge(client: Any, index: str, wait: dict[str, Any]) -> None:
    client.indices.forcemerge(index=index, max_num_segments=1, **wait)
    client.indices.refresh(index=index)  # searchers let go of the merged-away segments


def _shard_stats(client: Any, index: str) -> dict[str, list[dict[str, Any]]]:
    stats = client.indices.stats(index=index, level="shards")
    return dict(stats["indices"][index]["shards"])


def _deleted_docs(client: Any, index: str) -> int:
    stats = client.indices.stats(index=index, metric="docs")
    return int(stats["indices"][index]["total"]["docs"]["deleted"])
