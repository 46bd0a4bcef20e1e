"""Owner-only files (local): the store's files are 0600 and the directories made for it 0700,
whatever the umask; an existing store open to others is kept as it is, with one warning.

The seam: under umask 022 (files 0644 and directories 0755 by default), a memory is opened
on a new store in an existing directory and in a ``LONGTERM_HOME`` that does not exist yet
(nested), a memory is saved (so the WAL and its index exist), and the modes are read while the
memory is open and after it closed. Then a store made 0644 by someone else is opened twice.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from longterm import LongTermMemory

APP, USER = "modes", "eve"
SUFFIXES = ("", "-wal", "-shm")


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def save_one(memory: LongTermMemory) -> None:
    event = {"id": "e0", "author": "user", "content": {"role": "user", "parts": [{"text": "my blood type is AB"}]}}
    memory.add_session_to_memory_sync({"id": "s1", "app_name": APP, "user_id": USER, "events": [event]})


def store_modes(db: Path) -> dict[str, str]:
    return {f"{db.name}{s}": oct(mode(f"{db}{s}")) for s in SUFFIXES if os.path.exists(f"{db}{s}")}


def test_a_new_store_in_an_existing_directory_is_owner_only(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    db = shared / "memory.db"
    memory = LongTermMemory(backend="local", backend_config={"path": str(db)}, app_name=APP)
    try:
        save_one(memory)
        assert memory.count_sync(app_name=APP, user_id=USER) == 1
        assert store_modes(db) == {"memory.db": "0o600", "memory.db-wal": "0o600", "memory.db-shm": "0o600"}
    finally:
        memory.close_sync()
    assert set(store_modes(db).values()) == {"0o600"}
    assert mode(shared) == 0o755  # not ours: left as it is


def test_a_new_home_and_its_parents_are_owner_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "made" / "by" / "longterm"
    monkeypatch.setenv("LONGTERM_HOME", str(home))
    memory = LongTermMemory(app_name=APP)
    try:
        save_one(memory)
        assert store_modes(home / "memory.db") == {
            "memory.db": "0o600",
            "memory.db-wal": "0o600",
            "memory.db-shm": "0o600",
        }
    finally:
        memory.close_sync()
    made = {str(p.relative_to(tmp_path)): oct(mode(p)) for p in (home.parent.parent, home.parent, home)}
    assert made == {"made": "0o700", "made/by": "0o700", "made/by/longterm": "0o700"}


def test_an_existing_store_open_to_others_is_kept_and_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "memory.db"
    memory = LongTermMemory(backend="local", backend_config={"path": str(db)}, app_name=APP)
    save_one(memory)
    memory.close_sync()
    os.chmod(db, 0o644)
    caplog.set_level(logging.WARNING)
    for _ in range(2):
        memory = LongTermMemory(backend="local", backend_config={"path": str(db)}, app_name=APP)
        try:
            assert memory.count_sync(app_name=APP, user_id=USER) == 1
        finally:
            memory.close_sync()
    warnings = [r.getMessage() for r in caplog.records if "other users" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert f"chmod 600 '{db}'" in warnings[0] and "0644" in warnings[0]
    assert mode(db) == 0o644  # kept: the owner decides


@pytest.mark.parametrize("engine", ["edge", "local"])
def test_embedded_qdrant_makes_its_directories_owner_only(tmp_path: Path, engine: str) -> None:
    """mkdir(parents=True, mode=0o700) made the missing parents with the umask's mode (0755)."""
    path = tmp_path / "deep" / "er" / "qdrant"
    old = os.umask(0o022)
    try:
        memory = LongTermMemory(backend="qdrant", backend_config={"path": str(path), "engine": engine})
        memory.add_sync("a private note", user_id="u")
        memory.close_sync()
    finally:
        os.umask(old)
    for d in (tmp_path / "deep", tmp_path / "deep" / "er", path):
        assert oct(d.stat().st_mode & 0o777) == oct(0o700), d
