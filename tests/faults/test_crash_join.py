"""kill -9 in the middle of the one-time join of a store of the previous release (local engine):
the next open ends in the same state a join never killed reaches, nothing saved twice, nothing
erased brought back, nothing lost.

The seam: ``_joiner.py`` opens a memory not told its index and stops for good right after the
join's first record write, first ledger session carried, or the source's erase (before the
marker); the test SIGKILLs it there and opens the store again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory
from tests.contract.test_join_on_open import ALICE_S1, ALICE_S2, ALICE_S3, old_store, rows
from tests.faults.conftest import ROOT, helper

JOINED = {
    ("travel", "travel", "alice"): 3,
    ("default_app", "travel", "bob"): 1,
    ("default_app", "shop", "carol"): 1,
}


def _killed_after(config: dict[str, Any], step: str, log: Path) -> None:
    with open(log, "a", encoding="utf-8") as err:
        proc = subprocess.Popen(
            helper("_joiner", json.dumps(config), step), cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line == f"{step} done":
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, f"not killed after {step}: {line!r} {log.read_text()[-2000:]}"


@pytest.mark.parametrize("provider_id", ["local"])
@pytest.mark.parametrize("step", ["upsert", "mark_saved", "delete"])
def test_a_join_killed_at_any_step_ends_as_one_never_killed(
    backend_config: dict[str, Any], step: str, tmp_path: Path
) -> None:
    old_store("local", backend_config)
    _killed_after(backend_config, step, tmp_path / "joiner.log")
    with LongTermMemory(backend="local", backend_config=backend_config) as memory:
        assert rows(memory) == JOINED
        for session in (ALICE_S1, ALICE_S2, ALICE_S3):
            assert memory.add_session_to_memory_sync(session).saved == 0
        found = memory.search_memory_sync(app_name="travel", user_id="alice", query="PIN 4471").memories
        assert not [m for m in found if "PIN" in m.content.parts[0].text]
