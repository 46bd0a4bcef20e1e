"""The longterm command as an operator uses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from longterm.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_demo_runs_offline_and_recalls(tmp_path: Path, _home: Path):
    env = {**os.environ, "LONGTERM_HOME": str(_home)}
    out = subprocess.run([sys.executable, "-m", "longterm.cli", "demo"], env=env, cwd=tmp_path, capture_output=True, text=True)
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
    adk_dump.write_text(json.dumps({"id": "adk-s", "app_name": "music", "user_id": "ana", "events": [
        {"id": "e1", "author": "user", "timestamp": 1700000000.5, "content": {"role": "user", "parts": [{"text": "I practise scales every morning"}]}},
    ]}))

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


def test_errors_are_one_clear_line(tmp_path: Path):
    r = run("import", str(tmp_path / "missing.json"), "--app", "a", "--user", "u")
    assert r.exit_code == 1
    assert "error: no such file" in r.output and "Traceback" not in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "x"}\n{oops\n')
    r = run("import", str(bad), "--app", "a", "--user", "u")
    assert r.exit_code == 1 and "bad.jsonl:2: not JSON" in r.output
    r = run("--backend", "nosuch", "search", "x", "--app", "a", "--user", "u")
    assert r.exit_code == 1 and "unknown backend 'nosuch'" in r.output
    r = run("import", str(tmp_path / "x.json"))
    assert r.exit_code == 1


def test_migrate_between_backends(tmp_path: Path):
    src = json.dumps({"path": str(tmp_path / "a.db")})
    dst = json.dumps({"path": str(tmp_path / "b.db")})
    transcript = tmp_path / "t.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "I collect vinyl records"}, {"role": "user", "content": "My turntable is a Technics"}]))
    assert run("--config", src, "import", str(transcript), "--app", "music", "--user", "ana").exit_code == 0
    r = run("--config", src, "migrate", "--to-backend", "local", "--to-config", dst)
    assert r.exit_code == 0 and "copied 2 memories of 1 users" in r.output
    r = run("--config", src, "migrate", "--to-backend", "local", "--to-config", dst)  # again: same ids
    r = run("--config", dst, "stats")
    assert "total: 2 memories" in r.output
    r = run("--config", dst, "search", "turntable", "--app", "music", "--user", "ana", "--json")
    assert json.loads(r.output)[0]["content"]["parts"][0]["text"] == "My turntable is a Technics"
