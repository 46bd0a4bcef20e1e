"""``longterm mcp`` over stdio, as an assistant starts it: every tool round-trips on a local
store, the scope is the command line's whatever the model sends, hostile arguments are tool
errors, and the command refuses a configuration that names no user."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from longterm import LongTermMemory
from longterm.cli import cli
from tests.conftest import make_session
from tests.mcp.conftest import call, local, ok, refused, server_env, stdio, texts
from tests.pipes import PipeLines

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"search_memory", "save_memory", "delete_memory", "erase_session", "list_memories"}


async def seed(path: Path, *sessions: dict) -> None:
    """Save sessions into the local store at ``path`` the way an agent would, then close it."""
    memory = LongTermMemory(backend="local", backend_config={"path": str(path)})
    try:
        for s in sessions:
            assert (await memory.add_session_to_memory(s, auto_save_memory_policy="all")).saved
    finally:
        await memory.close()


async def test_every_tool_round_trips(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    trip = make_session("trip", app="app", user="alice", turns=[("user", "We fly to Lisbon in May"), ("user", "x")])
    await seed(store, trip)
    async with stdio(tmp_path, "--app", "app", "--user", "alice", backend_args=local(store)) as client:
        listed = await client.list_tools()
        names = {t.name for t in listed.tools}
        assert names == TOOLS | ({"get_user_profile"} if hasattr(LongTermMemory, "get_user_profile") else set())
        for tool in listed.tools:
            assert tool.description and len(tool.description) > 40, tool.name
            assert not {"app", "app_name", "user", "user_id"} & set(tool.input_schema.get("properties", {}))

        saved = await ok(
            client, "save_memory", {"text": "The user is allergic to peanuts", "metadata": {"topic": "health"}}
        )
        again = await ok(
            client, "save_memory", {"text": "The user is allergic to peanuts", "metadata": {"topic": "health"}}
        )
        assert again["id"] == saved["id"]  # the same memory saved twice is one memory

        [hit] = (await ok(client, "search_memory", {"query": "peanuts allergy", "top_k": 3}))["memories"]
        assert hit["id"] == saved["id"] and hit["text"] == "The user is allergic to peanuts"
        assert hit["timestamp"].startswith("20") and isinstance(hit["score"], float)
        assert hit["metadata"]["topic"] == "health" and hit["author"] == "user"

        listing = await ok(client, "list_memories", {"limit": 10})
        assert listing["total"] == 3
        assert listing["memories"][0]["id"] == saved["id"]  # newest first: saved now, the trip in 2023
        assert {m["session_id"] for m in listing["memories"]} == {"_direct", "trip"}

        assert (await ok(client, "erase_session", {"session_id": "trip"}))["deleted"] == 2
        assert texts(await ok(client, "search_memory", {"query": "Lisbon"})) == []

        assert (await ok(client, "delete_memory", {"memory_id": saved["id"]}))["deleted"] == 1
        assert "no memory" in await refused(client, "delete_memory", {"memory_id": saved["id"]})
        assert (await ok(client, "list_memories"))["total"] == 0
        if hasattr(LongTermMemory, "get_user_profile"):
            assert "profile" in await ok(client, "get_user_profile")


async def test_the_scope_is_the_command_lines_whatever_the_model_sends(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    await seed(store, make_session("s1", app="app", user="bob", turns=[("user", "Bob's secret is a red door")]))
    memory = LongTermMemory(backend="local", backend_config={"path": str(store)})
    [bob_record] = [r async for r in memory.iter_records(app_name="app", user_id="bob")]
    await memory.close()

    async with stdio(tmp_path, "--app", "app", "--user", "alice", backend_args=local(store)) as client:
        sneaky = {"query": "secret red door", "user_id": "bob", "app_name": "app", "user": "bob"}
        result = await call(client, "search_memory", sneaky)
        assert result.is_error or texts(result.structured_content or {}) == []
        assert texts(await ok(client, "search_memory", {"query": "secret red door"})) == []
        assert (await ok(client, "list_memories"))["total"] == 0
        await refused(client, "delete_memory", {"memory_id": bob_record.id})
        assert (await ok(client, "erase_session", {"session_id": "s1"}))["deleted"] == 0

    async with stdio(tmp_path, "--app", "app", "--user", "bob", backend_args=local(store)) as client:
        assert texts(await ok(client, "search_memory", {"query": "secret red door"})) == ["Bob's secret is a red door"]


HOSTILE = [
    ("delete_memory", {"memory_id": "a\x00b"}),
    ("delete_memory", {"memory_id": ""}),
    ("delete_memory", {"memory_id": "x" * 10_000}),
    ("delete_memory", {"memory_id": 42}),
    ("delete_memory", {}),
    ("erase_session", {"session_id": "\x00"}),
    ("erase_session", {"session_id": ["s1"]}),
    ("search_memory", {"query": 5}),
    ("search_memory", {"query": None}),
    ("search_memory", {"query": "hello", "top_k": -1}),
    ("search_memory", {"query": "hello", "top_k": 0}),
    ("search_memory", {"query": "hello", "top_k": 10**12}),
    ("search_memory", {"query": "hello", "top_k": "5; DROP TABLE memories"}),
    ("search_memory", {"query": "q" * 10_000_000}),
    ("save_memory", {"text": "x" * 1_000_000}),
    ("save_memory", {"text": ""}),
    ("save_memory", {"text": "   \n\t "}),
    ("save_memory", {"text": {"nested": "object"}}),
    ("save_memory", {"text": "fine", "metadata": "not an object"}),
    ("save_memory", {"text": "fine", "metadata": {"blob": "m" * 100_000}}),
    ("list_memories", {"limit": -5}),
    ("list_memories", {"limit": 1.5}),
]


async def test_hostile_arguments_are_tool_errors_and_the_server_goes_on(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    args = ("--app", "app", "--user", "alice", "--embedder", "hashing")  # hybrid search, as the option says
    async with stdio(tmp_path, *args, backend_args=local(store)) as client:
        await ok(client, "save_memory", {"text": "The user's cat is called Miso"})
        for tool, arguments in HOSTILE:
            await refused(client, tool, arguments)
        # Odd but valid text is saved and found, not refused.
        odd = await ok(client, "save_memory", {"text": "emoji \U0001f600 end; quotes \" ' ` and * OR 1=1 --"})
        assert odd["saved"]
        assert texts(await ok(client, "search_memory", {"query": 'OR "1=1" * ` --'})) != []
        [miso] = (await ok(client, "search_memory", {"query": "cat Miso", "top_k": 1}))["memories"]
        assert miso["text"] == "The user's cat is called Miso" and "vector" in miso["arms"]
        assert (await call(client, "no_such_tool")).is_error
    assert "Traceback" not in (tmp_path / "server-stderr.log").read_text()


def test_the_command_refuses_a_server_with_no_scope(tmp_path: Path) -> None:
    runner = CliRunner()
    no_user = runner.invoke(cli, ["mcp", "--app", "app"], env={"LONGTERM_USER": None, "LONGTERM_APP": None})
    assert no_user.exit_code == 2 and "--user" in no_user.output
    no_app = runner.invoke(cli, ["mcp", "--user", "u"], env={"LONGTERM_USER": None, "LONGTERM_APP": None})
    assert no_app.exit_code == 2 and "--app" in no_app.output
    no_tokens = runner.invoke(cli, ["mcp", "--app", "a", "--transport", "http"], env={"LONGTERM_MCP_TOKENS": None})
    assert no_tokens.exit_code == 2 and "--tokens" in no_tokens.output
    user_over_http = runner.invoke(cli, ["mcp", "--app", "a", "--user", "u", "--transport", "http"])
    assert user_over_http.exit_code == 2 and "token" in user_over_http.output

    weak = tmp_path / "weak.json"
    weak.write_text(json.dumps({"tokens": [{"user": "alice", "token": "1234"}]}))
    refused_file = runner.invoke(cli, ["mcp", "--app", "a", "--transport", "http", "--tokens", str(weak)])
    assert refused_file.exit_code == 1 and "at least 16 visible ASCII characters" in refused_file.output
    assert "Traceback" not in refused_file.output


async def test_the_documented_client_configuration_starts_a_working_server(tmp_path: Path) -> None:
    entry = json.loads((ROOT / "examples" / "mcp_servers.json").read_text())["mcpServers"]["longterm"]
    script = Path(sys.executable).parent / entry["command"]  # the console script `pip install` made
    env = server_env(tmp_path / "unused") | {**entry["env"], "HOME": str(tmp_path)}  # ~/.longterm in tmp_path
    params = StdioServerParameters(command=str(script), args=entry["args"], env=env, cwd=str(tmp_path))
    with open(tmp_path / "server-stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await ok(client, "save_memory", {"text": "Configured from the README snippet"})
            assert texts(await ok(client, "search_memory", {"query": "README snippet"})) != []
    assert (tmp_path / ".longterm" / "memory.db").exists()


def test_a_lone_surrogate_or_deep_nesting_gets_an_answer_over_stdio(tmp_path: Path) -> None:
    """A request holding ``"\\ud800"`` (valid JSON, no Unicode) or nested 300 levels is answered,
    and the server goes on; the SDK's own reader dropped such a line and the client waited forever."""
    import subprocess

    from tests.mcp.conftest import command

    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    deep: dict = {"x": 1}
    for _ in range(300):
        deep = {"x": deep}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search_memory", "arguments": {"query": "\ud800"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "save_memory", "arguments": {"text": "t", "metadata": deep}},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "ping"},
    ]
    lines = "".join(json.dumps(r, ensure_ascii=True) + "\n" for r in requests)
    proc = subprocess.Popen(
        command("--app", "app", "--user", "alice", backend_args=local(tmp_path / "m.db")),
        env=server_env(tmp_path / "home"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(lines)
    proc.stdin.flush()
    answers: dict = {}
    output = PipeLines(proc.stdout)  # not select + readline: that misses answers written together
    try:
        while len(answers) < 4:  # no answer within 60 s is the bug: the client would wait forever
            try:
                line = output.next(60)
            except TimeoutError:
                raise AssertionError(f"no answer within 60 s; answered: {sorted(answers)}") from None
            assert line, f"the server closed its output with answers to {sorted(answers)} only"
            message = json.loads(line)
            answers[message.get("id")] = message
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait(60)
    assert answers[2]["result"]["isError"] is True or "memories" in json.dumps(answers[2]["result"])
    assert "result" in answers[3] and "result" in answers[4]


def test_answers_written_together_are_each_read_within_the_deadline() -> None:
    """Answers that reach the pipe together are each read at once, and a missing one is a
    ``TimeoutError``. A ``select`` after a buffered ``readline`` waited for answers the buffer
    already held (the pipe was empty): under load the surrogate test above reported a server
    that stopped answering, when it had answered everything."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b'{"id": 2}\n{"id": 3}\n{"id": 4}\n')  # one chunk; the writer keeps the pipe open
        with open(read_end, encoding="utf-8", closefd=False) as output:
            lines = PipeLines(output)
            assert [json.loads(lines.next(1))["id"] for _ in range(3)] == [2, 3, 4]
            os.write(write_end, b'{"id": 5')
            with pytest.raises(TimeoutError):
                lines.next(0.05)  # half a line is no answer
            os.write(write_end, b'}\n{"id": 6}\n')
            assert [lines.next(1), lines.next(1)] == ['{"id": 5}\n', '{"id": 6}\n']

    finally:
        os.close(read_end)
        os.close(write_end)
