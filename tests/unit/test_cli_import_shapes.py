"""``longterm import`` of files of every shape a user hands it, and of its own exports.

Valid JSON of an unexpected shape is one ``error:`` line naming the file, the line and the
field (never "internal error"), and ``load_sessions`` raises ``InvalidInputError`` for it;
shapes that say what they mean are imported; a file ``longterm export`` wrote is restored
as it is, so a backup/restore round trip duplicates nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from longterm.cli import cli
from longterm.errors import InvalidInputError
from longterm.transcripts import load_file, load_sessions

AU = ("--app", "a", "--user", "u")


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _one_error_line(r) -> str:
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def _write(tmp_path: Path, name: str, lines: list) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def _memories(*args: str) -> list[dict]:
    r = run(*args, "export", *AU)
    if r.exit_code == 1 and r.output.startswith("error: no store at "):
        return []  # nothing was ever written: not even an empty store
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in r.output.splitlines()]


SESSION = {"id": "s", "app_name": "a", "user_id": "u"}

#: (file name, its lines, what the error line must say): shapes no user means as a conversation.
BAD_SHAPES = [
    ("msgdict.json", [{"messages": {"role": "user", "content": "hi"}, **SESSION}], "'messages' must be a list"),
    ("msgstr.json", [{"messages": ["hello"], **SESSION}], "message 1 is a string; each must be an object"),
    ("listuser.jsonl", [{"role": "user", "content": "hi", "user_id": ["u1"]}], "'user_id' must be a string"),
    ("eventsdict.json", [{"events": {"a": 1}, **SESSION}], "'events' must be a list"),
    ("eventsstr.json", [{"events": "abc", **SESSION}], "'events' must be a list"),
    ("iddict.jsonl", [{"role": "user", "content": "hi", "id": {"x": 1}}], "'id' must be a string"),
    ("namedict.jsonl", [{"role": "user", "content": "hi", "name": {"x": 1}}], "'name' must be a string"),
    ("roledict.jsonl", [{"role": {"x": 1}, "content": "hi"}], "'role' must be a string"),
    ("sessdict.jsonl", [{"role": "user", "content": "hi", "session_id": {"x": 1}}], "'session_id' must be a string"),
    ("parts_int.jsonl", [{"role": "user", "content": [1, 2, 3]}], "content part 1 is a number"),
    ("content_num.jsonl", [{"role": "user", "content": 42}], "'content' must be text, a list of parts"),
    ("tslist.jsonl", [{"role": "user", "content": "hi", "timestamp": []}], "malformed at 'timestamp'"),
    ("partial.json", [{"events": [{"author": "user", "partial": "maybe"}], **SESSION}], "'partial' must be true or"),
    ("mixed.jsonl", [{"messages": [{"role": "user", "content": "hi"}], **SESSION}, [1]], "mixed.jsonl:2: a list"),
    ("scalar.jsonl", [{"role": "user", "content": "hi"}, "hello"], "scalar.jsonl:2: a string; expected an object"),
]


@pytest.mark.parametrize(("name", "lines", "says"), BAD_SHAPES, ids=[s[0] for s in BAD_SHAPES])
def test_a_file_of_an_unexpected_shape_is_one_error_line_naming_it(tmp_path: Path, name, lines, says):
    path = _write(tmp_path, name, lines)
    line = _one_error_line(run("import", str(path), *AU))
    assert says in line and f"{name}:" in line, line
    assert _memories() == []  # checked before anything is written


@pytest.mark.parametrize(("name", "lines", "says"), BAD_SHAPES, ids=[s[0] for s in BAD_SHAPES])
def test_load_sessions_raises_invalid_input_error_for_them(tmp_path: Path, name, lines, says):
    path = _write(tmp_path, name, lines)
    with pytest.raises(InvalidInputError, match=re.escape(says)):
        list(load_sessions(path, app_name="a", user_id="u"))


def test_the_line_of_a_jsonl_file_is_named(tmp_path: Path):
    path = _write(tmp_path, "chat.jsonl", [{"role": "user", "content": "hi"}] * 2 + [{"role": "user", "content": 7}])
    assert "chat.jsonl:3: 'content' must be" in _one_error_line(run("import", str(path), *AU))


def test_config_or_policy_nested_too_deeply_is_one_error_line(tmp_path: Path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    chat = _write(tmp_path, "chat.jsonl", [{"role": "user", "content": "hi"}])
    line = _one_error_line(run("--config", f"@{deep}", "stats"))
    assert line.startswith("error: --config:") and "nested too deeply" in line
    line = _one_error_line(run("import", str(chat), *AU, "--policy", f"@{deep}"))
    assert line.startswith("error: --policy:") and "nested too deeply" in line


def test_shapes_that_say_what_they_mean_are_imported(tmp_path: Path):
    lines = [
        {"role": "user", "content": {"parts": [{"text": "I keep bees"}]}},  # ADK content as a message's content
        {"role": "user", "content": {"parts": "I sail on weekends"}},
        {"role": "user", "content": "I grow figs", "user_id": 42, "session_id": 7},  # integer ids: their digits
        {"role": "user", "content": "I like green tea", "timestamp": "  "},  # a blank time: the import time
    ]
    r = run("import", str(_write(tmp_path, "chat.jsonl", lines)), *AU)
    assert r.exit_code == 0, r.output
    texts = {m["text"]: m for m in _memories()}
    assert set(texts) == {"I keep bees", "I sail on weekends", "I like green tea"}
    assert texts["I like green tea"]["timestamp"] > 1_700_000_000
    bob = run("export", "--app", "a", "--user", "42").output.splitlines()
    assert [(m["text"], m["session_id"]) for m in map(json.loads, bob)] == [("I grow figs", "7")]
    dump = {"events": [{"author": "user", "partial": "false", "content": {"parts": [{"text": "I play oboe"}]}}]}
    r = run("import", str(_write(tmp_path, "adk.json", [dump])), *AU)  # "false" is not partial: kept
    assert r.exit_code == 0 and "1 memories saved" in r.output, r.output


def _exported(tmp_path: Path, *store: str) -> Path:
    out = tmp_path / f"export-{len(list(tmp_path.iterdir()))}.jsonl"
    assert run(*store, "export", *AU, "-o", str(out)).exit_code == 0
    return out


def test_importing_an_export_restores_it_and_duplicates_nothing(tmp_path: Path):
    dump = {
        **SESSION,
        "events": [
            {
                "id": "e1",
                "author": "user",
                "timestamp": 1700000000.25,
                "custom_metadata": {"mood": "happy"},
                "content": {"role": "user", "parts": [{"text": "My passport expires in August 2027"}]},
            },
            {"author": "user", "content": {"parts": [{"text": "I fly from Lisbon"}]}},  # no time: import time
        ],
    }
    one = ("--config", json.dumps({"path": str(tmp_path / "one.db")}))
    assert run(*one, "import", str(_write(tmp_path, "dump.json", [dump])), *AU).exit_code == 0
    backup = _exported(tmp_path, *one)
    assert len(backup.read_text().splitlines()) == 2

    r = run(*one, "import", str(backup))  # into the store it came from
    assert r.exit_code == 0, r.output
    assert "total: 2 memories" in run(*one, "stats").output.splitlines()[-1]
    assert "2 exported memories restored" in r.output
    assert _exported(tmp_path, *one).read_text() == backup.read_text()

    other = ("--config", json.dumps({"path": str(tmp_path / "other.db")}))
    assert run(*other, "import", str(backup), *AU).exit_code == 0  # into an empty store; --app/--user agree
    assert _exported(tmp_path, *other).read_text() == backup.read_text()  # same ids, texts, times, metadata
    assert '"metadata":{"event_metadata":{"mood":"happy"}}' in backup.read_text()
    r = run(*other, "import", str(_write(tmp_path, "again.json", [dump])), *AU)  # the original conversation again
    assert r.exit_code == 0 and "total: 2 memories" in run(*other, "stats").output


def test_an_export_is_restored_where_it_belongs_or_not_at_all(tmp_path: Path):
    assert run("import", str(_write(tmp_path, "c.jsonl", [{"role": "user", "content": "hi"}])), *AU).exit_code == 0
    backup = _exported(tmp_path)
    record = json.loads(backup.read_text())
    empty = ("--config", json.dumps({"path": str(tmp_path / "empty.db")}))
    edited = _write(tmp_path, "edited.jsonl", [record | {"user_id": "bob"}])
    assert "edited.jsonl:1: record id" in _one_error_line(run(*empty, "import", str(edited)))
    line = _one_error_line(run(*empty, "import", str(backup), "--app", "a", "--user", "bob"))
    assert "of app 'a' and user 'u'" in line and "drop --app and --user" in line
    mixed = _write(tmp_path, "mixed.jsonl", [record, {"role": "user", "content": "hello"}])
    line = _one_error_line(run(*empty, "import", str(mixed)))
    assert "mixed.jsonl:2: a message" in line and "mixed.jsonl:1 is a memory record" in line
    assert "error: no store at" in run(*empty, "stats").output  # refused whole: not even a store made


def test_load_sessions_refuses_an_export_and_load_file_reads_its_records(tmp_path: Path):
    assert run("import", str(_write(tmp_path, "c.jsonl", [{"role": "user", "content": "hi"}])), *AU).exit_code == 0
    backup = _exported(tmp_path)
    with pytest.raises(InvalidInputError, match="written by `longterm export`"):
        list(load_sessions(backup))
    [record] = load_file(backup).records
    assert record.id == record.own_id() == json.loads(backup.read_text())["id"]
