"""Purging a Redis server's files: what erases deleted, gone from its AOF and RDB.

The seam: ``purge(r, where)`` rewrites the AOF (``BGREWRITEAOF``) where it is on and, where
snapshots are configured, the RDB (``BGSAVE``), and waits for both. Until then the files keep
what an erase deleted: Redis appends a ``DEL`` to the AOF and never removes the words before it.
"""

from __future__ import annotations

import time
from typing import Any

from ...errors import BackendError


def purge(r: Any, where: str) -> None:
    """Blocking, as long as the rewrites take (an operator's command); ``BackendError`` if one failed."""
    info = r.info("persistence")
    started = []
    if int(info.get("aof_enabled", 0)):
        r.bgrewriteaof()
        started.append(("aof_rewrite_in_progress", "aof_rewrite_scheduled", "aof_last_bgrewrite_status"))
    if _snapshots(r):
        r.bgsave(schedule=True)
        started.append(("rdb_bgsave_in_progress", "rdb_bgsave_in_progress", "rdb_last_bgsave_status"))
    while started:
        time.sleep(0.05)
        info = r.info("persistence")
        for running, scheduled, status in list(started):
            if not int(info.get(running, 0)) and not int(info.get(scheduled, 0)):
                if info.get(status) not in ("ok", None):
                    raise BackendError(f"redis at {where}: purging failed ({status}: {info.get(status)}).")
                started.remove((running, scheduled, status))


def _snapshots(r: Any) -> bool:
    from redis.exceptions import ResponseError  # the engine's extra: installed wherever a client is

    try:
        return bool(r.config_get("save").get("save"))
    except ResponseError:  # CONFIG renamed or refused (managed services)
        return False
