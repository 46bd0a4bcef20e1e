"""A full disk: the failing save says so, changes nothing, and succeeds once space is free.

The seam: ``_disk_full.py`` runs the scenario on a 2 MB tmpfs in a process of its own: in a
private mount namespace (``unshare --mount``, so the mount can never outlive it), else in
a user namespace (``unshare --user --map-root-user --mount``, without root), else mounted
directly (and unmounted in a ``finally``). If none of them can mount, the test fails
with every reason: a full disk is never silently untested.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.faults._disk_full import NO_MOUNT
from tests.faults.conftest import ROOT, helper

WAYS = (
    ["unshare", "--mount", "--propagation", "private"],
    ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"],
    [],
)


def _scenario(tmp: Path) -> dict[str, Any]:
    tried = []
    for n, way in enumerate(WAYS):
        report = tmp / f"report{n}.json"
        cmd = way + helper("_disk_full", str(tmp / f"mnt{n}"), str(report))
        try:
            run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        except FileNotFoundError as exc:  # no unshare here
            tried.append(f"{' '.join(way)}: {exc}")
            continue
        if run.returncode == 0:
            return json.loads(report.read_text())
        if run.returncode == NO_MOUNT:
            tried.append(f"{' '.join(way) or 'mount'}: {json.loads(report.read_text())['mount']}")
        elif not report.exists() and run.stderr.startswith("unshare:"):
            tried.append(run.stderr.strip())
        else:
            pytest.fail(f"the disk-full scenario crashed ({run.returncode}): {run.stderr[-4000:]}")
    pytest.fail("cannot mount a small file system here to fill, so a full disk is untested: " + " | ".join(tried))


def test_a_save_on_a_full_disk_fails_clearly_changes_nothing_and_succeeds_after_space_is_freed(tmp_path: Path):
    report = _scenario(tmp_path)
    assert "never_full" not in report, f"{report['never_full']} sessions fitted on 2 MB: the disk never filled"
    error = report["error"]
    assert error["ours"], f"a full disk raised {error['type']}, not a LongTermMemoryError: {error['message']}"
    message = error["message"].lower()
    assert "disk" in message and "full" in message and "free" in message, f"not said, or not what to do: {message}"
    assert report["ledger_after_failure"] == [], "the ledger moved for a save that failed"
    assert report["count_after_failure"] == report["count_before_failure"], "a failed save left records behind"
    assert report["retry"] == {"new_events": 20, "saved": report["kept"]}
    assert report["counts"] == report["expected_counts"]
    assert report["replayed_new_events"] == 0
