"""kill -9 in the middle of a big erase on Redis: nothing of it is found from then on, a save
made after it stays, and the next open (or erase) finishes it.

The seam: ``_eraser.py`` erases a user of 1,500 memories, 500 at a time, slowly; the test
SIGKILLs it after its first batch, so the store is left half erased (checked in Redis itself).
A memory opened before the kill (it never opens the store again) must find nothing of the
user: search, neighbours, count, pages; a memory saved after the kill is found, and survives;
a memory opened afterwards finishes the erase (no record of the user left but the new one).
On the previous main the same search found the 1,000 records the kill left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory, Scope
from tests.faults.conftest import APP, ROOT, helper, import_sessions

GONE, KEPT = "u0", "u1"


def _erase_killed(config: dict[str, Any], log: Path) -> list[str]:
    """Run the eraser and SIGKILL it once a first batch went; its lines."""
    cmd = helper("_eraser", "redis", json.dumps(config), APP, GONE)
    with open(log, "a", encoding="utf-8") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith("batch") and int(line.split()[1]) > 0:
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.wait(timeout=60)
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, f"the eraser was not killed mid-way: {lines} {log.read_text()[-2000:]}"
    return lines


@pytest.mark.asyncio
@pytest.mark.parametrize("provider_id", ["redis"])
async def test_an_erase_killed_midway_hides_everything_and_finishes_later(
    backend_config: dict[str, Any], tmp_path: Path
):
    sessions = import_sessions(30, 100, users=2)  # 15 sessions of 50 kept turns each user
    async with LongTermMemory(backend="redis", backend_config=backend_config, app_name=APP) as loader:
        await loader.add_sessions_to_memory(sessions, concurrency=4)
    scope = Scope(app_name=APP, user_id=GONE)
    opened = LongTermMemory(backend="redis", backend_config=backend_config, app_name=APP)
    try:
        assert await opened.count(app_name=APP, user_id=GONE) == 750  # opened (and prepared) before the erase
        _erase_killed(backend_config, tmp_path / "eraser.log")
        engine: Any = opened.backend_instance
        left = int(engine._r.scard(engine._set(scope)))
        assert 0 < left < 750, f"the kill did not leave the user half erased ({left} of 750 left)"

        # From the erase on, nothing of it: searches, pages, counts, neighbours.
        assert await opened.search("tulips planted", user_id=GONE) == []
        assert (await opened.get_all(user_id=GONE)).memories == []
        assert await opened.count(app_name=APP, user_id=GONE) == 0
        assert len(await opened.search("tulips planted", user_id=KEPT)) > 0

        # A save after the erase stays visible, its neighbours only its own session's.
        new = [("user", "I moved the tulips to the greenhouse"), ("user", "the greenhouse is warm")]
        await opened.add_session_to_memory(
            {
                "id": "after",
                "app_name": APP,
                "user_id": GONE,
                "events": [{"author": "user", "content": t} for _, t in new],
            }
        )
        found = await opened.search("greenhouse tulips", user_id=GONE)
        assert {m.text for m in found} == {t for _, t in new}
        assert await opened.count(app_name=APP, user_id=GONE) == 2

        # Opened again, the store finishes the erase: the old records are gone, the new ones stay.
        async with LongTermMemory(backend="redis", backend_config=backend_config, app_name=APP) as later:
            assert await later.count(app_name=APP, user_id=GONE) == 2
            later_engine: Any = later.backend_instance
            assert int(later_engine._r.scard(later_engine._set(scope))) == 2
            assert not later_engine._r.exists(f"{later_engine.ns}erasing")
            assert {m.text for m in await later.search("greenhouse tulips", user_id=GONE)} == {t for _, t in new}
            assert await later.count(app_name=APP, user_id=KEPT) == 750
    finally:
        await opened.close()
