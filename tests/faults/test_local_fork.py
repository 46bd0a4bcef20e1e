"""The local engine's fork hook (``_forget_after_fork``) in a real ``os.fork()`` child.

The seam: a local store is used (a save, searches on the reader threads: the parent has a
writer and reader connections and threads); a thread of the parent holds the engine's
reader lock and its vectors' lock at the moment of the fork, as a search opening its
connection would. In the child, the hook runs, then the child saves and searches with the
primitives on threads of its own: it must neither hang (bounded) nor touch the parent's
connections (kept open and referenced, never closed, even after a collection). After the
child exits, the parent's memory still works and sees what the child saved.

The core's part (``os.register_at_fork`` calling the hook, new worker pools) is tested end to
end with the core; this checks the hook alone, so it calls the primitives directly.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from longterm import LongTermMemory
from longterm.backends.local import LocalBackend
from longterm.backends.local import store as local_store
from longterm.core.engine import Query
from longterm.policies import resolve_policy
from longterm.records import Scope
from longterm.retrieval.embedders import HashingEmbedder
from longterm.retrieval.text import query_terms
from longterm.saves import plan_save
from longterm.sessions import read_session

APP, USER = "forked", "fran"
SCOPE = Scope(app_name=APP, user_id=USER)
#: Seconds the child may take; past them it is killed and the test fails.
LIMIT = 20.0


def session(sid: str, text: str) -> dict[str, object]:
    event = {"id": f"{sid}-e0", "author": "user", "content": {"role": "user", "parts": [{"text": text}]}}
    return {"id": sid, "app_name": APP, "user_id": USER, "events": [event]}


def save(store: LocalBackend, sid: str, text: str) -> None:
    """A save with the primitives, on this thread (in a child, the core's threads are gone)."""
    records = plan_save(read_session(session(sid, text)), set(), resolve_policy(None)).records
    vectors = store.embedder.embed([r.text for r in records], kind="passage") if store.embedder else None
    store._commit(records, vectors, SCOPE, sid, [r.event_id for r in records])


def child(store: LocalBackend, inherited: list[sqlite3.Connection]) -> int:
    """In the child: the hook, then a save and searches of its own; 0 when all went well."""
    store._forget_after_fork()
    gc.collect()
    store._open()
    records = plan_save(
        read_session(session("from-child", "the child planted a walnut tree")), set(), resolve_policy(None)
    ).records
    vector = store.embedder.embed([r.text for r in records], kind="passage") if store.embedder else None
    store._commit(records, vector, SCOPE, "from-child", [r.event_id for r in records])
    pool = store._reading_pool()
    query = Query("walnut", query_terms("walnut", stem=False))
    near = store.embedder.embed(["walnut"], kind="query")[0] if store.embedder else None
    hits = pool.submit(store._search, SCOPE, query, near, 5, None).result(LIMIT / 2)
    assert hits[0].record.text == "the child planted a walnut tree"
    assert pool.submit(store._count, SCOPE).result(LIMIT / 2) == 2
    # Connections of its own; the parent's dropped, not closed (a closed one refuses even this).
    assert store._conn not in inherited and not set(store._readers) & set(inherited)
    for conn in inherited:
        conn.total_changes  # noqa: B018
        assert conn in local_store._INHERITED
    return 0


def run_child(work: Callable[[], int]) -> int:
    """``work()`` in a forked child; its exit code (a child past ``LIMIT`` is killed: the test fails)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's outcome is its exit code
        code = 1
        try:
            code = work()
        except BaseException as exc:
            os.write(2, f"child failed: {type(exc).__name__}: {exc}\n".encode())
        os._exit(code)
    return wait_child(pid)


def wait_child(pid: int) -> int:
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError(f"the child hung for {LIMIT:g} s")


async def test_a_forked_child_opens_its_own_connections_and_the_parent_keeps_its_own(tmp_path: Path) -> None:
    store = LocalBackend(tmp_path / "memory.db", embedder=HashingEmbedder(64))
    memory = LongTermMemory(backend=store, app_name=APP)
    try:
        await memory.add_session_to_memory(session("s1", "the parent keeps bees in the orchard"))
        assert len((await memory.search_memory(app_name=APP, user_id=USER, query="bees")).memories) == 1
        inherited = [c for c in (store._conn, *store._readers) if c is not None]
        assert len(inherited) >= 2  # the writer and a reader

        # A search opening its reader at the moment of the fork: both locks held by another thread.
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            assert store._vectors is not None
            with store._reader_lock, store._vectors._lock:
                held.set()
                release.wait(LIMIT)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(LIMIT)
        try:
            code = await asyncio.to_thread(run_child, lambda: child(store, inherited))
        finally:
            release.set()
            holder.join(LIMIT)
        assert code == 0

        # The parent's connections are its own and still good; it sees the child's save.
        found = await memory.search_memory(app_name=APP, user_id=USER, query="walnut")
        assert found.memories[0].content.parts[0].text == "the child planted a walnut tree"
        assert await memory.count(app_name=APP, user_id=USER) == 2
    finally:
        await memory.close()


async def test_a_childs_saves_outlive_the_parent_closing_the_store(tmp_path: Path) -> None:
    """A worker forked from a process that then closes its memory (a pool's parent finishing
    first) keeps saving: the parent's last close must not checkpoint and delete the WAL under
    the child (SQLite counts locks per process; the child takes the ones it inherited)."""
    db = tmp_path / "memory.db"
    store = LocalBackend(db)
    memory = LongTermMemory(backend=store, app_name=APP)
    await memory.add_session_to_memory(session("s1", "the parent keeps bees in the orchard"))
    assert await memory.count(app_name=APP, user_id=USER) == 1  # a reader connection, too
    saved, closed = os.pipe(), os.pipe()

    def work() -> int:
        store._forget_after_fork()
        store._open()
        save(store, "c1", "the first thing the child saved")
        os.write(saved[1], b"1")
        assert os.read(closed[0], 1) == b"1"  # the parent closed its memory meanwhile
        save(store, "c2", "the second thing the child saved")
        return 0

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's outcome is its exit code
        code = 1
        try:
            code = work()
        except BaseException as exc:
            os.write(2, f"child failed: {type(exc).__name__}: {exc}\n".encode())
        os._exit(code)
    try:
        assert await asyncio.wait_for(asyncio.to_thread(os.read, saved[0], 1), LIMIT) == b"1"
        await asyncio.wait_for(memory.close(), LIMIT)
        os.write(closed[1], b"1")
    finally:
        code = await asyncio.to_thread(wait_child, pid)
    assert code == 0
    again = LongTermMemory(backend=LocalBackend(db), app_name=APP)
    try:
        assert await again.count(app_name=APP, user_id=USER) == 3
        found = await again.search_memory(app_name=APP, user_id=USER, query="second")
        assert [m.content.parts[0].text for m in found.memories] == ["the second thing the child saved"]
    finally:
        await again.close()
