"""Closing a memory while other threads and loops use it: every call in flight or made later
either completes or fails with a ``LongTermMemoryError`` saying the memory is closed; no
caller waits forever, nothing runs on the closed connection, and closing twice is harmless.

Why: ``close_sync`` used to stop the sync portal's loop under the calls of other threads
(their futures were never resolved: the threads blocked forever), engines marked themselves
closed only after releasing the connection (queued work ran on it: "used before _open"), and
every call after close said "cannot schedule new futures after shutdown".
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory, LongTermMemoryError
from longterm._sync import SyncPortal
from longterm.backends.local import LocalBackend
from longterm.errors import BackendError
from longterm.records import Scope
from tests.conftest import make_session

#: A generous bound for threads to end: a hang check, not a speed check.
HANG = 60.0
S = Scope(app_name="app", user_id="u1")


def _memory(backend: str, tmp_path: Path, n: int) -> LongTermMemory:
    if backend == "local":
        return LongTermMemory(backend="local", backend_config={"path": str(tmp_path / f"m{n}.db")})
    return LongTermMemory(backend="qdrant", backend_config={"path": str(tmp_path / f"q{n}")})  # embedded (edge)


def _closed(exc: BaseException | None) -> bool:
    return isinstance(exc, LongTermMemoryError) and "closed" in str(exc)


def _sync_user(m: LongTermMemory, i: int, ready: threading.Event, out: dict[str, Any]) -> None:
    """Save, search and count through the *_sync wrappers until a call fails."""
    n = 0
    try:
        while True:
            turns = [("user", f"kiwi note {i} {n} {j}") for j in range(150)]
            m.add_session_to_memory_sync(make_session(sid=f"t{i}-{n}", turns=turns))
            m.search_memory_sync(app_name="app", user_id="u1", query="kiwi")
            m.count_sync(app_name="app", user_id="u1")
            ready.set()
            n += 1
    except BaseException as exc:
        out[f"sync{i}"] = exc
    finally:
        ready.set()


def _async_user(m: LongTermMemory, ready: threading.Event, out: dict[str, Any]) -> None:
    """The same through the async methods, on a loop of this thread's own."""

    async def use() -> None:
        n = 0
        while True:
            await m.add_session_to_memory(make_session(sid=f"a-{n}", turns=[("user", f"fig {n}")] * 50))
            await m.search_memory(app_name="app", user_id="u1", query="fig")
            ready.set()
            n += 1

    try:
        asyncio.run(use())
    except BaseException as exc:
        out["async"] = exc
    finally:
        ready.set()


@pytest.mark.parametrize("backend", ["local", "qdrant"])
def test_close_sync_while_threads_use_the_memory_ends_every_call_as_closed(backend: str, tmp_path: Path) -> None:
    for n in range(3):  # the race had several outcomes; each round must end them all the same way
        m = _memory(backend, tmp_path, n)
        m.count_sync(app_name="app", user_id="u1")
        out: dict[str, Any] = {}
        readies = [threading.Event() for _ in range(5)]
        threads = [threading.Thread(target=_sync_user, args=(m, i, readies[i], out), daemon=True) for i in range(4)] + [
            threading.Thread(target=_async_user, args=(m, readies[4], out), daemon=True)
        ]
        for t in threads:
            t.start()
        for r in readies:
            r.wait(HANG)
        m.close_sync()  # while the others' calls are in flight
        for t in threads:
            t.join(HANG)
        assert not [t.name for t in threads if t.is_alive()], "a caller still waits after close_sync"
        assert sorted(out) == ["async", "sync0", "sync1", "sync2", "sync3"]
        wrong = {k: f"{type(e).__name__}: {e}" for k, e in out.items() if not _closed(e)}
        assert not wrong, f"calls that did not end as 'closed': {wrong}"
        m.close_sync()  # twice: harmless


@pytest.mark.parametrize("backend", ["local", "qdrant"])
def test_every_call_after_close_says_the_memory_is_closed(backend: str, tmp_path: Path) -> None:
    m = _memory(backend, tmp_path, 0)
    m.add_session_to_memory_sync(make_session())
    m.close_sync()
    calls = [
        lambda: m.search_memory_sync(app_name="app", user_id="u1", query="hiking"),
        lambda: m.count_sync(app_name="app", user_id="u1"),
        lambda: m.add_session_to_memory_sync(make_session(sid="s2")),
        lambda: m.delete_memories_sync(app_name="app", user_id="u1"),
        lambda: asyncio.run(m.count(app_name="app", user_id="u1")),
        lambda: asyncio.run(m.search_memory(app_name="app", user_id="u1", query="hiking")),
    ]
    for call in calls:
        with pytest.raises(LongTermMemoryError, match="is closed; open a new LongTermMemory"):
            call()
    m.close_sync()
    asyncio.run(m.close())  # closing again, either way, does nothing


def test_stopping_the_portal_frees_callers_whose_calls_never_end() -> None:
    portal = SyncPortal()
    entered = [threading.Event(), threading.Event(), threading.Event()]

    async def forever() -> None:
        entered[0].set()
        await asyncio.Event().wait()

    async def stubborn() -> None:  # swallows cancellation: only the portal's fallback frees its caller
        entered[1].set()
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue

    async def quick() -> int:
        entered[2].set()
        await asyncio.sleep(0.2)
        return 42

    out: dict[str, Any] = {}

    def caller(name: str, coro: Any) -> None:
        try:
            out[name] = portal.call(coro)
        except BaseException as exc:
            out[name] = exc

    threads = [
        threading.Thread(target=caller, args=("forever", forever()), daemon=True),
        threading.Thread(target=caller, args=("stubborn", stubborn()), daemon=True),
    ]
    for t in threads:
        t.start()
    for e in entered[:2]:
        e.wait(HANG)
    quick_thread = threading.Thread(target=caller, args=("quick", quick()), daemon=True)
    quick_thread.start()
    entered[2].wait(HANG)  # the quick call is in flight when stop begins
    portal.stop(grace=2.0)
    for t in [*threads, quick_thread]:
        t.join(HANG)
    assert not [t for t in [*threads, quick_thread] if t.is_alive()], "a caller still waits after stop"
    assert out["quick"] == 42  # a call that ends within the grace period completes
    for name in ("forever", "stubborn"):
        assert isinstance(out[name], BackendError) and "closed while this call ran" in str(out[name]), out[name]
    entered[2].clear()
    assert portal.call(quick()) == 42  # a call after stop runs on a loop of its own
    portal.stop()  # twice: harmless


def _close(m: LongTermMemory, start: threading.Barrier, out: dict[int, BaseException | None], i: int) -> None:
    start.wait(HANG)
    try:
        m.close_sync()
        out[i] = None
    except BaseException as exc:
        out[i] = exc


def test_closing_from_several_threads_at_once_is_harmless(tmp_path: Path) -> None:
    for n in range(20):
        m = _memory("local", tmp_path, n)
        m.count_sync(app_name="app", user_id="u1")
        start = threading.Barrier(3)
        out: dict[int, BaseException | None] = {}
        threads = [threading.Thread(target=_close, args=(m, start, out, i), daemon=True) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(HANG)
        assert not [t for t in threads if t.is_alive()]
        assert out == {0: None, 1: None, 2: None}
        with pytest.raises(LongTermMemoryError, match="is closed; open a new LongTermMemory"):
            m.count_sync(app_name="app", user_id="u1")


async def test_work_queued_behind_close_never_reaches_the_closed_store(tmp_path: Path) -> None:
    store = LocalBackend(tmp_path / "m.db")
    await store.count(S)
    entered, gate = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        gate.wait(HANG)

    holding = asyncio.ensure_future(store._run("holding the worker", hold))
    await asyncio.to_thread(entered.wait, HANG)
    queued = asyncio.ensure_future(store.count(S))  # asked before close, still waiting for the worker
    closing = asyncio.ensure_future(store.close())
    await asyncio.sleep(0)  # close has begun
    with pytest.raises(BackendError, match="is closed; open a new LongTermMemory"):
        await store.count(S)
    gate.set()
    await holding
    await closing
    try:
        assert await queued == 0
    except BackendError as exc:  # never "used before _open": it may only say closed
        assert "is closed; open a new LongTermMemory" in str(exc)
    with pytest.raises(BackendError, match="is closed; open a new LongTermMemory"):
        await store.count(S)
    await store.close()


async def test_a_close_cut_short_by_a_deadline_still_releases_the_store(tmp_path: Path) -> None:
    """A shutdown hook closes under a deadline while a save runs: the caller hears its timeout,
    and the store is still released once the save ends (not left open for the process's life)."""
    started, released = threading.Event(), threading.Event()

    class Slow(LocalBackend):
        def _commit(self, *args: Any, **kwargs: Any) -> None:
            started.set()
            threading.Event().wait(1.0)
            super()._commit(*args, **kwargs)

        def _shut(self) -> None:
            super()._shut()
            released.set()

    memory = LongTermMemory(backend=Slow(tmp_path / "m.db"))
    save = asyncio.create_task(memory.add_session_to_memory(make_session()))
    while not started.is_set():
        await asyncio.sleep(0.01)
    with pytest.raises(asyncio.TimeoutError):  # TimeoutError from Python 3.11 on
        await asyncio.wait_for(memory.close(), 0.1)
    await asyncio.gather(save, return_exceptions=True)
    assert await asyncio.to_thread(released.wait, 10)
