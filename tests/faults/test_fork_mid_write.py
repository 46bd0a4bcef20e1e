"""A fork while the parent's store operations run: it waits for them, and the child works.

A child inherits each SQLite connection's lock state as memory without the locks themselves:
forked in the middle of a parent's write it waited for a write lock no process held, or wrote
beside the parent, and the full-text index came out damaged (an earlier release, three parent
threads saving, searching and erasing while ten children saved: 4-6 of 10 children failed, and
one run in three left "database disk image is malformed"). The runner now holds every fork until
no primitive runs; a forked child also joins the store itself when the parent's join was running.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from longterm import LongTermMemory
from longterm.core.sqlite import write_transaction


def test_a_fork_waits_for_the_running_store_operation_and_holds_new_ones(tmp_path: Path) -> None:
    """A fork while an engine operation runs waits until it ended (the child sees it ended), and
    an operation asked for meanwhile starts after the fork."""
    memory = LongTermMemory(app_name="app", backend_config={"path": str(tmp_path / "m.db")}, timeout=20)
    memory.add_sync("warm up", user_id="u1")  # the store made and joined: only the operation below runs
    engine = memory.backend_instance
    running, ended, log = threading.Event(), threading.Event(), []

    def slow_write() -> None:  # a primitive mid-transaction: the write lock held for 0.5 s
        with write_transaction(engine.conn):  # type: ignore[attr-defined]
            running.set()
            time.sleep(0.5)
            log.append("write ended")
        ended.set()

    writer = threading.Thread(target=lambda: memory.portal.call(engine._run("writing", slow_write)))
    writer.start()
    assert running.wait(10)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if ended.is_set() else 7)  # the child's memory is the parent's at the fork
    log.append("forked")
    status = os.waitpid(pid, 0)[1]
    writer.join()
    assert status == 0, "the fork did not wait for the running write"
    assert log == ["write ended", "forked"]
    assert memory.add_sync("after the fork", user_id="u1").saved == 1
    memory.close_sync()


def test_a_child_forked_while_the_parent_joins_its_store_joins_it_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-time join of a memory not told its index (``Router.ready``) is a future other callers
    wait on. A child forked while the parent's join ran inherited it pending, with no thread left
    to finish it: its first call waited for ever."""
    from longterm.memory import routing

    started, release, parent = threading.Event(), threading.Event(), os.getpid()
    real = routing.join

    async def slow_join(router: routing.Router) -> None:
        if os.getpid() == parent:  # the parent's join waits until the child is done; the child's runs
            started.set()
            await asyncio.get_running_loop().run_in_executor(None, release.wait)
        await real(router)

    monkeypatch.setattr(routing, "join", slow_join)
    memory = LongTermMemory(app_name="app", backend_config={"path": str(tmp_path / "m.db")}, timeout=20)
    first = threading.Thread(target=memory.add_sync, args=("parent's note",), kwargs={"user_id": "u1"})
    first.start()
    assert started.wait(10)
    pid = os.fork()
    if pid == 0:
        signal.alarm(15)  # a hang ends the child, and fails the test
        try:
            memory.add_sync("child's note", user_id="u2")
            os._exit(0)
        except BaseException:
            os._exit(1)
    status = os.waitpid(pid, 0)[1]
    release.set()
    first.join()
    assert status == 0, f"the child's save did not end well: status {status}"
    assert [m.text for m in memory.get_all_sync(user_id="u2").memories] == ["child's note"]
    memory.close_sync()
