"""Four processes create the same store at the same moment: every save lands.

The seam: ``_opener.py`` workers wait for a shared start time (a barrier: the test writes
it once all of them are ready), then open a store path that does not exist yet and save
one session each; every round uses a new path. Switching a new SQLite file to WAL takes a
lock SQLite's busy handler does not wait for, so such a race used to fail with "database
is locked" (1 to 6 rounds in 30 before ``core.sqlite.connect`` retried the open).

Run for the local store file, and for the ledger in ``LONGTERM_HOME`` that a backend which
is no ``Engine`` gets from the facade. (Of the built-in engines, qdrant-edge and mem0 keep a
side ledger file, opened the same way: inside or beside their store, and for mem0's platform
mode in ``LONGTERM_HOME``; every other engine keeps its ledger in its store.)
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from longterm import LongTermMemory
from tests.faults._opener import APP, USER, ThirdParty, session
from tests.faults.conftest import ROOT, expected_ids, helper

WORKERS = 4
ROUNDS = 20
#: The start time is this far ahead of the moment every worker is ready.
LEAD = 0.1
#: The whole race may take this long before the test kills the workers and fails.
LIMIT = 240.0


def _race(mode: str, base: Path) -> list[list[str]]:
    """Run the rounds; each worker's lines, one per round (``ok r`` or ``failed r ...``)."""
    cmd = [helper("_opener", mode, str(base), str(ROUNDS), str(w)) for w in range(WORKERS)]
    procs = [subprocess.Popen(c, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmd]
    expired: list[bool] = []

    def expire() -> None:
        expired.append(True)
        for p in procs:
            p.kill()

    watchdog = threading.Timer(LIMIT, expire)
    watchdog.start()
    results: list[list[str]] = [[] for _ in procs]
    try:
        for r in range(ROUNDS):
            ready = [p.stdout.readline().strip() for p in procs]  # type: ignore[union-attr]
            assert ready == [f"ready {r}"] * WORKERS, f"round {r}: workers said {ready}; {_stderr(procs)}"
            go = base / f"go{r}"
            (base / "go.tmp").write_text(repr(time.time() + LEAD))
            (base / "go.tmp").rename(go)
            for i, p in enumerate(procs):
                results[i].append(p.stdout.readline().strip())  # type: ignore[union-attr]
        for p in procs:
            p.wait()
    finally:
        watchdog.cancel()
        for p in procs:
            p.kill()
            p.wait()
    assert not expired, f"the race took over {LIMIT:g} s"
    return results


def _stderr(procs: list[subprocess.Popen[str]]) -> str:
    for p in procs:
        p.kill()
    return " | ".join((p.stderr.read() if p.stderr else "")[-1500:] for p in procs)


@pytest.mark.parametrize("mode", ["local", "home-ledger"])
async def test_four_processes_creating_one_store_at_once_all_save(mode: str, tmp_path: Path, monkeypatch):
    results = _race(mode, tmp_path)
    failed = [line for lines in results for line in lines if not line.startswith("ok ")]
    assert not failed, f"{len(failed)} of {WORKERS * ROUNDS} saves failed: {failed[:4]}"
    assert all(lines == [f"ok {r}" for r in range(ROUNDS)] for lines in results), results

    sessions = [session(w) for w in range(WORKERS)]
    want = expected_ids(sessions)[USER]
    for r in range(ROUNDS):
        where = tmp_path / f"r{r}"
        if mode == "local":
            memory = LongTermMemory(backend_config={"path": str(where / "memory.db")})
        else:
            monkeypatch.setenv("LONGTERM_HOME", str(where / "home"))
            memory = LongTermMemory(backend=ThirdParty(where / "memory.db"))
        async with memory:
            ids = {rec.id async for rec in memory.iter_records(app_name=APP, user_id=USER)}
            assert ids == want, f"round {r}: {len(ids)} of {len(want)} records landed"
            replays = [await memory.add_session_to_memory(s) for s in sessions]
            assert [x.new_events for x in replays] == [0] * WORKERS, f"round {r}: the ledger missed saves: {replays}"
