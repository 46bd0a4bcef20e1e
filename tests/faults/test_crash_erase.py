"""kill -9 in the middle of a big erase on every engine that erases in steps (Redis, OpenSearch,
mem0): nothing of it is found from then on, a save made after it stays, and the next open (or
erase) finishes it. An erase by date or by filter and an expiry sweep alike.

The seam: ``_eraser.py`` erases (a user; by date; by filter; what expired) a batch at a time,
slowly (OpenSearch: 50 records a request; mem0: one memory a step); the test SIGKILLs it after
its first batch, so the store is left half erased (counted in the engine itself, past any mark).
A memory opened before the kill (it never opens the store again) must find nothing the erase
covers: search, pages, count; a memory saved after the kill is found, and survives; a memory
opened afterwards finishes the erase (exactly the records the erase spared are left). mem0's
embedded store allows one process at a time: its reader is opened after the kill with its
open's finishing of pending erases held back, which is what a memory opened before would be.
Before erasure marks the same search found what the kill left behind: on Redis the 1,000
records of the user, on OpenSearch and mem0 the user's records and those an erase by date or
filter had still to delete, and a sweep killed part-way was never finished; on Redis an erase
by date or filter and a sweep stayed so until marks of ids (a record's ``rid`` TAG) came.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory, Scope
from tests.faults.conftest import APP, ROOT, expected_ids, helper, import_sessions

GONE, KEPT = "u0", "u1"
#: Sessions and events of each one imported per engine (two users; the users' turns are kept).
SIZES = {"redis": (30, 100), "opensearch": (30, 100), "mem0": (8, 40)}
#: The clock of the memories that save and read in the expiry test (``import_sessions``' first time).
T0 = 1_700_000_000.0
#: A query every imported turn matches.
QUERY = "tulips planted"


def _erase_killed(backend: str, config: dict[str, Any], log: Path, *how: str) -> list[str]:
    """Run the eraser (``how``: its mode and argument) and SIGKILL it once a first batch went; its lines."""
    cmd = helper("_eraser", backend, json.dumps(config), APP, GONE, *how)
    with open(log, "a", encoding="utf-8") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith("batch") and int(line.split()[1]) > 0:
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.wait(timeout=60)
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, f"the eraser was not killed mid-way: {lines} {log.read_text()[-2000:]}"
    return lines


def _left(memory: LongTermMemory, scope: Scope) -> int:
    """How many records of ``scope`` the store holds, marked for erasure or not (the engine's own count)."""
    engine: Any = memory.backend_instance
    if engine.name == "redis":
        return int(engine._r.scard(engine._set(scope)))
    if engine.name == "opensearch":
        engine.client.indices.refresh(index=engine.index)
        terms = [{"term": {"app_name": scope.app_name}}, {"term": {"user_id": scope.user_id}}]
        return int(engine.client.count(index=engine.index, body={"query": {"bool": {"filter": terms}}})["count"])
    with engine._serial():
        return len({r.id for _, r in engine._items(scope, hide=False)})


async def _reader(backend: str, config: dict[str, Any], erase: Callable[[], Any], **options: Any) -> LongTermMemory:
    """A memory reading the store while the killed erase is pending: opened before the kill; on
    mem0 (one process at a time) opened after it, its open's finishing of pending erases held back."""
    memory = LongTermMemory(backend=backend, backend_config=config, app_name=APP, **options)
    if backend != "mem0":
        await memory.count(app_name=APP, user_id=KEPT)  # opened (and prepared) before the erase
        erase()
        return memory
    erase()
    engine: Any = memory.backend_instance
    engine._erasures_pending = list  # the open finds no erase to finish
    await memory.count(app_name=APP, user_id=KEPT)
    del engine._erasures_pending
    return memory


def _texts(sessions: list[dict[str, Any]]) -> set[str]:
    """The texts the default policy keeps of ``sessions`` (the users' turns)."""
    return {e["content"]["parts"][0]["text"] for s in sessions for e in s["events"] if e["author"] == "user"}


@pytest.mark.asyncio
@pytest.mark.parametrize("provider_id", ["redis", "opensearch", "mem0"])
async def test_an_erase_killed_midway_hides_everything_and_finishes_later(
    backend_name: str, backend_config: dict[str, Any], tmp_path: Path
):
    sessions = import_sessions(*SIZES[backend_name], users=2)  # Redis, OpenSearch: 750 kept turns each user
    each = len(expected_ids(sessions)[GONE])
    async with LongTermMemory(backend=backend_name, backend_config=backend_config, app_name=APP) as loader:
        await loader.add_sessions_to_memory(sessions, concurrency=4)
    scope = Scope(app_name=APP, user_id=GONE)
    erase = lambda: _erase_killed(backend_name, backend_config, tmp_path / "eraser.log")  # noqa: E731
    opened = await _reader(backend_name, backend_config, erase)
    try:
        left = _left(opened, scope)
        assert 0 < left < each, f"the kill did not leave the user half erased ({left} of {each} left)"

        # From the erase on, nothing of it: searches, pages, counts, neighbours.
        assert await opened.search(QUERY, user_id=GONE) == []
        assert (await opened.get_all(user_id=GONE)).memories == []
        assert await opened.count(app_name=APP, user_id=GONE) == 0
        assert len(await opened.search(QUERY, user_id=KEPT)) > 0

        # A save after the erase stays visible, its neighbours only its own session's.
        new = [("user", "I moved the tulips to the greenhouse"), ("user", "the greenhouse is warm")]
        await opened.add_session_to_memory(
            {
                "id": "after",
                "app_name": APP,
                "user_id": GONE,
                "events": [{"author": "user", "content": t} for _, t in new],
            }
        )
        found = await opened.search("greenhouse tulips", user_id=GONE)
        assert {m.text for m in found} == {t for _, t in new}
        assert await opened.count(app_name=APP, user_id=GONE) == 2

        # Opened again, the store finishes the erase: the old records are gone, the new ones stay.
        async with LongTermMemory(backend=backend_name, backend_config=backend_config, app_name=APP) as later:
            assert await later.count(app_name=APP, user_id=GONE) == 2
            assert _left(later, scope) == 2
            assert later.backend_instance._erasures_pending() == []  # type: ignore[attr-defined]
            assert {m.text for m in await later.search("greenhouse tulips", user_id=GONE)} == {t for _, t in new}
            assert await later.count(app_name=APP, user_id=KEPT) == each
    finally:
        await opened.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["before", "sessions", "expired"])
@pytest.mark.parametrize("provider_id", ["redis", "opensearch", "mem0"])
async def test_an_erase_by_date_or_filter_or_a_sweep_killed_midway_is_hidden_and_finished(
    backend_name: str, backend_config: dict[str, Any], tmp_path: Path, how: str
):
    """The older half of a user's sessions erased by date, by a filter on their session ids, or
    swept once expired; killed after a first batch, what it erases is found by no read, what it
    spares by every one (search, pages, count, the store's listing of users), and the next open
    erases exactly the rest."""
    sessions = import_sessions(*SIZES[backend_name], users=2)
    mine = [s for s in sessions if s["user_id"] == GONE]
    erased, spared = mine[: len(mine) // 2], mine[len(mine) // 2 :]
    clock = {"clock": lambda: T0} if how == "expired" else {}
    async with LongTermMemory(backend=backend_name, backend_config=backend_config, app_name=APP, **clock) as loader:
        for s in erased:  # expiring a minute after T0 in the sweep's test
            await loader.add_session_to_memory(s, ttl=60 if how == "expired" else None)
        await loader.add_sessions_to_memory([s for s in sessions if s not in erased], concurrency=4)
    arg = {
        "before": str(spared[0]["events"][0]["timestamp"]),  # every turn of the erased sessions is earlier
        "sessions": json.dumps([s["id"] for s in erased]),
        "expired": str(T0 + 3_600),  # the sweep's clock: an hour on
    }[how]
    scope = Scope(app_name=APP, user_id=GONE)
    erase = lambda: _erase_killed(backend_name, backend_config, tmp_path / "eraser.log", how, arg)  # noqa: E731
    opened = await _reader(backend_name, backend_config, erase, **clock)  # at T0 nothing has expired
    kept, gone = _texts(spared), _texts(erased)
    try:
        left = _left(opened, scope) - len(kept)
        assert 0 < left < len(gone), f"the kill did not leave the erase half done ({left} of {len(gone)} left)"

        assert {m.text for m in (await opened.get_all(user_id=GONE, limit=1_000)).memories} == kept
        assert await opened.count(app_name=APP, user_id=GONE) == len(kept)
        assert {(a, u): n for a, u, n in await opened.scopes()}[(APP, GONE)] == len(kept)  # stats, migrate
        found = await opened.search(QUERY, user_id=GONE, top_k=10)
        assert len(found) == 10 and {m.text for m in found} <= kept  # the top 10 of what is left

        async with LongTermMemory(backend=backend_name, backend_config=backend_config, app_name=APP) as later:
            assert {m.text for m in (await later.get_all(user_id=GONE, limit=1_000)).memories} == kept
            assert _left(later, scope) == len(kept)
            assert later.backend_instance._erasures_pending() == []  # type: ignore[attr-defined]
            assert await later.count(app_name=APP, user_id=KEPT) == len(_texts(sessions)) - len(kept | gone)
    finally:
        await opened.close()
