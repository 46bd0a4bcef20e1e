"""Run as a process by test_disk_full, in a mount namespace of its own where it can: mount
a 2 MB tmpfs, fill it but 256 KB, save into a local store on it until a save fails, free
space, save again; write what a user would have seen as JSON for the test to judge.

Usage: python -m tests.faults._disk_full MOUNTPOINT REPORT_JSON
Exit status 4 (and ``{"mount": <error>}``) when the tmpfs cannot be mounted here.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from longterm import LongTermMemory, LongTermMemoryError, Scope
from tests.faults.conftest import APP, expected_ids, import_sessions

NO_MOUNT = 4
#: Sessions tried at most; together they need several times the file system's size.
MAX_SESSIONS = 400
#: Left free after filling: a few saves still fit, then one does not.
HEADROOM = 256 * 1024


def fill(path: Path) -> None:
    """Write ``path`` until the file system has no byte left."""
    with open(path, "wb", buffering=0) as f:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise


async def scenario(root: Path) -> dict[str, Any]:
    sessions = import_sessions(MAX_SESSIONS, 20)
    report: dict[str, Any] = {}
    async with LongTermMemory(backend_config={"path": str(root / "store" / "memory.db")}) as memory:
        for s in sessions[:3]:
            await memory.add_session_to_memory(s)
        filler = root / "filler"
        fill(filler)
        os.truncate(filler, filler.stat().st_size - HEADROOM)
        failing: dict[str, Any] | None = None
        saved: list[dict[str, Any]] = sessions[:3]
        for s in sessions[3:]:
            try:
                await memory.add_session_to_memory(s)
            except Exception as exc:
                failing = s
                report["error"] = {
                    "type": type(exc).__name__,
                    "ours": isinstance(exc, LongTermMemoryError),
                    "message": str(exc),
                }
                break
            saved.append(s)
        if failing is None:
            return {"never_full": len(saved)}
        scope = Scope(app_name=APP, user_id=failing["user_id"])
        report["ledger_after_failure"] = sorted(await memory.backend_instance.saved(scope, failing["id"]))
        report["count_after_failure"] = await memory.count(app_name=APP, user_id=failing["user_id"])
        report["count_before_failure"] = len(expected_ids(saved).get(failing["user_id"], ()))
        filler.unlink()
        retry = await memory.add_session_to_memory(failing)
        report["retry"] = {"new_events": retry.new_events, "saved": retry.saved}
        report["kept"] = len(expected_ids([failing])[failing["user_id"]])
        done = saved + [failing]
        report["expected_counts"] = {u: len(v) for u, v in sorted(expected_ids(done).items())}
        report["counts"] = {u: await memory.count(app_name=APP, user_id=u) for u in report["expected_counts"]}
        replays = [await memory.add_session_to_memory(s) for s in done]
        report["replayed_new_events"] = sum(r.new_events for r in replays)
    return report


def main() -> None:
    root, out = Path(sys.argv[1]), Path(sys.argv[2])
    root.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(root)], capture_output=True, text=True
    )
    if mount.returncode != 0:
        out.write_text(json.dumps({"mount": (mount.stderr or mount.stdout).strip()}))
        sys.exit(NO_MOUNT)
    try:
        out.write_text(json.dumps(asyncio.run(scenario(root))))
    finally:
        subprocess.run(["umount", "-l", str(root)], check=True)


if __name__ == "__main__":
    main()
