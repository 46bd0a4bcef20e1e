"""Redis's purge (``backends.redis.purge``) waits for the snapshot it asked for, also when Redis
only scheduled it behind the AOF rewrite: INFO shows no schedule, so a purge returned while the RDB
still held the erased words. A scripted client plays INFO's answers (the polling is ours)."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ResponseError

from longterm.backends.redis.purge import purge
from longterm.errors import BackendError


class ScriptedRedis:
    """INFO persistence answers in turn (the last repeats), and the calls purge made."""

    def __init__(self, infos: list[dict[str, Any]]) -> None:
        self.infos, self.calls = infos, list[str]()

    def info(self, section: str) -> dict[str, Any]:
        return self.infos.pop(0) if len(self.infos) > 1 else self.infos[0]

    def config_get(self, name: str) -> dict[str, str]:
        return {"save": "3600 1"}

    def bgrewriteaof(self) -> None:
        self.calls.append("BGREWRITEAOF")

    refuse = 0
    """How many BGSAVEs Redis refuses first (its own snapshot runs)."""

    def bgsave(self, schedule: bool = False) -> None:
        self.calls.append("BGSAVE SCHEDULE" if schedule else "BGSAVE")
        if self.refuse:
            self.refuse -= 1
            raise ResponseError("Background save already in progress")


def _info(aof: int = 0, rdb: int = 0, saves: int = 5, status: str = "ok") -> dict[str, Any]:
    return {
        "aof_enabled": 1,
        "aof_rewrite_in_progress": aof,
        "aof_rewrite_scheduled": 0,
        "aof_last_bgrewrite_status": "ok",
        "rdb_saves": saves,
        "rdb_bgsave_in_progress": rdb,
        "rdb_last_bgsave_status": status,
    }


def test_purge_waits_for_a_snapshot_that_was_only_scheduled() -> None:
    rewrite = [_info(aof=1), _info()]
    asked = [_info(), _info()]  # none running; rdb_saves when asked
    scheduled = [_info(), _info(), _info(rdb=1), _info(saves=6)]  # INFO shows no schedule, then it runs
    r = ScriptedRedis([_info(), *rewrite, *asked, *scheduled])
    purge(r, "127.0.0.1:6379")
    assert r.calls == ["BGREWRITEAOF", "BGSAVE SCHEDULE"]
    assert r.infos == [_info(saves=6)], "purge returned before the snapshot it asked for was taken"


def test_a_snapshot_redis_runs_already_is_waited_out_and_ours_asked_again() -> None:
    """Redis refuses a BGSAVE while its own runs (a save point), and that one may predate the erase."""
    first = [_info(), _info(), _info(), _info()]  # AOF on, rewritten, none running, rdb_saves 5: refused
    theirs = [_info(rdb=1), _info(saves=6)]  # Redis's own snapshot runs, then ends
    ours = [_info(saves=6), _info(saves=6), _info(rdb=1, saves=6), _info(saves=7)]  # asked at 6: taken at 7
    r = ScriptedRedis([*first, *theirs, *ours])
    r.refuse = 1
    purge(r, "127.0.0.1:6379")
    assert r.calls == ["BGREWRITEAOF", "BGSAVE SCHEDULE", "BGSAVE SCHEDULE"]
    assert r.infos == [_info(saves=7)]


def test_a_failed_snapshot_is_an_error() -> None:
    r = ScriptedRedis([_info(), _info(), _info(), _info(), _info(saves=6, status="err")])
    with pytest.raises(BackendError, match="purging failed"):
        purge(r, "127.0.0.1:6379")
