"""One name, one thing (issue 41): an app's users in one index whatever opened them, a name in
any Unicode form one person, a time with a zone, a command line that forgives.

README's quick start and "one store" blocks run in one directory: ``LongTermMemory(app_name=
"travel")`` and ``LongTermMemory()`` used with ``app_name="travel"`` wrote two indices, and the
CLI then stopped with "has memories in 2 indices". The rule now (``memory.routing.RULE``): a
memory not told an index finds (app, user) where it lives, and puts a new one in the app's own
index.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import unicodedata
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from longterm import LongTermMemory
from longterm.cli import cli
from longterm.errors import InvalidInputError
from longterm.testing import make_session
from tests.earlier import earlier_release
from tests.mcp.conftest import ok, texts

BIN = Path(sys.executable).parent
SECONDS = 120


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def stats_rows(*args: str) -> dict[tuple[str, str, str], int]:
    code, out = run(*args, "stats", "--json")
    assert code == 0, out
    return {(r["index"], r["app"], r["user"]): r["memories"] for r in json.loads(out)}


async def test_the_readme_blocks_in_one_directory_share_one_index(tmp_path: Path, _home: Path) -> None:
    """Block 1 opens the memory with app_name, block 2 without; the CLI, export and the MCP
    server then see one index and one row per (app, user)."""
    with LongTermMemory(app_name="travel") as first:
        first.add_sync("My passport expires in August 2027", user_id="alice")
    second = LongTermMemory()
    assert second.index == "default_app" and LongTermMemory(app_name="app").index == "app"
    hits = await second.search_memory(app_name="travel", user_id="alice", query="passport")
    assert [m.content.parts[0].text for m in hits.memories] == ["My passport expires in August 2027"]
    await second.add_session_to_memory(make_session("s1", app="travel", user="bob", turns=[("user", "I fly to Oslo")]))
    assert (await second.located("travel", "bob")).index == "travel"  # a new user: the app's own index
    await second.close()

    in_thread = anyio.to_thread.run_sync  # the CLI runs its own event loop
    assert await in_thread(stats_rows) == {("travel", "travel", "alice"): 1, ("travel", "travel", "bob"): 1}
    for user, word in (("alice", "passport"), ("bob", "Oslo")):
        code, out = await in_thread(run, "search", word, "--app", "travel", "--user", user, "--json")
        assert code == 0 and word in out, out
    code, out = await in_thread(run, "export", "--app", "travel", "--user", "bob")
    assert code == 0 and len(out.splitlines()) == 1 and "Oslo" in out

    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")} | {"LONGTERM_HOME": str(_home)}
    args = ["mcp", "--app", "travel", "--user", "alice"]
    params = StdioServerParameters(command=str(BIN / "longterm"), args=args, env=env, cwd=str(tmp_path))
    with open(tmp_path / "mcp-stderr.log", "w", encoding="utf-8") as errlog:
        with anyio.fail_after(SECONDS):
            async with Client(stdio_client(params, errlog=errlog)) as client:
                assert "passport" in " ".join(texts(await ok(client, "search_memory", {"query": "passport"})))
                await ok(client, "save_memory", {"text": "I keep a spare key under the mat"})
    assert (await in_thread(stats_rows))[("travel", "travel", "alice")] == 2  # the server wrote where the API reads


def test_an_import_is_found_by_every_memory_of_the_store(tmp_path: Path, _home: Path) -> None:
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "my passport number ends in 4471"}) + "\n")
    code, out = run("import", str(transcript), "--app", "chat", "--user", "alice")
    assert code == 0, out
    for memory in (LongTermMemory(), LongTermMemory(app_name="chat"), LongTermMemory(app_name="other")):
        with memory:
            assert memory.count_sync(app_name="chat", user_id="alice") == 1
            found = memory.search_memory_sync(app_name="chat", user_id="alice", query="passport")
            assert len(found.memories) == 1


def test_a_user_in_an_index_named_on_purpose_is_found_there(tmp_path: Path, _home: Path) -> None:
    with LongTermMemory(index="shared") as named:
        named.add_session_to_memory_sync(make_session("s", app="shop", user="carol", turns=[("user", "tea")]))
    with LongTermMemory() as memory:
        assert memory.count_sync(app_name="shop", user_id="carol") == 1
        assert memory.located_sync("shop", "carol").index == "shared"


def test_names_compare_in_nfc_and_nothing_else_is_folded(tmp_path: Path, _home: Path) -> None:
    nfc, nfd = "Jos\u00e9", "Jose\u0301"
    assert nfc != nfd and unicodedata.normalize("NFC", nfd) == nfc
    with LongTermMemory(app_name="caf\u00e9") as memory:
        memory.add_session_to_memory_sync(make_session("s\u00e9", app="cafe\u0301", user=nfd, turns=[("user", "figs")]))
        assert memory.count_sync(app_name="caf\u00e9", user_id=nfc) == 1
        assert memory.search_memory_sync(app_name="cafe\u0301", user_id=nfc, query="figs").memories
        for other in ("\ufb01le", "JOS\u00c9", "jos\u00e9"):  # ligature, case: other people
            assert memory.count_sync(app_name="caf\u00e9", user_id=other) == 0
        assert memory.delete_memory_sync(app_name="caf\u00e9", user_id=nfc, session_id="se\u0301") == 1
    assert stats_rows() == {}


def test_a_naive_datetime_is_refused_and_an_iso_string_without_offset_is_utc(tmp_path: Path, _home: Path) -> None:
    naive = datetime(2024, 5, 1, 12, 0)
    with LongTermMemory() as memory:
        with pytest.raises(InvalidInputError, match="no timezone"):
            memory.search_sync("x", user_id="u", now=naive)
        with pytest.raises(InvalidInputError, match="no timezone"):
            memory.add_sync([{"role": "user", "content": "x", "timestamp": naive}], user_id="u")
        with pytest.raises(InvalidInputError, match="no timezone"):
            memory.portal.call(memory.list_facts(app_name="a", user_id="u", as_of=naive))
        memory.add_sync([{"role": "user", "content": "tea", "timestamp": "2024-05-01T12:00:00"}], user_id="u")
        [m] = memory.get_all_sync(user_id="u").memories
        aware = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
        assert m.timestamp == aware


def test_root_options_are_read_after_the_command_too(tmp_path: Path, _home: Path) -> None:
    config = json.dumps({"path": str(tmp_path / "m.db")})
    with LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, index="x") as memory:
        memory.add_session_to_memory_sync(make_session("s", app="a", user="u", turns=[("user", "plums")]))
    code, out = run("search", "plums", "--app", "a", "--user", "u", "--config", config, "--index", "x")
    assert code == 0 and "plums" in out, out
    code, out = run("--config", config, "search", "plums", "--app", "a", "--user", "u", "--index=x")
    assert code == 0 and "plums" in out, out
    code, out = run("stats", "--config", config, "--index", "nope")
    assert code == 1 and "index 'nope' is not in this store; its indices: 'x'" in out, out


@pytest.mark.parametrize("command", [["search", "q", "--app", "a", "--user", "u"], ["stats"], ["doctor"], ["ui"]])
def test_a_read_only_command_in_an_empty_directory_creates_nothing(tmp_path: Path, command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")} | {"HOME": str(tmp_path)}
    out = subprocess.run(
        [str(BIN / "longterm"), *command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SECONDS
    )
    assert out.returncode == 1 and out.stderr.startswith("error: no store at "), out.stderr
    assert str(tmp_path / ".longterm" / "memory.db") in out.stderr and "Traceback" not in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_stats_and_doctor_say_which_store_first(tmp_path: Path, _home: Path) -> None:
    with LongTermMemory(app_name="a") as memory:
        memory.add_sync("plums", user_id="u")
    for command in ("stats", "doctor"):
        code, out = run(command)
        assert code == 0 and out.splitlines()[0] == f"store: local at {_home / 'memory.db'}", out


def test_a_port_in_use_is_one_line_naming_it_and_the_servers_default_to_two_ports(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")}
        env |= {"LONGTERM_HOME": str(tmp_path)}
        LongTermMemory(backend_config={"path": str(tmp_path / "memory.db")}).add_sync("x", user_id="u")
        tokens = tmp_path / "tokens.json"
        tokens.write_text(json.dumps({"tokens": [{"user": "u", "token": "a-token-of-32-characters-or-more-xx"}]}))
        for command in (["ui"], ["mcp", "--transport", "http", "--app", "a", "--tokens", str(tokens)]):
            out = subprocess.run(
                [str(BIN / "longterm"), *command, "--port", str(port)],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=SECONDS,
            )
            assert out.returncode == 1, out.stderr
            lines = out.stderr.strip().splitlines()
            assert lines[-1] == (
                f"error: port {port} on 127.0.0.1 is in use (another server, or another longterm ui or mcp); "
                "pass --port with a free one, or --port 0 to let the system pick."
            ), out.stderr
    defaults = {name: next(p.default for p in cli.commands[name].params if p.name == "port") for name in ("ui", "mcp")}
    assert defaults["ui"] != defaults["mcp"]


def test_the_cli_joins_a_store_an_earlier_release_split_instead_of_stopping(tmp_path: Path, _home: Path) -> None:
    """A store of an earlier release holds alice in two indices (README's two blocks did that).
    ``longterm search`` without ``--index`` used to stop with "has memories in 2 indices"; it now
    joins the store once (``locate.join_store``) and answers from one index, and ``stats`` shows
    one row for her."""
    config = json.dumps({"path": str(tmp_path / "old.db")})
    for index, text in (("travel", "my passport expires in August"), ("default_app", "my visa is for Norway")):
        with (
            earlier_release(),
            LongTermMemory(app_name="travel", backend_config=json.loads(config), index=index) as old,
        ):
            old.add_sync(text, user_id="alice")
            assert old.count_sync(app_name="travel", user_id="alice") == 1  # one memory in each of two indices
    code, out = run("--config", config, "search", "passport visa", "--app", "travel", "--user", "alice")
    assert code == 0, out
    assert "passport" in out and "visa" in out
    assert stats_rows("--config", config) == {("travel", "travel", "alice"): 2}


def test_a_user_an_application_splits_on_purpose_stays_split(tmp_path: Path, _home: Path) -> None:
    """Memories told their index (``index="i1"``, ``"i2"``) put one user in two indices of a new
    store on purpose; a memory not told its index, and ``longterm stats``, used to join them
    into one (the join is for an earlier release's stores). A new index in a store an earlier
    release split is left unmarked, so that store is still joined."""
    config = {"path": str(tmp_path / "m.db")}
    for index, text in (("i1", "one"), ("i2", "two")):
        with LongTermMemory(app_name="a", backend_config=config, index=index) as pinned:
            pinned.add_sync(text, user_id="u")
    with LongTermMemory(app_name="other", backend_config=config) as plain:
        plain.search_sync("x", user_id="z")
    assert stats_rows("--config", json.dumps(config)) == {("i1", "a", "u"): 1, ("i2", "a", "u"): 1}
    for index, text in (("i1", "one"), ("i2", "two")):
        with LongTermMemory(app_name="a", backend_config=config, index=index) as pinned:
            assert [m.text for m in pinned.get_all_sync(user_id="u").memories] == [text]

    old = {"path": str(tmp_path / "old.db")}
    for index, text in (("travel", "my passport expires in August"), ("default_app", "my visa is for Norway")):
        with earlier_release(), LongTermMemory(app_name="travel", backend_config=old, index=index) as memory:
            memory.add_sync(text, user_id="alice")
    with LongTermMemory(app_name="shop", backend_config=old, index="shop") as pinned:  # a new index
        pinned.add_sync("I buy green tea", user_id="carol")
    assert stats_rows("--config", json.dumps(old)) == {("travel", "travel", "alice"): 2, ("shop", "shop", "carol"): 1}


def test_a_search_on_an_embedded_store_makes_no_index_it_does_not_read(tmp_path: Path, _home: Path) -> None:
    """``longterm search`` without ``--index`` on an embedded Qdrant store reads the user's index
    only: it used to open a memory not told an index to join the store, whose own index
    (``default_app``) the edge engine then created on disk."""
    store = tmp_path / "store"
    with LongTermMemory(backend="qdrant", backend_config={"path": str(store)}, app_name="travel") as memory:
        memory.add_sync("my passport expires in August", user_id="alice")
    config = json.dumps({"path": str(store)})
    code, out = run(
        "--backend", "qdrant", "--config", config, "search", "passport", "--app", "travel", "--user", "alice"
    )
    assert code == 0 and "passport" in out, out
    assert sorted(p.name for p in store.iterdir()) == ["travel"]


def test_an_app_or_index_name_typed_decomposed_is_the_one_typed_composed(tmp_path: Path) -> None:
    """An NFD ``app_name`` saved into the NFC index while the memory kept the NFD name, so its
    ``scopes()`` found nothing; ``index=`` in NFD and NFC made two indices ``stats`` showed alike."""
    config = {"path": str(tmp_path / "m.db")}
    nfd = unicodedata.normalize("NFD", "José")
    with LongTermMemory(app_name=nfd, backend_config=config) as memory:
        memory.add_sync("jazz", user_id="u")
        assert memory.app_name == memory.index == "José"
        assert memory.scopes_sync() == [("José", "u", 1)]
    with LongTermMemory(index=unicodedata.normalize("NFD", "Café"), backend_config=config) as memory:
        memory.add_sync("tea", user_id="u")
    with LongTermMemory(backend_config={**config, "index": "Café"}) as memory:
        assert [m.text for m in memory.get_all_sync(user_id="u").memories] == ["tea"]
        assert memory.indices_sync() == ["Café", "José"]
