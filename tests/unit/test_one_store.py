"""One store: what ``examples/quickstart.py`` saves, ``longterm search``, ``longterm stats`` and
``longterm mcp`` find from the same directory, each a real process with the user's defaults.

The quick start saves with ``LongTermMemory(app_name="quickstart")``, so into index
``quickstart``; the CLI and the MCP server looked only in the default index and found nothing.
Run with ``LONGTERM_HOME`` unset (``./.longterm``, as a new user has it) and set to one
directory for every process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.mcp.conftest import ok, texts

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
#: What the quick start says (its app, user and texts are fixed; its API may change).
APP, USER = "quickstart", "alice"
THAI = "I'm vegetarian and I love Thai food."
FLIGHT = "My flight to Bangkok leaves on March 3rd."
#: Any one process of this test may take this long before it fails as a hang.
SECONDS = 120


def _env(home: Path | None, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")}
    env |= {"HOME": str(tmp), "COLUMNS": "250", "PYTHONUNBUFFERED": "1"}  # wide: no table cell wrapped
    return env | ({"LONGTERM_HOME": str(home)} if home else {})


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=SECONDS)
    assert out.returncode == 0, f"{cmd[1:]} failed:\n{out.stdout}\n{out.stderr}"
    assert "Traceback" not in out.stderr
    return out.stdout


@pytest.fixture(params=["home unset", "home set"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The directory every process runs in, and their environment."""
    work = tmp_path / "project"
    work.mkdir()
    home = tmp_path / "elsewhere" / "lt-home" if request.param == "home set" else None
    return work, _env(home, tmp_path)


async def test_what_the_quickstart_saves_the_cli_and_mcp_find(where: tuple[Path, dict[str, str]]) -> None:
    work, env = where
    _run([sys.executable, str(ROOT / "examples" / "quickstart.py")], work, env)
    home = Path(env["LONGTERM_HOME"]) if "LONGTERM_HOME" in env else work / ".longterm"
    assert (home / "memory.db").exists()  # the store the example used

    longterm = str(BIN / "longterm")
    found = _run([longterm, "search", "Thai food", "--app", APP, "--user", USER], work, env)
    assert THAI in found, found
    hits = json.loads(_run([longterm, "search", "flight", "--app", APP, "--user", USER, "--json"], work, env))
    assert FLIGHT in [h["content"]["parts"][0]["text"] for h in hits]

    stats = _run([longterm, "stats"], work, env)
    [row] = [line for line in stats.splitlines() if APP in line and USER in line]
    count = int(row.split()[-2])  # │ index │ app │ user │ memories │
    assert count >= 2 and f"total: {count} memories for 1 users" in stats, stats

    params = StdioServerParameters(command=longterm, args=["mcp", "--app", APP, "--user", USER], env=env, cwd=str(work))
    with open(work.parent / "mcp-stderr.log", "w", encoding="utf-8") as errlog:
        with anyio.fail_after(SECONDS):
            async with Client(stdio_client(params, errlog=errlog)) as client:
                assert THAI in texts(await ok(client, "search_memory", {"query": "Thai food"}))
                assert (await ok(client, "list_memories"))["total"] == count
    assert "Traceback" not in (work.parent / "mcp-stderr.log").read_text()
