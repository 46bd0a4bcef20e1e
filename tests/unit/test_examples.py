"""Every example runs as a user would run it, offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_EXAMPLE")}
    env["LONGTERM_HOME"] = str(tmp_path / "home")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_quickstart(tmp_path: Path):
    out = run_example("quickstart.py", tmp_path)
    assert "saved 3 new memories of 3 new events" in out
    assert "Bangkok leaves on March 3rd" in out
    again = run_example("quickstart.py", tmp_path)
    assert "saved 0 new memories of 0 new events" in again


def test_cross_session_offline(tmp_path: Path):
    out = run_example("cross_session.py", tmp_path)
    session2 = [line for line in out.splitlines() if line.startswith("session 2 >")][0]
    assert "allergic to shellfish" in session2 and "window seats" in session2
