"""fork-safety (issue 25): a memory used in the parent, then ``os.fork()`` or multiprocessing's
``fork`` start method (Linux's default before 3.14).

Local, Redis and OpenSearch: in the child the SAME memory object saves and searches, sync and
async, with connections of its own, and exits 0; the parent still works afterwards and sees the
child's memory. Embedded Qdrant (edge, local mode) and mem0's embedded Qdrant serve one process:
in the child the memory answers with a clear ``LongTermMemoryError`` at once, and the child, still
alive, does not keep the store locked: the parent closes it and opens it again meanwhile.

Bounded: a child that has not finished within ``CHILD_LIMIT`` s is killed and fails the test.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory, LongTermMemoryError
from longterm.testing import make_session

#: Seconds a child may take before it is killed and the test fails (a hang).
CHILD_LIMIT = 20.0
DONE = "\nDONE\n"


def _child_main(work: Callable[[], str], out: str, linger: bool) -> int:
    """In the child: ``work()``'s text (or its traceback) to ``out``; 0 if it returned. With
    ``linger`` the child then stays alive (the parent kills it)."""
    code = 1
    try:
        text = work()
        code = 0
    except BaseException:
        text = traceback.format_exc()
    Path(out).write_text(text + DONE)
    while linger:
        time.sleep(1)
    return code


class Child:
    """``work`` run in a forked child (``os.fork`` or a multiprocessing ``fork`` Process)."""

    def __init__(self, work: Callable[[], str], out: Path, *, how: str = "os.fork", linger: bool = False) -> None:
        self.out = out
        self.proc: Any = None
        if how == "os.fork":
            pid = os.fork()
            if pid == 0:  # never return into pytest
                code = 1
                try:
                    code = _child_main(work, str(out), linger)
                finally:
                    os._exit(code)
            self.pid = pid
        else:
            self.proc = multiprocessing.get_context("fork").Process(target=_mp_target, args=(work, str(out), linger))
            self.proc.start()
            self.pid = self.proc.pid

    def result(self) -> str:
        """What the child wrote, once it is done; a child not done within ``CHILD_LIMIT`` fails the test."""
        deadline = time.monotonic() + CHILD_LIMIT
        while time.monotonic() < deadline:
            text = self.out.read_text() if self.out.exists() else ""
            if text.endswith(DONE):
                return text[: -len(DONE)]
            if self.exitcode() is not None:
                pytest.fail(f"the child exited with {self.exitcode()} without finishing its work")
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"the forked child did not finish within {CHILD_LIMIT:g} s (a hang)")

    def exitcode(self) -> int | None:
        if self.proc is not None:
            return self.proc.exitcode  # type: ignore[no-any-return]
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        self._code = os.waitstatus_to_exitcode(status)
        self.pid = -1
        return self._code

    def wait(self) -> int:
        """The child's exit code; killed (and the test failed) when it does not exit in time."""
        deadline = time.monotonic() + CHILD_LIMIT
        while time.monotonic() < deadline:
            if self.pid == -1:
                return self._code
            code = self.exitcode()
            if code is not None:
                return code
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"the forked child did not exit within {CHILD_LIMIT:g} s (a hang)")

    def kill(self) -> None:
        if self.pid > 0:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if self.proc is not None:
                self.proc.join(5)
            else:
                os.waitpid(self.pid, 0)
            self.pid = -1
            self._code = -9


def _mp_target(work: Callable[[], str], out: str, linger: bool) -> None:
    os._exit(_child_main(work, out, linger))


def _use_in_parent(m: LongTermMemory) -> None:
    """Both the sync wrappers and async code, so the parent has every thread and connection."""
    m.add_session_to_memory_sync(make_session("p1", turns=[("user", "the parent grows tulips")]))
    assert asyncio.run(m.count(app_name="app", user_id="u1")) == 1
    assert m.search_memory_sync(app_name="app", user_id="u1", query="tulips").memories


def _save_and_search(m: LongTermMemory, mode: str) -> str:
    """The child's work on the parent's memory object: save, search, count."""
    session = make_session("c1", turns=[("user", "the child grows lilacs")])
    if mode == "sync":
        m.add_session_to_memory_sync(session)
        found = m.search_memory_sync(app_name="app", user_id="u1", query="lilacs").memories
        count = m.count_sync(app_name="app", user_id="u1")
    else:

        async def work() -> tuple[Any, int]:
            await m.add_session_to_memory(session)
            hits = (await m.search_memory(app_name="app", user_id="u1", query="lilacs")).memories
            return hits, await m.count(app_name="app", user_id="u1")

        found, count = asyncio.run(work())
    texts = [e.content.parts[0].text for e in found]
    assert "the child grows lilacs" in texts, texts
    assert count == 2, count
    return "ok"


@pytest.mark.parametrize("how", ["os.fork", "multiprocessing"])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider_id", ["local", "redis", "opensearch"])
def test_the_same_memory_works_in_a_forked_child(
    open_memory: Callable[..., LongTermMemory], tmp_path: Path, mode: str, how: str
) -> None:
    m = open_memory()
    _use_in_parent(m)
    child = Child(lambda: _save_and_search(m, mode), tmp_path / "child.out", how=how)
    assert child.result() == "ok"
    assert child.wait() == 0
    # The parent's own connections are still good, and it sees what the child saved.
    m.add_session_to_memory_sync(make_session("p2", turns=[("user", "the parent grows roses")]))
    assert m.count_sync(app_name="app", user_id="u1") == 3
    assert m.search_memory_sync(app_name="app", user_id="u1", query="lilacs").memories
    assert asyncio.run(m.count(app_name="app", user_id="u1")) == 3


def _refused(m: LongTermMemory) -> str:
    """The child's work on an embedded store its parent holds: every call a clear error, at once."""
    said = []
    for call in (
        lambda: m.count_sync(app_name="app", user_id="u1"),
        lambda: m.add_session_to_memory_sync(make_session("c1", turns=[("user", "the child grows lilacs")])),
        lambda: asyncio.run(m.search_memory(app_name="app", user_id="u1", query="tulips")),
    ):
        try:
            call()
        except LongTermMemoryError as exc:
            said.append(str(exc))
        else:
            said.append("no error")
    m.close_sync()  # closing in the child releases nothing of the parent's
    return "\n".join(said)


@pytest.mark.parametrize(
    ("provider_id", "how"),
    [("qdrant-edge", "os.fork"), ("qdrant-edge", "multiprocessing"), ("qdrant-local", "os.fork"), ("mem0", "os.fork")],
)
def test_an_embedded_qdrant_store_refuses_in_a_forked_child(
    open_memory: Callable[..., LongTermMemory], tmp_path: Path, how: str
) -> None:
    m = open_memory()
    _use_in_parent(m)
    child = Child(lambda: _refused(m), tmp_path / "child.out", how=how, linger=True)
    try:
        said = child.result().splitlines()
        assert len(said) == 3 and all("open in the parent process" in s for s in said), said
        assert all("open a new LongTermMemory in the child" in s.replace("Open", "open") for s in said), said
        # The parent goes on; and while the child lives it does not hold the store: closed and
        # opened again here, the store answers with everything in it.
        m.add_session_to_memory_sync(make_session("p2", turns=[("user", "the parent grows roses")]))
        assert m.count_sync(app_name="app", user_id="u1") == 2
        m.close_sync()
        again = open_memory()
        assert again.count_sync(app_name="app", user_id="u1") == 2
        assert again.search_memory_sync(app_name="app", user_id="u1", query="roses").memories
    finally:
        child.kill()
