"""The ``longterm`` command at its edges, as a new user's walkthrough met them: a configuration the
engine refuses, a migrate onto the store itself, an erase where no store is, a file that cannot be
read or written, a store path that is no store, and the page that says what ``--help`` says.

Each failure is one ``error:`` line naming what is wrong and what to do (exit 1), never a
traceback nor click's usage text; what finds nothing creates nothing.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from longterm import LongTermMemory
from longterm.cli import cli
from longterm.testing import make_session

ROOT = Path(__file__).resolve().parents[2]
AU = ("--app", "a", "--user", "u")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def one_error(r: Result) -> str:
    """The one line a failure prints (exit 1, no usage text, no traceback)."""
    assert r.exit_code == 1, r.output
    assert "Usage:" not in r.output and "Traceback" not in r.output, r.output
    [line] = r.stderr.splitlines()
    assert line.startswith("error: ") and "internal error" not in line, line
    return line


def saved(path: Path, text: str = "I keep bees") -> str:
    """A local store at ``path`` holding one memory of (a, u) in index a; its ``--config``."""
    memory = LongTermMemory(backend_config={"path": str(path)}, app_name="a")
    memory.add_session_to_memory_sync(make_session("s1", app="a", user="u", turns=[("user", text)]))
    memory.close_sync()
    return json.dumps({"path": str(path)})


def count(path: Path) -> int:
    memory = LongTermMemory(backend_config={"path": str(path)}, app_name="a")
    try:
        return memory.count_sync(app_name="a", user_id="u")
    finally:
        memory.close_sync()


def test_a_config_the_engine_refuses_is_its_one_line_for_every_command(tmp_path: Path):
    """Before, stats, search, export, reembed, migrate and ui printed "internal error: TypeError:
    expected str, bytes or os.PathLike object, not int"; import and delete the engine's line."""
    bad = json.dumps({"path": 5})
    commands = [
        ["stats"],
        ["search", "bees", *AU],
        ["export", *AU],
        ["reembed"],
        ["delete", *AU, "--yes"],
        ["update", *AU, "--id", "x", "--text", "y"],
        ["migrate", "--to-backend", "local", "--to-config", json.dumps({"path": str(tmp_path / "t.db")})],
        ["ui", "--port", "0"],
    ]
    for args in commands:
        assert "'path': Input should be a valid string" in one_error(run("--config", bad, *args)), args
    r = run("--config", bad, "doctor")  # its table names the problem
    assert r.exit_code == 1 and "internal error" not in r.output and "Traceback" not in r.output, r.output
    assert r.stdout.startswith("store: local (not opened: the configuration is invalid)")
    r = run("--config", bad, "doctor", "--json")
    [row] = [row for row in json.loads(r.stdout) if row["check"] == "configuration"]
    assert row["status"] == "fail" and "'path': Input should be a valid string" in row["found"]
    assert not (tmp_path / "t.db").exists()


def test_migrate_onto_the_store_itself_is_refused(tmp_path: Path, _home: Path, monkeypatch: pytest.MonkeyPatch):
    """It copied every record onto itself and said "copied 1 memories"; another path stays a copy."""
    store = tmp_path / "m.db"
    config = saved(store)
    monkeypatch.chdir(tmp_path)
    for target in ({"path": str(store)}, {"path": "./sub/../m.db"}):
        line = one_error(run("--config", config, "migrate", "--to-backend", "local", "--to-config", json.dumps(target)))
        assert line.startswith("error: the target is the store itself") and str(store) in line, line
    saved(_home / "memory.db")  # the default store, named by neither side
    assert one_error(run("migrate", "--to-backend", "local")).startswith("error: the target is the store itself")
    r = run("--config", config, "migrate", "--to-backend", "local", "--to-config", json.dumps({"path": "copy.db"}))
    assert r.exit_code == 0 and "copied 1 memories" in r.output, r.output
    assert count(store) == count(tmp_path / "copy.db") == 1


def test_a_migrate_that_fails_before_its_first_bar_prints_nothing_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Its error line came after an empty line on stdout: the progress display, started with no bar."""
    from longterm.errors import BackendUnavailableError

    config = saved(tmp_path / "m.db")
    r = run("--config", config, "migrate", "--to-backend", "nosuch")
    assert "unknown backend 'nosuch'" in one_error(r) and r.stdout == "", repr(r.stdout)

    async def down(self: LongTermMemory, **kwargs: object) -> list[tuple[str, str, int]]:
        raise BackendUnavailableError("the store went away")

    monkeypatch.setattr(LongTermMemory, "scopes", down)
    target = json.dumps({"path": str(tmp_path / "t.db")})
    r = run("--config", config, "migrate", "--to-backend", "local", "--to-config", target)
    assert "the store went away" in one_error(r) and r.stdout == "", repr(r.stdout)


def test_an_erase_or_an_update_where_no_store_is_creates_none(_home: Path):
    """``delete --yes`` made ./.longterm/memory.db to say "deleted 0 memories"; so did --expired,
    ``update``, ``migrate --app --user`` (its source) and ``facts``."""
    commands = [
        ["delete", *AU, "--yes"],
        ["delete", *AU, "--session", "s", "--yes"],
        ["delete", *AU, "--expired"],
        ["update", *AU, "--id", "x", "--text", "y"],
        ["migrate", "--to-backend", "local", "--to-config", json.dumps({"path": str(_home / "t.db")}), *AU],
        ["facts", "--base-url", "http://127.0.0.1:9", "--model", "m", "list", *AU],
    ]
    for args in commands:
        assert one_error(run(*args)).startswith(f"error: no store at {_home / 'memory.db'}"), args
        assert not _home.exists(), args


def test_a_file_that_cannot_be_read_or_written_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``export -o DIR`` and ``demo --path DIR`` printed click's usage text (exit 2); ``import`` of a
    directory or an unreadable file said "[Errno 21] Is a directory" without what to do."""
    folder = tmp_path / "folder"
    folder.mkdir()
    config = saved(tmp_path / "m.db")
    line = one_error(run("--config", config, "export", *AU, "-o", str(folder)))
    assert f"-o {folder} is a directory" in line and "name a file" in line
    line = one_error(run("--config", config, "export", *AU, "-o", str(tmp_path / "no" / "x.jsonl")))
    assert "its directory does not exist" in line
    line = one_error(run("demo", "--path", str(folder)))
    assert f"{folder} is a directory" in line and str(folder / "memory.db") in line
    line = one_error(run("--config", config, "import", str(folder), *AU))
    assert f"{folder} is a directory, not a transcript" in line and f"{folder}/*.jsonl" in line
    locked = tmp_path / "locked.jsonl"
    locked.write_text(json.dumps({"role": "user", "content": "x"}) + "\n")
    real_open = os.open

    def refusing(path, flags, *args, **kwargs):  # mode 000 as a user that is not root
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(locked))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    line = one_error(run("--config", config, "import", str(locked), *AU))
    assert f"cannot read {locked}: permission denied" in line and "chmod u+r" in line
    assert count(tmp_path / "m.db") == 1


def test_a_store_path_that_is_no_store_is_one_line_without_a_chmod_warning(tmp_path: Path):
    """A directory was told `chmod 600 DIR` (locking it) and then "unable to open database file";
    a transcript given as the store was told to be made owner-only before "file is not a database"."""
    folder = tmp_path / "w6"
    folder.mkdir(mode=0o755)
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"role": "user", "content": "hi"}) + "\n")
    chat.chmod(0o644)
    for store in (["--config", json.dumps({"path": str(folder)})], ["--uri", f"longterm://{chat}"]):
        for args in (["stats"], ["import", str(chat), *AU]):
            line = one_error(run(*store, *args))
            assert "chmod" not in line, line
            if store[0] == "--config":
                assert f"{folder} is a directory" in line and str(folder / "memory.db") in line
            else:
                assert f"{chat} is not a longterm store (not an SQLite database)" in line
    target = json.dumps({"path": str(chat)})
    line = one_error(
        run("--config", saved(tmp_path / "m.db"), "migrate", "--to-backend", "local", "--to-config", target)
    )
    assert line.startswith("error: the target:") and "--to-config" in line
    assert chat.read_text() == json.dumps({"role": "user", "content": "hi"}) + "\n"
    assert oct(chat.stat().st_mode & 0o777) == oct(0o644) and list(folder.iterdir()) == []


def _table(heading: str) -> dict[str, str]:
    """The rows of the table under ``heading`` in docs/cli.md, by the name their first cell starts with."""
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {re.match(r"\| `([\w-]+)", row).group(1): row for row in rows}  # type: ignore[union-attr]


def _long_options(command: click.Command) -> set[str]:
    names = {n for p in command.params if isinstance(p, click.Option) for n in p.opts if n.startswith("--")}
    return names - {"--help"}


def test_the_page_lists_what_help_lists():
    """docs/cli.md says `--help` says the same: every command, each of its options (and a group's
    subcommands), and every option of the root, in its tables."""
    rows = _table("Commands")
    assert set(rows) == set(cli.commands), set(cli.commands) ^ set(rows)
    for name, command in cli.commands.items():
        named = set(re.findall(r"(?<![\w-])(--[\w-]+|[a-z]+)(?![\w-])", rows[name]))
        missing = _long_options(command) - named
        if isinstance(command, click.Group):
            missing |= set(command.commands) - named
        assert not missing, f"{name}: {sorted(missing)}"
    options = " ".join(_table("Options every command takes").values())
    assert not {o for o in _long_options(cli) - {"--version"} if f"`{o}" not in options}
