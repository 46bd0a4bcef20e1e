"""No reader waits on a writer (local): a search answers while another process holds the write lock.

The seam: a store is written and closed; another process then takes SQLite's write lock
(``BEGIN IMMEDIATE``) and holds it for ``HOLD`` seconds. ``longterm search`` started as a
process meanwhile must answer at once (opening an existing store only reads), and a memory
whose own save is waiting for that lock must still answer a search at once (searches run
on a reader connection of their own, not behind the save). Each is bounded well below the
hold: waiting for the lock fails the test.

Why: in WAL mode readers need no lock; before, opening the store wrote its schema (4.3 s
behind a 4 s lock, "database is locked" after 31.6 s behind a 35 s one), and a search queued
behind a save on the engine's one worker thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory

APP, USER = "notes", "ada"
#: How long the other process holds the write lock: far longer than any bound below.
HOLD = 25.0
#: A search answers within this many seconds (a process's start included for the CLI).
ANSWER = 8.0
HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def session(sid: str, text: str) -> dict[str, Any]:
    event = {"id": f"{sid}-e0", "author": "user", "content": {"role": "user", "parts": [{"text": text}]}}
    return {"id": sid, "app_name": APP, "user_id": USER, "events": [event]}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A store holding one memory, closed."""
    memory = LongTermMemory(backend="local", backend_config={"path": str(tmp_path / "memory.db")}, app_name=APP)
    memory.add_session_to_memory_sync(session("s1", "the spare key is under the blue flowerpot"))
    memory.close_sync()
    return tmp_path


@pytest.fixture
def holder(home: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the store's write lock for ``HOLD`` seconds (until killed)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home / "memory.db"), str(HOLD)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def test_cli_search_answers_while_another_process_holds_the_write_lock(home: Path, holder: Any) -> None:
    env = {**os.environ, "LONGTERM_HOME": str(home)}
    cli = [str(Path(sys.executable).parent / "longterm"), "search", "--app", APP, "--user", USER, "--json", "spare key"]
    start = time.monotonic()
    done = subprocess.run(cli, env=env, cwd=home, capture_output=True, text=True, timeout=HOLD - 5)
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    # Answered while the lock was still held: a search that waited for it would have run into the
    # timeout above (HOLD - 5 s). How long it took is the machine's, not the store's, so it is
    # only reported (it took 8.1 s once, on a machine running four test suites at once).
    assert holder.poll() is None, f"the holder let go before the search answered ({took:.1f} s)"
    found = json.loads(done.stdout)
    assert "flowerpot" in json.dumps(found)


async def test_a_search_answers_while_the_same_memorys_save_waits_for_the_lock(home: Path, holder: Any) -> None:
    memory = LongTermMemory(backend="local", backend_config={"path": str(home / "memory.db")}, app_name=APP)
    try:
        assert await asyncio.wait_for(memory.count(app_name=APP, user_id=USER), ANSWER) == 1  # opened
        save = asyncio.create_task(memory.add_session_to_memory(session("s2", "the boat is moored at pier nine")))
        await asyncio.sleep(1.0)
        assert not save.done(), "the save should be waiting for the other process's lock"
        start = time.monotonic()
        found = await asyncio.wait_for(memory.search_memory(app_name=APP, user_id=USER, query="spare key"), ANSWER)
        count = await asyncio.wait_for(memory.count(app_name=APP, user_id=USER), ANSWER)
        took = time.monotonic() - start
        assert [m.content.parts[0].text for m in found.memories] == ["the spare key is under the blue flowerpot"]
        assert count == 1
        assert took < 2.0, f"search took {took:.1f} s behind a save waiting for the lock"
        assert not save.done()
        holder.kill()  # the lock is free: the waiting save lands
        await asyncio.wait_for(save, ANSWER)
        found = await asyncio.wait_for(memory.search_memory(app_name=APP, user_id=USER, query="boat pier"), ANSWER)
        assert [m.content.parts[0].text for m in found.memories] == ["the boat is moored at pier nine"]
    finally:
        holder.kill()
        await asyncio.wait_for(memory.close(), HOLD + 10)


async def test_an_index_never_opened_before_opens_and_answers_behind_the_lock(home: Path, holder: Any) -> None:
    """Opening an index nobody wrote to (the CLI's index lookup opens them) recorded its embedder
    at once, so it waited for the writer; the identity is now recorded with the first write."""
    config = {"path": str(home / "memory.db")}
    memory = LongTermMemory(backend="local", backend_config=config, index="never_opened_before")
    try:
        start = time.monotonic()
        assert await asyncio.wait_for(memory.count(app_name=APP, user_id=USER), ANSWER) == 0
        assert await asyncio.wait_for(memory.search(query="spare key", user_id=USER), ANSWER) == []
        assert time.monotonic() - start < 2.0
    finally:
        holder.kill()
        await asyncio.wait_for(memory.close(), HOLD + 10)
    again = LongTermMemory(backend="local", backend_config=config, index="never_opened_before", app_name=APP)
    try:  # the first write records the (absent) embedder, as opening used to
        await again.add("a first memory", user_id=USER)
        assert again.backend_instance._meta_get("embedder") == ""  # type: ignore[attr-defined]
    finally:
        await again.close()
