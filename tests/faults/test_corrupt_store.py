"""Damaged stores: every call says so, with what to do, and nothing else escapes.

The seam: a store is written and closed, then damaged as disks and people damage files
(cut to half its size, garbage over a page in the middle, replaced by a file that is not a
store); a new memory then runs every API call on it. A damaged store must answer each
call with a ``LongTermMemoryError`` naming the store and saying it is damaged and how to
recover (restore a backup, or move it aside) - never a ``sqlite3.DatabaseError`` or an
engine's panic, including the ledger read at the start of a save - and the CLI must print
one ``error:`` line, not a traceback.

Garbage over one page is found only by the calls that read that page (SQLite checks no
more), so there a call may also answer; the damage must still show on some call.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory, LongTermMemoryError
from longterm.testing import make_record
from tests.conftest import make_session
from tests.faults.conftest import ROOT

Damage = Callable[[Path], None]
PAGE = 4096


def _store(backend: str, config: dict[str, Any]) -> None:
    """A store of 3 users x 40 sessions, big enough to have a middle, closed cleanly."""
    memory = LongTermMemory(backend=backend, backend_config=config)
    try:
        for i in range(40):
            turns = [("user", f"note {i} {j}: the tulips in bed {i} need water " * 8) for j in range(10)]
            memory.add_session_to_memory_sync(make_session(f"s{i}", user=f"u{i % 3}", turns=turns))
    finally:
        memory.close_sync()


def _garbage(path: Path, at: int, size: int = PAGE) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(random.Random(7).randbytes(size))


def _half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _page_in_the_middle(path: Path) -> None:
    _garbage(path, (path.stat().st_size // PAGE // 2) * PAGE)


def _not_a_store(path: Path) -> None:
    path.write_bytes(b"these are my notes, not a database\n" * 1000)


def _calls(memory: LongTermMemory) -> dict[str, Callable[[], Any]]:
    """Every API call a user makes, on data the store holds and on new data."""
    new = make_session("new", user="u0", turns=[("user", "a new thought about roses")])
    record = make_record("restored memory", user="u0", session="restore", event="e1")

    async def scan() -> int:
        return len([r async for r in memory.iter_records(app_name="app", user_id="u1")])

    return {
        "add_session_to_memory": lambda: memory.add_session_to_memory(new),
        "add_sessions_to_memory": lambda: memory.add_sessions_to_memory([make_session("s1", user="u1")]),
        "add_events_to_memory": lambda: memory.add_events_to_memory(app_name="app", user_id="u2", events=new["events"]),
        "add_memory": lambda: memory.add_memory(
            app_name="app", user_id="u0", memories=[{"content": "roses", "id": "m1"}]
        ),
        "search_memory": lambda: memory.search_memory(app_name="app", user_id="u0", query="tulips water"),
        "count": lambda: memory.count(app_name="app", user_id="u1"),
        "delete one": lambda: memory.delete_memory(app_name="app", user_id="u0", memory_id="nope"),
        "delete a session": lambda: memory.delete_memory(app_name="app", user_id="u1", session_id="s1"),
        "erase a user": lambda: memory.delete_memories(app_name="app", user_id="u2"),
        "iter_records": scan,
        "upsert_records": lambda: memory.upsert_records([record]),
    }


def _actionable(message: str, where: Path) -> bool:
    m = message.lower()
    return str(where) in message and ("damaged" in m or "corrupt" in m) and ("backup" in m or "move it aside" in m)


async def _every_call(backend: str, config: dict[str, Any], where: Path) -> tuple[list[str], list[str], list[str]]:
    """Run every call on a new memory: the calls tried, those that failed as they must, and
    what went wrong with the others (a foreign exception, an unhelpful message)."""
    reported, wrong = [], []
    memory = LongTermMemory(backend=backend, backend_config=config)
    calls = _calls(memory)
    try:
        for name, call in calls.items():
            try:
                await call()
            except LongTermMemoryError as exc:
                if _actionable(str(exc), where):
                    reported.append(name)
                else:
                    wrong.append(f"{name}: {type(exc).__name__} without the store or what to do: {exc}")
            except BaseException as exc:  # an engine's panic is a BaseException
                wrong.append(f"{name}: {type(exc).__module__}.{type(exc).__name__} escaped: {str(exc)[:300]}")
    finally:
        try:
            await memory.close()
        except BaseException as exc:
            wrong.append(f"close: {type(exc).__name__}: {exc}")
    return list(calls), reported, wrong


LOCAL_DAMAGE: dict[str, tuple[Damage, bool]] = {
    # name: (damage, whether every call must report it)
    "cut to half": (_half, True),
    "garbage page in the middle": (_page_in_the_middle, False),
    "not a database": (_not_a_store, True),
}


@pytest.mark.parametrize("damage", list(LOCAL_DAMAGE))
async def test_a_damaged_local_store_says_so_on_every_call(damage: str, tmp_path: Path):
    path = tmp_path / "memory.db"
    _store("local", {"path": str(path)})
    assert not Path(f"{path}-wal").exists()
    harm, everywhere = LOCAL_DAMAGE[damage]
    harm(path)

    tried, reported, wrong = await _every_call("local", {"path": str(path)}, path)
    assert not wrong, f"{len(wrong)} calls failed wrongly:\n" + "\n".join(w[:400] for w in wrong[:3])
    if everywhere:
        assert reported == tried, f"calls that answered from a damaged store: {sorted(set(tried) - set(reported))}"
    else:
        assert reported, "no call noticed the damaged page"

    cli = subprocess.run(
        [sys.executable, "-m", "longterm.cli", "--config", f'{{"path": "{path}"}}', "stats"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in cli.stdout + cli.stderr, cli.stderr
    if everywhere or cli.returncode:
        assert cli.returncode == 1 and cli.stdout == "", (cli.returncode, cli.stdout)
        lines = cli.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and _actionable(lines[0], path), cli.stderr


def _one(root: Path, pattern: str) -> Path:
    found = sorted(root.rglob(pattern))
    assert found, f"no {pattern} under {root}: the embedded Qdrant store's layout changed; update this test"
    return found[0]


EDGE_DAMAGE: dict[str, tuple[Damage, bool]] = {
    "garbage shard config": (lambda root: _one(root, "edge_config.json").write_text("{not json"), True),
    "garbage WAL head": (lambda root: _garbage(_one(root, "wal/open-1"), 0, 65536), True),
    "garbage in the payload storage": (
        lambda root: _garbage(_one(root, "payload_storage/page_0.dat"), 0, 1 << 20),
        False,
    ),
    "ledger not a database": (lambda root: _not_a_store(_one(root, "ledger.db")), True),
}


@pytest.mark.parametrize("damage", list(EDGE_DAMAGE))
async def test_a_damaged_embedded_qdrant_store_says_so_on_every_call(damage: str, tmp_path: Path):
    root = tmp_path / "qdrant"
    config = {"path": str(root), "engine": "edge"}
    _store("qdrant", config)
    harm, everywhere = EDGE_DAMAGE[damage]
    harm(root)

    tried, reported, wrong = await _every_call("qdrant", config, root)
    assert not wrong, f"{len(wrong)} calls failed wrongly:\n" + "\n".join(w[:400] for w in wrong[:3])
    if everywhere:
        assert reported == tried, f"calls that answered from a damaged store: {sorted(set(tried) - set(reported))}"
    else:
        assert reported, "no call noticed the damaged payload storage"
