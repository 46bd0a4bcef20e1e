"""kill -9 in the middle of an import, then resume: the store ends up exactly right.

The seam: ``_importer.py`` imports 60 sessions of 20 events through ``LongTermMemory``,
four sessions at a time, printing a line per chunk; the test SIGKILLs it a few
milliseconds after a line showed it saved something in this run (so it dies mid-way, also
inside a chunk of concurrent saves), once or five times in a row; a last run finishes.

What a user must see: exactly the records the policy keeps (no duplicate record, no
duplicate text, none lost), after every crash only records of the import, and a complete
ledger (saving any session again saves nothing).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory
from tests.faults.conftest import APP, ROOT, expected_ids, helper, import_sessions

SESSIONS, EVENTS = 100, 20
#: Sessions that must remain when a kill is set off: more than a fast importer can save
#: within the longest delay, so every kill lands mid-way (with 60 sessions and no margin,
#: a store at 15k records/s finished the import between the line and the kill).
MARGIN = 32
#: Longest a single importer run may take before the test kills it and fails.
RUN_LIMIT = 180.0
#: How long after the progress line each crash comes (a chunk takes a few ms): varied, so
#: kills land between chunks and inside them, while sessions remain.
KILL_DELAYS = (0.0, 0.001, 0.003, 0.006, 0.002)


def _run(
    backend: str, config: dict[str, Any], sessions_file: Path, log: Path, *, kill_after: float | None
) -> tuple[int, list[str]]:
    """One importer run; with ``kill_after``, SIGKILL it that many seconds after the first
    chunk that saved records while sessions remain. Returns its exit status and output."""
    cmd = helper("_importer", backend, json.dumps(config), str(sessions_file))
    with open(log, "a", encoding="utf-8") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    expired: list[bool] = []
    watchdog = threading.Timer(RUN_LIMIT, lambda: (expired.append(True), proc.kill()))
    watchdog.start()
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())
            parts = line.split()
            if (
                kill_after is not None
                and parts[0] == "chunk"
                and int(parts[2]) > 0
                and int(parts[1]) <= SESSIONS - MARGIN
            ):
                time.sleep(kill_after)
                os.kill(proc.pid, signal.SIGKILL)
                break
        status = proc.wait()
    finally:
        watchdog.cancel()
        if proc.stdout is not None:
            proc.stdout.close()
    assert not expired, f"the importer took over {RUN_LIMIT:g} s; its stderr: {log.read_text()[-3000:]}"
    return status, lines


async def _records(
    backend: str, config: dict[str, Any], users: list[str]
) -> tuple[list[str], list[str], dict[str, int]]:
    """Every record id and text of the import, and each user's count, read by a new process' memory."""
    ids, texts, counts = [], [], {}
    async with LongTermMemory(backend=backend, backend_config=dict(config)) as memory:
        for user in users:
            counts[user] = await memory.count(app_name=APP, user_id=user)
            async for rec in memory.iter_records(app_name=APP, user_id=user):
                ids.append(rec.id)
                texts.append(rec.text)
    return ids, texts, counts


def _dupes(values: list[str]) -> list[str]:
    return [v for v, n in Counter(values).items() if n > 1][:5]


@pytest.mark.parametrize("kills", [1, 5])
@pytest.mark.parametrize("provider_id", ["local", "qdrant-edge", "redis"])
async def test_an_import_killed_mid_way_resumes_to_exactly_the_kept_events(
    backend_name: str, backend_config: dict[str, Any], tmp_path: Path, kills: int
):
    sessions = import_sessions(SESSIONS, EVENTS)
    want = expected_ids(sessions)
    users = sorted(want)
    total = sum(len(v) for v in want.values())
    every = set().union(*want.values())
    sessions_file = tmp_path / "sessions.json"
    sessions_file.write_text(json.dumps(sessions))
    log = tmp_path / "importer.log"

    for crash, delay in enumerate(KILL_DELAYS[:kills], 1):
        status, lines = _run(backend_name, backend_config, sessions_file, log, kill_after=delay)
        assert status == -signal.SIGKILL and "done" not in lines, (
            f"crash {crash}: the importer was not killed mid-way (status {status}, output {lines[-3:]}); "
            f"stderr: {log.read_text()[-3000:]}"
        )
        ids, texts, counts = await _records(backend_name, backend_config, users)
        assert not _dupes(ids) and not _dupes(texts), f"after crash {crash}: duplicates {_dupes(ids)} {_dupes(texts)}"
        assert set(ids) <= every, f"after crash {crash}: records that are not of the import"
        assert 0 < len(ids) < total, f"after crash {crash}: {len(ids)} of {total} records; the kill was not mid-way"
        assert sum(counts.values()) == len(ids), f"after crash {crash}: count() says {counts}, a scan {len(ids)}"

    status, lines = _run(backend_name, backend_config, sessions_file, log, kill_after=None)
    assert status == 0 and lines[-1:] == ["done"], f"the last run failed ({status}): {log.read_text()[-3000:]}"

    ids, texts, counts = await _records(backend_name, backend_config, users)
    assert not _dupes(ids), f"duplicate record ids: {_dupes(ids)}"
    assert not _dupes(texts), f"duplicate texts: {_dupes(texts)}"
    assert counts == {u: len(want[u]) for u in users}
    assert set(ids) == every and len(ids) == total

    async with LongTermMemory(backend=backend_name, backend_config=dict(backend_config)) as memory:
        replays = [await memory.add_session_to_memory(s) for s in sessions]
    unsaved = [(r.session_id, r.new_events, r.saved) for r in replays if r.new_events or r.saved]
    assert not unsaved, f"sessions whose ledger is incomplete after the crashes (id, new, saved): {unsaved[:5]}"
