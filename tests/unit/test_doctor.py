"""``longterm doctor`` as an operator runs it (a real subprocess): a healthy store exits 0; a
damaged file, a server that is down and a changed embedder each exit 1, the problem named
in the table and in the one ``error:`` line, with what to do."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from longterm import LongTermMemory
from tests.conftest import make_session
from tests.services.redis_server import free_port

EMBEDDER = {"name": "hashing", "dim": 8}
PAGE = 4096


def doctor(
    tmp_path: Path, *args: str, embedder: dict | None = None, as_json: bool = True
) -> subprocess.CompletedProcess[str]:
    """``longterm ARGS doctor [--embedder JSON] [--json]``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")}
    env |= {"LONGTERM_HOME": str(tmp_path / "home"), "COLUMNS": "400"}
    options = (("--embedder", json.dumps(embedder)) if embedder else ()) + (("--json",) if as_json else ())
    cmd = [sys.executable, "-m", "longterm.cli", *args, "doctor", *options]
    return subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def store(path: Path, sessions: int = 1) -> None:
    memory = LongTermMemory(backend_config={"path": str(path), "embedder": EMBEDDER})
    try:
        for i in range(sessions):
            turns = [("user", f"note {i} {j}: the tulips in bed {i} need water " * 8) for j in range(10)]
            memory.add_session_to_memory_sync(make_session(f"s{i}", user=f"u{i % 3}", app="default_app", turns=turns))
    finally:
        memory.close_sync()


def rows(out: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    """The doctor's rows by check name."""
    return {r["check"]: r for r in json.loads(out.stdout)}


def local(path: Path) -> tuple[str, ...]:
    return ("--config", json.dumps({"path": str(path)}))


def test_a_healthy_store_exits_0(tmp_path: Path) -> None:
    store(tmp_path / "memory.db")
    out = doctor(tmp_path, *local(tmp_path / "memory.db"), embedder=EMBEDDER)
    assert out.returncode == 0, out.stdout + out.stderr
    found = rows(out)
    assert {r["status"] for r in found.values()} == {"ok"}, found
    assert "quick_check ok" in found["store file"]["found"]
    assert found["backend"]["found"] == "answers; indices holding memories: default_app"
    assert "hashing-v1-8" in found["embedder identity"]["found"]
    assert found["embedding backlog"]["status"] == "ok" and "longterm 0." in found["versions"]["found"]
    table = doctor(tmp_path, *local(tmp_path / "memory.db"), embedder=EMBEDDER, as_json=False)
    assert table.returncode == 0 and "longterm doctor" in table.stdout and "quick_check" in table.stdout


def test_a_damaged_store_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store(path, sessions=40)
    with open(path, "r+b") as f:  # a page in the middle overwritten
        f.seek((path.stat().st_size // PAGE // 2) * PAGE)
        f.write(random.Random(7).randbytes(PAGE))
    out = doctor(tmp_path, *local(path), embedder=EMBEDDER)
    assert out.returncode == 1, out.stdout
    damaged = rows(out)["store file"]
    assert damaged["status"] == "fail" and "is damaged" in damaged["found"]
    assert "restore memory.db from a backup" in damaged["fix"]
    assert out.stderr.startswith("error: doctor found a problem: store file") and "Traceback" not in out.stderr


def test_a_server_that_is_down_exits_1(tmp_path: Path) -> None:
    config = json.dumps({"url": f"redis://127.0.0.1:{free_port()}/0", "socket_timeout": 1})
    out = doctor(tmp_path, "--backend", "redis", "--config", config)
    assert out.returncode == 1, out.stdout
    down = rows(out)["backend"]
    assert down["status"] == "fail" and "redis" in down["found"] and "start the server" in down["fix"]
    assert "problem: backend" in out.stderr


def test_a_changed_embedder_exits_1(tmp_path: Path) -> None:
    store(tmp_path / "memory.db")
    out = doctor(tmp_path, *local(tmp_path / "memory.db"), embedder={"name": "hashing", "dim": 16})
    assert out.returncode == 1, out.stdout
    changed = rows(out)["embedder identity"]
    assert changed["status"] == "fail" and "written with 'hashing-v1-8'" in changed["found"]
    assert "pass the embedder the store was made with" in changed["fix"]
    assert "problem: embedder identity" in out.stderr


def test_a_bad_configuration_exits_1(tmp_path: Path) -> None:
    out = doctor(tmp_path, "--backend", "local", "--config", json.dumps({"no_such_option": 1}))
    assert out.returncode == 1 and "problem: configuration" in out.stderr
    assert "no_such_option" in rows(out)["configuration"]["found"]


def test_records_outside_the_ledger_are_found_where_the_engine_writes_them_apart(tmp_path: Path) -> None:
    """Embedded Qdrant writes records, then the ledger (a side file): a save cut off between the two
    leaves records the ledger does not hold; doctor says so and how to mend it."""
    from longterm.testing import make_record

    config = {"path": str(tmp_path / "q"), "engine": "edge"}
    memory = LongTermMemory(backend="qdrant", backend_config=config)
    try:
        memory.add_session_to_memory_sync(make_session("s1", turns=[("user", "a saved line"), ("user", "another")]))
    finally:
        memory.close_sync()
    args = ("--backend", "qdrant", "--config", json.dumps(config))
    healthy = doctor(tmp_path, *args)
    assert healthy.returncode == 0 and rows(healthy)["ledger"]["status"] == "ok", healthy.stdout + healthy.stderr
    memory = LongTermMemory(backend="qdrant", backend_config=config)
    try:  # what a save cut off after its records wrote: a record of s1 whose event the ledger lacks
        record = make_record("written, never marked", app="app", user="u1", session="s1", event="s1-e9")
        memory.upsert_records_sync([record])
    finally:
        memory.close_sync()
    out = doctor(tmp_path, *args)
    assert out.returncode == 1, out.stdout + out.stderr
    found = rows(out)["ledger"]
    assert found["status"] == "fail" and "1 records of 1 sessions are not in the store's ledger" in found["found"]


def test_a_store_this_user_cannot_read_is_a_permission_problem_not_a_damaged_file(tmp_path: Path, monkeypatch) -> None:
    """Run as another user, it said "cannot be opened ... restore it from a backup"."""
    from longterm import doctor as doctor_module

    path = tmp_path / "memory.db"
    store(path)
    monkeypatch.setattr(doctor_module.os, "access", lambda p, mode: Path(p) != path)
    [row] = doctor_module._sqlite_file(path)
    assert row.status == "fail" and "cannot be read by this user (permission denied)" in row.detail
    assert "chmod" in row.fix and "backup" not in row.fix
