"""The longterm command as an operator uses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from longterm import LongTermMemory
from longterm.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_demo_runs_offline_and_recalls(tmp_path: Path, _home: Path):
    env = {**os.environ, "LONGTERM_HOME": str(_home)}
    out = subprocess.run(
        [sys.executable, "-m", "longterm.cli", "demo"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "named her Pixel" in out.stdout
    assert "allergic to peanuts" in out.stdout
    assert "每周二晚上上课" in out.stdout
    assert not (tmp_path / ".longterm").exists()  # the demo keeps nothing unless --path


def test_import_search_stats_export_delete(tmp_path: Path):
    transcript = tmp_path / "chat.jsonl"
    lines = [
        {"role": "user", "content": "I play the cello in a community orchestra", "timestamp": "2025-01-02T10:00:00Z"},
        {"role": "assistant", "content": "How lovely!"},
        {"role": "user", "content": "My cello teacher is called Ines"},
    ]
    transcript.write_text("\n".join(json.dumps(x) for x in lines))
    adk_dump = tmp_path / "adk.json"
    adk_dump.write_text(
        json.dumps(
            {
                "id": "adk-s",
                "app_name": "music",
                "user_id": "ana",
                "events": [
                    {
                        "id": "e1",
                        "author": "user",
                        "timestamp": 1700000000.5,
                        "content": {"role": "user", "parts": [{"text": "I practise scales every morning"}]},
                    },
                ],
            }
        )
    )

    r = run("import", str(transcript), str(adk_dump), "--app", "music", "--user", "ana")
    assert r.exit_code == 0, r.output
    assert "3 memories saved" in r.output
    r = run("import", str(transcript), "--app", "music", "--user", "ana")
    assert "0 memories saved" in r.output

    r = run("search", "who teaches me cello", "--app", "music", "--user", "ana", "--json")
    hits = json.loads(r.output)
    assert hits[0]["content"]["parts"][0]["text"] == "My cello teacher is called Ines"

    r = run("stats")
    assert "music" in r.output and "ana" in r.output and "total: 3 memories" in r.output

    out = tmp_path / "export.jsonl"
    r = run("export", "--app", "music", "--user", "ana", "-o", str(out))
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(records) == 3 and {r["user_id"] for r in records} == {"ana"}

    r = run("delete", "--app", "music", "--user", "ana", input="n\n")
    assert r.exit_code != 0
    r = run("delete", "--app", "music", "--user", "ana", "--yes")
    assert "deleted 3 memories" in r.output
    r = run("search", "cello", "--app", "music", "--user", "ana")
    assert "no memories matched" in r.output


def _one_error_line(r, exit_code: int = 1) -> str:
    assert r.exit_code == exit_code, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def test_every_failure_is_one_error_line(tmp_path: Path, _home: Path):
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text('{"role": "user", "content": "I play the cello"}\n')
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "x"}\n{oops\n')
    cut_id = tmp_path / "cut.jsonl"
    cut_id.write_text('{"role": "user", "content": "x", "session_id": "s\\ud83d"}\n')  # JSON escape of half an emoji
    au = ("--app", "a", "--user", "u")
    cases = [
        (["--config", f"@{tmp_path / 'missing.json'}", "stats"], "--config: cannot read"),
        (["--config", "{bad", "stats"], "--config is not JSON"),
        (["--config", "[1]", "stats"], "--config must be a JSON object"),
        (["import", str(transcript), *au, "--policy", "{bad"], "--policy is not JSON"),
        (["import", str(tmp_path / "missing.json"), *au], "no such file"),
        (["import", str(bad), *au], "bad.jsonl:2: not JSON"),
        (["import", str(transcript)], "names no app_name"),
        (["import", str(cut_id), *au], "session.id 's\\ud83d' is not valid Unicode"),
        (["--backend", "nosuch", "search", "x", *au], "unknown backend 'nosuch'"),
        (["export", *au, "-o", str(tmp_path / "no" / "such" / "dir.jsonl")], "no store at"),
    ]
    for args, message in cases:
        assert message in _one_error_line(run(*args)), args
    _home.mkdir(parents=True, exist_ok=True)
    (_home / "memory.db").write_bytes(b"\x00garbage, not a store\xff" * 500)
    (_home / "memory.db").chmod(0o600)  # damaged, not readable by others: one error, no warning
    assert "memory.db" in _one_error_line(run("stats"))


def test_an_unexpected_exception_is_one_line_asking_for_a_report(tmp_path: Path, monkeypatch):
    import longterm.transcripts

    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(longterm.transcripts, "load_file", broken)
    line = _one_error_line(run("import", str(tmp_path / "x.json"), "--app", "a", "--user", "u"))
    assert line == "error: internal error: RuntimeError: boom second line (please report)"


def test_usage_errors_keep_clicks_message():
    r = run("search")
    assert r.exit_code == 2 and "Usage:" in r.stderr and "Missing argument 'QUERY'" in r.stderr
    r = run("delete", "--app", "a", "--user", "u", "--id", "x", "--session", "s", "--yes")
    assert r.exit_code == 2 and "pass --id or --session, not both" in r.stderr
    assert "Traceback" not in r.output


def test_the_installed_command_prints_no_traceback(tmp_path: Path, _home: Path):
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"} | {"LONGTERM_HOME": str(_home)}
    cut_id = tmp_path / "cut.jsonl"
    cut_id.write_text('{"role": "user", "content": "x", "session_id": "s\\ud83d"}\n')
    _home.mkdir(parents=True)
    (_home / "memory.db").write_bytes(b"garbage" * 1000)
    (_home / "memory.db").chmod(0o600)  # damaged, not readable by others: one error, no warning
    for args in (["--config", "{bad", "stats"], ["import", str(cut_id), "--app", "a", "--user", "u"], ["stats"]):
        out = subprocess.run(
            [sys.executable, "-m", "longterm.cli", *args], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert out.returncode == 1, args
        assert "Traceback" not in out.stderr
        assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr


def test_a_transcript_line_holding_half_an_emoji_is_imported_repaired(tmp_path: Path):
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text('{"role": "user", "content": "I love jazz \\ud83d"}\n')  # JSON escape of half an emoji
    r = run("import", str(transcript), "--app", "a", "--user", "u")
    assert r.exit_code == 0, r.output
    assert "1 memories saved" in r.output
    r = run("search", "jazz", "--app", "a", "--user", "u", "--json")
    assert json.loads(r.output)[0]["content"]["parts"][0]["text"] == "I love jazz \ufffd"
    assert "0 memories saved" in run("import", str(transcript), "--app", "a", "--user", "u").output


def _import_lines(path: Path, lines: list[dict], *args: str):
    path.write_text("\n".join(json.dumps(x) for x in lines))
    r = run("import", str(path), "--app", "a", "--user", "u", *args)
    assert r.exit_code == 0, r.output
    return r


def _exported(tmp_path: Path, user: str = "u") -> dict[str, dict]:
    out = tmp_path / f"export-{user}.jsonl"
    assert run("export", "--app", "a", "--user", user, "-o", str(out)).exit_code == 0
    records = [json.loads(x) for x in out.read_text().splitlines()]
    return {r["text"]: r for r in records}


def test_import_groups_messages_into_the_sessions_they_name(tmp_path: Path):
    lines = [
        {"role": "user", "content": "I keep bees", "session_id": "garden"},
        {"role": "user", "content": "I sail on weekends", "conversation_id": "boat"},
        {"role": "user", "content": "My bees are Italian", "session_id": "garden"},
        {"role": "user", "content": "I fix my sails myself", "thread_id": "repairs"},
        {"role": "user", "content": "I like green tea"},
        {"role": "user", "content": "I am Bob and I keep goats", "session_id": "garden", "user_id": "bob"},
    ]
    r = _import_lines(tmp_path / "chat.jsonl", lines)
    assert "5 sessions" in r.output
    sessions = {text: rec["session_id"] for text, rec in _exported(tmp_path).items()}
    assert sessions == {
        "I keep bees": "garden",
        "My bees are Italian": "garden",
        "I sail on weekends": "boat",
        "I fix my sails myself": "repairs",
        "I like green tea": "chat",
    }
    assert {t: r["session_id"] for t, r in _exported(tmp_path, "bob").items()} == {
        "I am Bob and I keep goats": "garden"
    }


def test_import_gives_messages_without_a_time_the_import_time_in_line_order(tmp_path: Path):
    lines = [{"role": "user", "content": f"fact number {i}"} for i in range(5)]
    before = time.time()
    _import_lines(tmp_path / "facts.jsonl", lines)
    after = time.time()
    records = _exported(tmp_path)
    times = [records[f"fact number {i}"]["timestamp"] for i in range(5)]
    assert before <= times[0] and times[-1] <= after + 1  # the import time, not 1970-01-01
    assert all(a < b for a, b in zip(times, times[1:], strict=False))  # strictly in line order
    r = _import_lines(tmp_path / "facts.jsonl", lines)  # the time has moved on; the ids have not
    assert "0 memories saved" in r.output


def test_delete_one_session(tmp_path: Path):
    lines = [
        {"role": "user", "content": "I keep bees", "session_id": "garden"},
        {"role": "user", "content": "My bees are Italian", "session_id": "garden"},
        {"role": "user", "content": "I sail on weekends", "session_id": "boat"},
    ]
    _import_lines(tmp_path / "chat.jsonl", lines)
    r = run("delete", "--app", "a", "--user", "u", "--session", "boat", input="n\n")
    assert r.exit_code != 0 and "Delete the memories of session 'boat'" in r.output
    r = run("delete", "--app", "a", "--user", "u", "--session", "garden", "--yes")
    assert r.exit_code == 0 and "deleted 2 memories" in r.output
    assert list(_exported(tmp_path)) == ["I sail on weekends"]


def test_migrate_between_backends(tmp_path: Path):
    src = json.dumps({"path": str(tmp_path / "a.db")})
    dst = json.dumps({"path": str(tmp_path / "b.db")})
    transcript = tmp_path / "t.json"
    transcript.write_text(
        json.dumps(
            [
                {"role": "user", "content": "I collect vinyl records"},
                {"role": "user", "content": "My turntable is a Technics"},
            ]
        )
    )
    assert run("--config", src, "import", str(transcript), "--app", "music", "--user", "ana").exit_code == 0
    r = run("--config", src, "migrate", "--to-backend", "local", "--to-config", dst)
    assert r.exit_code == 0 and "copied 2 memories of 1 users" in r.output
    r = run("--config", src, "migrate", "--to-backend", "local", "--to-config", dst)  # again: same ids
    r = run("--config", dst, "stats")
    assert "total: 2 memories" in r.output
    r = run("--config", dst, "search", "turntable", "--app", "music", "--user", "ana", "--json")
    assert json.loads(r.output)[0]["content"]["parts"][0]["text"] == "My turntable is a Technics"


def test_escape_sequences_in_stored_text_and_ids_never_reach_the_terminal(tmp_path: Path):
    """A user id or a memory holding ESC [2J (clear screen) is shown escaped by search and stats."""
    from longterm import LongTermMemory
    from longterm.testing import make_session

    path = str(tmp_path / "m.db")
    memory = LongTermMemory(backend_config={"path": path})
    turns = [("user", "plum \x1b]0;pwned\x07 jam \x9b31m")]
    memory.add_session_to_memory_sync(make_session(app="app", user="evil\x1b[2J", turns=turns))
    memory.close_sync()
    config = json.dumps({"path": path})
    for args in (("search", "plum", "--app", "app", "--user", "evil\x1b[2J"), ("stats",)):
        r = run("--config", config, *args)
        assert r.exit_code == 0, r.output
        assert "plum" in r.output or "evil" in r.output
        assert not any(c in r.output for c in "\x1b\x07\x9b"), repr(r.output)


def test_delete_with_no_answer_on_stdin_is_one_error_line_and_deletes_nothing(tmp_path: Path):
    with LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}) as store:  # a store: the erase asks first
        store.add_sync("I grow figs", user_id="u")
    config = json.dumps({"path": str(tmp_path / "m.db")})
    r = run("--config", config, "delete", "--app", "a", "--user", "u", input="")
    errors = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert r.exit_code == 1 and len(errors) == 1 and errors[0].startswith("error: nothing deleted"), r.output
    assert "Aborted" not in r.output and "Traceback" not in r.output


def test_a_transcript_with_a_byte_order_mark_imports(tmp_path: Path):
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "I grow figs"}) + "\n", encoding="utf-8-sig")
    config = json.dumps({"path": str(tmp_path / "m.db")})
    r = run("--config", config, "import", str(transcript), "--app", "a", "--user", "u")
    assert r.exit_code == 0, r.output
    assert "figs" in run("--config", config, "search", "figs", "--app", "a", "--user", "u").output


def test_a_json_file_nested_past_what_python_reads_is_one_error_line(tmp_path: Path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    config = json.dumps({"path": str(tmp_path / "m.db")})
    r = run("--config", config, "import", str(deep), "--app", "a", "--user", "u")
    assert r.exit_code == 1 and "nested too deeply" in r.output and "internal error" not in r.output, r.output


def test_facts_distill_fails_while_records_still_wait(tmp_path: Path, _home: Path):
    """The model is down: `longterm facts distill` says how many records wait and exits 1;
    once the model answers, the same command distils them and exits 0."""
    from longterm import LongTermMemory
    from longterm.testing import make_session
    from longterm.testing.scripted_llm import FactRule, ScriptedChat

    path = str(tmp_path / "m.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_FACTS")} | {"LONGTERM_HOME": str(_home)}
    with ScriptedChat([FactRule(r"\bI live in (\w+)", "The user lives in {1}", "home city")]) as chat:
        chat.down = True
        facts = {"base_url": chat.base_url, "model": "scripted", "api_key": "k", "timeout": 1.0, "retry_seconds": 600}
        # saved into index "app" (app_name's): the command finds it there without --index
        memory = LongTermMemory(app_name="app", backend_config={"path": path}, facts=facts)
        memory.add_session_to_memory_sync(make_session("s1", app="app", user="u1", turns=[("user", "I live in Porto")]))
        assert memory.portal.call(memory.flush_facts()) == 1
        memory.close_sync()
        args = ["--config", json.dumps({"path": path}), "facts", "--base-url", chat.base_url, "--model", "scripted"]
        args += ["distill", "--app", "app", "--user", "u1"]
        cmd = [sys.executable, "-m", "longterm.cli", *args]
        out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 1, out.stdout + out.stderr
        assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
        assert out.stderr.startswith("error: 1 record of user 'u1' in app 'app' still waits to be distilled")
        assert "the model is down" in out.stderr and "longterm facts distill" in out.stderr
        chat.down = False
        out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout == "all evidence distilled\n", out.stdout + out.stderr


def test_export_writes_a_file_only_its_owner_can_read_whatever_the_umask(tmp_path: Path):
    """Under umask 022 a new file was 0644 and an existing one kept its rights: every word the
    user said, readable by every account on the machine."""
    config = json.dumps({"path": str(tmp_path / "m.db")})
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "My PIN is not 1234"}) + "\n")
    assert run("--config", config, "import", str(transcript), "--app", "a", "--user", "u").exit_code == 0
    fresh, existing = tmp_path / "fresh.jsonl", tmp_path / "existing.jsonl"
    existing.write_text("old\n")
    existing.chmod(0o644)
    old = os.umask(0o022)
    try:
        for out in (fresh, existing):
            r = run("--config", config, "export", "--app", "a", "--user", "u", "-o", str(out))
            assert r.exit_code == 0, r.output
            assert oct(out.stat().st_mode & 0o777) == oct(0o600), out
            assert "My PIN is not 1234" in out.read_text() and "old" not in out.read_text()
    finally:
        os.umask(old)


def _saved(tmp_path: Path, backend: str, config: dict) -> str:
    from longterm import LongTermMemory
    from longterm.testing import make_session

    memory = LongTermMemory(backend=backend, backend_config=config, app_name="a")
    memory.add_session_to_memory_sync(make_session("s1", app="a", user="u", turns=[("user", "my secret word")]))
    memory.close_sync()
    return json.dumps(config)


def test_delete_purge_runs_the_engines_purge_after_the_erase(tmp_path: Path, monkeypatch):
    """The CLI's side of --purge: the engine's purge runs once, after the erase, and its line is shown."""
    from longterm import LongTermMemory
    from longterm.backends.local.store import LocalBackend

    config = _saved(tmp_path, "local", {"path": str(tmp_path / "m.db")})
    seen: list[int] = []

    async def purge(self: LocalBackend) -> str:
        probe = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, app_name="a")
        seen.append(await probe.count(app_name="a", user_id="u"))  # what the store holds when purge runs
        await probe.close()
        return "full-text index merged"

    monkeypatch.setattr(LocalBackend, "purge", purge, raising=False)
    r = run("--config", config, "delete", "--app", "a", "--user", "u", "--yes", "--purge")
    assert r.exit_code == 0, r.output
    assert seen == [0]  # once, after the erase
    assert "deleted 1 memories" in r.output and "purged: full-text index merged" in r.output


def test_delete_purge_on_a_backend_that_cannot_compact_says_why(tmp_path: Path):
    config = _saved(tmp_path, "qdrant", {"path": str(tmp_path / "q"), "engine": "local"})  # edge purges now
    r = run("--backend", "qdrant", "--config", config, "delete", "--app", "a", "--user", "u", "--yes", "--purge")
    assert r.exit_code == 0, r.output
    assert "deleted 1 memories" in r.output
    assert "vacuum optimizer" in r.output and "longterm cannot force that" in r.output
    assert "--purge" in run("delete", "--help").output and "BGREWRITEAOF" in run("delete", "--help").output


def test_import_writes_where_the_api_reads_and_joins_a_user_where_they_are(tmp_path: Path):
    """Without --index, an import for a new (app, user) lands in index APP, where
    LongTermMemory(app_name=APP) reads; one for a user the store already holds joins them there."""
    from longterm import LongTermMemory
    from longterm.testing import make_session

    path = str(tmp_path / "m.db")
    config = json.dumps({"path": path})
    earlier = LongTermMemory(backend_config={"path": path})  # no app_name: a new user goes to index "shop"
    earlier.add_session_to_memory_sync(make_session("s0", app="shop", user="carol", turns=[("user", "I buy tea")]))
    earlier.close_sync()
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "I collect stamps"}) + "\n")
    for app, user in (("music", "ana"), ("shop", "carol")):
        r = run("--config", config, "import", str(transcript), "--app", app, "--user", user)
        assert r.exit_code == 0 and "1 memories saved" in r.output, r.output
    api = LongTermMemory(backend_config={"path": path}, app_name="music")
    assert api.count_sync(app_name="music", user_id="ana") == 1
    api.close_sync()
    listed = {
        (r["index"], r["app"], r["user"]): r["memories"]
        for r in json.loads(run("--config", config, "stats", "--json").output)
    }
    assert listed == {("music", "music", "ana"): 1, ("shop", "shop", "carol"): 2}
    assert "whichever index of the store holds them" in " ".join(run("--help").output.split())


def test_a_library_warning_is_one_escaped_line(tmp_path: Path, _home: Path):
    """A warning of the library (here: a store others can read) is one ``warning:`` line with
    control characters escaped; Python's fallback printed the raw message, ESC sequences included."""
    from longterm import LongTermMemory
    from longterm.testing import make_session

    path = tmp_path / "evil\x1b[2Jdir" / "m.db"
    memory = LongTermMemory(backend_config={"path": str(path)}, app_name="a")
    memory.add_session_to_memory_sync(make_session("s1", app="a", user="u", turns=[("user", "figs")]))
    memory.close_sync()
    path.chmod(0o644)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")} | {"LONGTERM_HOME": str(_home)}
    out = subprocess.run(
        [sys.executable, "-m", "longterm.cli", "--config", json.dumps({"path": str(path)}), "stats"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    [line] = out.stderr.splitlines()
    assert line.startswith("warning: ") and "evil\\x1b[2Jdir" in line and "\x1b" not in out.stderr, out.stderr


def test_search_json_gives_each_memorys_own_metadata_beside_the_librarys(tmp_path: Path):
    """An ADK entry's ``custom_metadata`` has the library's keys win (``backend``, ``role``, ``score``);
    the memory's own metadata comes beside it, as saved, as export and the MCP server give it."""
    path = tmp_path / "m.db"
    own = {"backend": "mine", "score": "high", "topic": "jackets"}
    with LongTermMemory(app_name="shop", backend_config={"path": str(path)}) as memory:
        memory.add_sync("I need a rain jacket", user_id="u1", metadata=own)
    r = run("--config", json.dumps({"path": str(path)}), "search", "jacket", "--app", "shop", "--user", "u1", "--json")
    assert r.exit_code == 0, r.output
    [hit] = json.loads(r.output)
    assert hit["metadata"] == own
    assert hit["custom_metadata"]["backend"] == "local" and hit["content"]["parts"][0]["text"] == "I need a rain jacket"
