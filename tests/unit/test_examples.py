"""Every file of examples/ runs as a user would run it, offline, and prints what a person reads:
the recalled text, never a repr. A new example needs a line in ``EXPECTED`` (the test says so)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from longterm.cli import cli
from tests.docs.programs import run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: What each program prints that a person reads (every line here must be in its output).
EXPECTED = {
    "quickstart.py": ["saved 3 new memories of 3 new events", "1.00  My flight to Bangkok leaves on March 3rd."],
    "cross_session.py": [
        "session 1, agent: ok",
        "session 2 > recalled from memory: I'm allergic to shellfish and I prefer window seats.",
    ],
    "veadk_cross_session.py": ["Session 2 -> recalled: 记一下：我对花生过敏，而且我是素食者。"],
    "facts.py": [
        "- The user lives in Lisbon",
        "history: The user lives in Porto (until 2023-11-15T22:13:20+00:00) -> The user lives in Lisbon (until now)",
        "100 events, after each save: 10 model calls",
    ],
    "dict_backend.py": ["saved 1 of 1 new events", "found: I moved to Lisbon last spring"],
    "adk_services.py": ["-> LongTermMemoryService on local", "session 2 > recalled: I'm allergic to shellfish"],
    "openai_agents_memory.py": [
        "run 1 saved again: 0 new memories",
        "run 2 > load_memory found: I'm allergic to shellfish",
        "run 2 > instructions end with: - I'm allergic to shellfish",
    ],
    "pydantic_ai_memory.py": [
        "run 1 > Noted! (saved 1, then again 0)",
        "run 2 > You told me: I'm allergic to shellfish",
        "bob   > I don't know yet.",
    ],
    "langgraph_store.py": [
        "thread 1 > Noted!",
        "thread 2 > You told me: I'm allergic to shellfish",
        "bob      > I don't know yet.",
        "langmem  > True",
    ],
}
#: What a repr looks like in the output; a person reads text.
REPRS = ("MemoryEntry(", "Content(", "Part(", "Memory(id=", "SaveResult(", "object at 0x", '{"result"')


def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LONGTERM_", "DATABASE_", "MODEL_EMBEDDING_"))}
    env["LONGTERM_HOME"] = str(tmp_path / "home")
    return env


def run_example(name: str, tmp_path: Path, *, fresh: bool = False) -> str:
    return run(EXAMPLES / name, cwd=tmp_path, env=environment(tmp_path), timeout=120, fresh=fresh).check(name)


def test_every_example_is_tested() -> None:
    programs = sorted(p.name for p in EXAMPLES.iterdir() if p.suffix == ".py")
    assert programs == sorted(EXPECTED), "add the example to EXPECTED"
    assert sorted(p.name for p in EXAMPLES.iterdir() if p.suffix != ".py") == ["mcp_servers.json"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_prints_what_a_person_reads(name: str, tmp_path: Path) -> None:
    out = run_example(name, tmp_path)
    for line in EXPECTED[name]:
        assert line in out, f"{name} did not print {line!r}:\n{out}"
    for repr_of in REPRS:
        assert repr_of not in out, f"{name} prints a repr ({repr_of}):\n{out}"


def test_quickstart_as_python_runs_it_and_a_second_run_writes_nothing(tmp_path: Path) -> None:
    """`python examples/quickstart.py` in a new interpreter, twice, in one directory."""
    first = run_example("quickstart.py", tmp_path, fresh=True)
    assert "saved 3 new memories of 3 new events" in first and "Bangkok leaves on March 3rd" in first
    again = run_example("quickstart.py", tmp_path)
    assert "saved 0 new memories of 0 new events" in again


def test_mcp_servers_json_starts_real_commands() -> None:
    """Each stdio server of the client configuration is a `longterm` command whose options parse."""
    servers = json.loads((EXAMPLES / "mcp_servers.json").read_text(encoding="utf-8"))["mcpServers"]
    stdio = [s for s in servers.values() if "command" in s]
    assert stdio and any(s.get("type") == "http" for s in servers.values())
    for server in stdio:
        assert server["command"] == "longterm"
        with cli.make_context("longterm", list(server["args"])) as ctx, warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # protected_args: click 8's name for it
            name, *rest = ctx.protected_args + ctx.args
            command = cli.get_command(ctx, name)
            assert command is not None, name
            command.make_context(name, rest, parent=ctx)  # raises on an unknown or missing option
    assert CliRunner().invoke(cli, ["mcp", "--help"]).exit_code == 0
