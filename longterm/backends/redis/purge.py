"""Purging a Redis server's files: what erases deleted, gone from its AOF and RDB.

The seam: ``purge(r, where)`` rewrites the AOF (``BGREWRITEAOF``) where it is on and, where
snapshots are configured, the RDB (``BGSAVE``), and waits for both. Until then the files keep
what an erase deleted: Redis appends a ``DEL`` to the AOF and never removes the words before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...errors import BackendError


def purge(r: Any, where: str) -> None:
    """Blocking, as long as the rewrites take (an operator's command); ``BackendError`` if one failed.

    One after the other: a ``BGSAVE`` asked while the AOF is rewritten is only scheduled, and INFO
    shows no such schedule, so it looked done before it began. A snapshot counts as taken once
    ``rdb_saves`` (Redis 7) passed what it was when asked, or, without that field, once none runs."""
    if int(r.info("persistence").get("aof_enabled", 0)):
        r.bgrewriteaof()
        _wait(r, where, "aof_rewrite_in_progress", "aof_last_bgrewrite_status", scheduled="aof_rewrite_scheduled")
    if _snapshots(r):
        before = _snapshot(r, where)
        done = None if before is None else lambda info: int(info.get("rdb_saves", 0)) > int(before)
        _wait(r, where, "rdb_bgsave_in_progress", "rdb_last_bgsave_status", done=done)


def _snapshot(r: Any, where: str) -> Any:
    """Ask for a snapshot of its own (one Redis runs already may predate the erase: waited out, then
    asked again); ``rdb_saves`` as it was when asked (None: a Redis before 7)."""
    from redis.exceptions import ResponseError  # the engine's extra: installed wherever a client is

    while True:
        _wait(r, where, "rdb_bgsave_in_progress", None)  # not ours: its status is not ours to report
        before = r.info("persistence").get("rdb_saves")
        try:
            r.bgsave(schedule=True)
        except ResponseError as exc:
            if "in progress" not in str(exc):
                raise
            continue
        return before


def _wait(
    r: Any,
    where: str,
    running: str,
    status: str | None,
    *,
    scheduled: str | None = None,
    done: Callable[[dict[str, Any]], bool] | None = None,
) -> None:
    """Until the rewrite INFO's ``running`` (and ``scheduled``) names is over (and ``done``); its ``status`` checked."""
    while True:
        time.sleep(0.05)
        info = r.info("persistence")
        busy = int(info.get(running, 0)) or (scheduled is not None and int(info.get(scheduled, 0)))
        if not busy and (done is None or done(info)):
            if status is not None and info.get(status) not in ("ok", None):
                raise BackendError(f"redis at {where}: purging failed ({status}: {info.get(status)}).")
            return


def _snapshots(r: Any) -> bool:
    from redis.exceptions import ResponseError  # the engine's extra: installed wherever a client is

    try:
        return bool(r.config_get("save").get("save"))
    except ResponseError:  # CONFIG renamed or refused (managed services)
        return False
