"""``--filter`` and ``--filter-json`` as an operator types them: read into the one filter syntax,
applied before the top-k cut by ``longterm search`` and by ``longterm export``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from longterm import LongTermMemory
from longterm.cli import cli
from longterm.cli.filtering import filters_of
from longterm.errors import InvalidInputError
from longterm.testing import make_session


@pytest.mark.parametrize(
    ("pairs", "text", "expected"),
    [
        ((), None, None),
        (("topic=travel",), None, {"topic": "travel"}),
        (("n=3", "ok=true", "gone=null"), None, {"$and": [{"n": 3}, {"ok": True}, {"gone": None}]}),
        (('zip="02139"',), None, {"zip": "02139"}),  # a quoted value stays a string
        (("note=a=b",), None, {"note": "a=b"}),  # the first = splits
        (("topic=travel",), '{"n": {"$gt": 2}}', {"$and": [{"topic": "travel"}, {"n": {"$gt": 2}}]}),
        (("tags=[1]",), None, {"tags": "[1]"}),  # not a scalar: the text as typed
        (("n=NaN", "m=-Infinity"), None, {"$and": [{"n": "NaN"}, {"m": "-Infinity"}]}),  # no JSON numbers
    ],
)
def test_typed_filters_mean_what_they_say(pairs: tuple[str, ...], text: str | None, expected: object) -> None:
    assert filters_of(pairs, text) == expected


def test_a_pair_without_a_key_is_refused_by_name() -> None:
    with pytest.raises(InvalidInputError, match="--filter 'travel'"):
        filters_of(("travel",), None)


def test_nan_and_infinity_filter_as_the_text_typed(tmp_path: Path) -> None:
    store = ["--config", json.dumps({"path": str(tmp_path / "m.db")})]
    with LongTermMemory(app_name="shop", backend_config={"path": str(tmp_path / "m.db")}) as memory:
        memory.add_sync("a jacket", user_id="u1", metadata={"n": "NaN"})
        memory.add_sync("a coat", user_id="u1", metadata={"n": "Infinity"})
    for value, found in (("NaN", ["a jacket"]), ("Infinity", ["a coat"]), ("-Infinity", [])):
        args = [*store, "export", "--app", "shop", "--user", "u1", "--filter", f"n={value}"]
        out = CliRunner().invoke(cli, args)  # once: "error: filters['n']: nan is not a finite number"
        assert out.exit_code == 0, out.output
        assert [json.loads(line)["text"] for line in out.output.splitlines()] == found


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "longterm.cli", *args], cwd=home, capture_output=True, text=True, timeout=120
    )


def test_search_and_export_narrow_by_filter(tmp_path: Path) -> None:
    with LongTermMemory(app_name="travel", backend_config={"path": str(tmp_path / "m.db")}) as memory:
        for i in range(30):
            memory.add_sync(f"the ferry timetable, copy {i}", user_id="alice", metadata={"topic": "work"})
        memory.add_sync("a ferry to the island", user_id="alice", metadata={"topic": "travel", "n": 2})
    store = ["--config", json.dumps({"path": str(tmp_path / "m.db")})]
    found = _cli(
        tmp_path,
        "search",
        "ferry",
        "--app",
        "travel",
        "--user",
        "alice",
        "-k",
        "1",
        "--json",
        "--filter",
        "topic=travel",
        *store,
    )
    assert found.returncode == 0, found.stderr
    assert [m["content"]["parts"][0]["text"] for m in json.loads(found.stdout)] == ["a ferry to the island"]
    exported = _cli(
        tmp_path, "export", "--app", "travel", "--user", "alice", "--filter-json", '{"n": {"$gte": 2}}', *store
    )
    assert exported.returncode == 0, exported.stderr
    assert [json.loads(line)["text"] for line in exported.stdout.splitlines()] == ["a ferry to the island"]
    bad = _cli(
        tmp_path,
        "search",
        "ferry",
        "--app",
        "travel",
        "--user",
        "alice",
        "--filter-json",
        '{"n": {"$regex": "x"}}',
        *store,
    )
    assert bad.returncode != 0 and bad.stderr.startswith("error:") and "$regex" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_delete_by_date_and_filter_with_a_dry_run_first(tmp_path: Path) -> None:
    with LongTermMemory(app_name="travel", backend_config={"path": str(tmp_path / "m.db")}) as memory:
        old = make_session("old", "travel", "alice", [("user", "an old boarding pass")], start=1_000.0)
        new = make_session("new", "travel", "alice", [("user", "a new boarding pass")], start=9_000.0)
        for s in (old, new):
            memory.portal.call(memory.add_session_to_memory(s))
    cut = "1970-01-01T01:00:00+00:00"  # 3,600 s: after the old one, before the new one
    store = ["--config", json.dumps({"path": str(tmp_path / "m.db")})]
    who = ["--app", "travel", "--user", "alice"]
    dry = _cli(tmp_path, "delete", *who, "--before", cut, "--dry-run", *store)
    assert dry.returncode == 0, dry.stderr
    assert "would delete 1 memories" in dry.stdout and "nothing deleted" in dry.stdout
    gone = _cli(tmp_path, "delete", *who, "--filter", "session_id=new", "--yes", *store)
    assert gone.returncode == 0 and "deleted 1 memories" in gone.stdout, gone.stderr
    with LongTermMemory(app_name="travel", backend_config={"path": str(tmp_path / "m.db")}) as memory:
        assert [m.text for m in memory.get_all_sync(user_id="alice").memories] == ["an old boarding pass"]
    both = _cli(tmp_path, "delete", *who, "--id", "x", "--filter", "topic=work", *store)
    assert both.returncode != 0 and "--id alone" in both.stderr


def test_update_and_delete_expired_from_the_command_line(tmp_path: Path) -> None:
    store = ["--config", json.dumps({"path": str(tmp_path / "m.db")})]
    who = ["--app", "travel", "--user", "alice"]
    with LongTermMemory(app_name="travel", backend_config={"path": str(tmp_path / "m.db")}) as memory:
        (mid,) = memory.add_sync("my seat is 14C", user_id="alice").memory_ids
        memory.add_sync("a code that expired", user_id="alice", expires_at=1_000.0 + 1)
    fixed = _cli(tmp_path, "update", *who, "--id", mid, "--text", "my seat is 2A", "--metadata", '{"trip": 1}', *store)
    assert fixed.returncode == 0 and "updated" in fixed.stdout, fixed.stderr
    dry = _cli(tmp_path, "delete", *who, "--expired", "--dry-run", *store)
    assert dry.returncode == 0 and "would delete 1 expired memories" in dry.stdout, dry.stderr
    swept = _cli(tmp_path, "delete", *who, "--expired", *store)
    assert swept.returncode == 0 and "deleted 1 expired memories" in swept.stdout, swept.stderr
    with LongTermMemory(app_name="travel", backend_config={"path": str(tmp_path / "m.db")}) as memory:
        (only,) = memory.get_all_sync(user_id="alice").memories
        assert (only.id, only.text, only.metadata) == (mid, "my seat is 2A", {"trip": 1})
        assert memory.portal.call(memory.count(app_name="travel", user_id="alice")) == 1
    missing = _cli(tmp_path, "update", *who, "--id", "nope", "--text", "x", *store)
    assert missing.returncode == 1 and missing.stderr.startswith("error: no memory 'nope'")
