"""The auto-saver's lifetimes: what it holds, for how long, and who holds it."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import weakref
from pathlib import Path

import pytest
from google.adk.sessions import InMemorySessionService
from google.genai import types

from longterm import LongTermMemory
from longterm.backends.local import LocalBackend
from longterm.integrations.adk import Agent, Runner
from longterm.testing import make_session
from longterm.testing.scripted_llm import ScriptedLlm

APP = "app"


def memory_at(tmp_path: Path) -> LongTermMemory:
    return LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, app_name=APP)


async def total(memory: LongTermMemory, users: int) -> int:
    return sum([await memory.count(app_name=APP, user_id=f"u{i}") for i in range(users)])


async def eventually(cond, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def sessions(n: int, users: int = 10) -> list[dict]:
    return [make_session(f"s{i}", app=APP, user=f"u{i % users}") for i in range(n)]


async def test_a_thousand_sessions_saved_and_closed_leave_nothing_tracked(tmp_path: Path):
    memory = memory_at(tmp_path)
    saver = memory.auto_saver(min_messages=100, min_seconds=3600)
    for s in sessions(1000):
        saver.notify(s)
    assert (saver.tracked(), saver.pending()) == (1000, 2000)
    await memory.flush()
    assert (saver.tracked(), saver.pending()) == (0, 0)
    assert await total(memory, 10) == 1000  # each session's user line

    memory.release(saver)
    ref = weakref.ref(saver)
    del saver
    gc.collect()
    assert ref() is None  # the memory does not keep it alive
    await memory.flush()  # and flushing without it is fine


async def test_saved_sessions_are_forgotten_once_idle_without_a_flush(tmp_path: Path):
    memory = memory_at(tmp_path)
    saver = memory.auto_saver(min_messages=1, min_seconds=0.05)
    for s in sessions(1000):
        saver.notify(s)

    async def idle() -> bool:
        return saver.tracked() == 0

    await eventually(idle)
    assert await total(memory, 10) == 1000


async def test_the_memory_refers_to_its_savers_weakly(tmp_path: Path):
    memory = memory_at(tmp_path)
    ref = weakref.ref(memory.auto_saver())
    gc.collect()
    assert ref() is None
    # A saver dropped while it holds a tail lives on until its timer saved it, then goes too.
    saver = memory.auto_saver(min_messages=100, min_seconds=0.05)
    saver.notify(make_session("s1", app=APP, user="u0"))
    ref = weakref.ref(saver)
    del saver

    async def gone() -> bool:
        gc.collect()
        return ref() is None

    await eventually(gone)
    assert await memory.count(app_name=APP, user_id="u0") == 1


async def test_an_agent_releases_its_saver_on_close(tmp_path: Path):
    memory = memory_at(tmp_path)
    agent = Agent(name="a", model=ScriptedLlm(), long_term_memory=memory, min_messages_threshold=100)
    sessions_ = InMemorySessionService()
    runner = Runner(agent=agent, app_name=APP, session_service=sessions_)
    await sessions_.create_session(app_name=APP, user_id="u0", session_id="s1")
    msg = types.Content(role="user", parts=[types.Part(text="I keep bees")])
    [e async for e in runner.run_async(user_id="u0", session_id="s1", new_message=msg)]
    ref = weakref.ref(agent.auto_saver)
    await agent.close()  # saves what it held, then lets go
    assert await memory.count(app_name=APP, user_id="u0") == 1
    assert agent.auto_saver is None
    gc.collect()
    assert ref() is None
    await runner.close()


async def test_closing_the_memory_stops_its_savers(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    memory = memory_at(tmp_path)
    saver = memory.auto_saver(min_messages=100, min_seconds=0.05)
    saver.notify(make_session("s1", app=APP, user="u0"))
    with caplog.at_level(logging.WARNING, logger="longterm.autosave"):
        await memory.close(flush=False)
    assert saver.tracked() == 0  # no timer left to save into a closed store
    assert "closed with 2 unsaved events in 1 session(s)" in caplog.text
    await asyncio.sleep(0.1)
    assert "failed" not in caplog.text


async def test_forget_saves_a_closed_session_and_drops_a_deleted_one(tmp_path: Path):
    memory = memory_at(tmp_path)
    saver = memory.auto_saver(min_messages=100, min_seconds=3600)
    closed, deleted = make_session("closed", app=APP, user="u0"), make_session("deleted", app=APP, user="u0")
    saver.notify(closed)
    saver.notify(deleted)
    await saver.forget(APP, "u0", "closed")
    await saver.forget(APP, "u0", "deleted", save=False)
    assert saver.tracked() == 0
    hits = (await memory.search_memory(app_name=APP, user_id="u0", query="hiking")).memories
    assert [h.custom_metadata["session_id"] for h in hits] == ["closed"]


async def test_before_turn_saves_the_users_other_sessions_only(tmp_path: Path):
    memory = memory_at(tmp_path)
    saver = memory.auto_saver(min_messages=100, min_seconds=3600)
    earlier, current = make_session("earlier", app=APP, user="u0"), make_session("current", app=APP, user="u0")
    someone_else = make_session("theirs", app=APP, user="u1")
    for s in (earlier, current, someone_else):
        saver.notify(s)
    await saver.before_turn(current, timeout=2)
    assert await memory.count(app_name=APP, user_id="u0") == 1  # earlier's; current's tail waits for its thresholds
    assert await memory.count(app_name=APP, user_id="u1") == 0
    assert saver.pending() == 4


async def test_a_failed_save_is_retried_by_the_timer(tmp_path: Path):
    class Flaky(LocalBackend):
        down = True

        def _commit(self, *args, **kwargs):
            if self.down:
                raise ConnectionError("disk unplugged")
            super()._commit(*args, **kwargs)

    backend = Flaky(tmp_path / "m.db")
    memory = LongTermMemory(backend=backend, app_name=APP)
    saver = memory.auto_saver(min_messages=1, min_seconds=0.05)
    saver.notify(make_session("s1", app=APP, user="u0"))
    await asyncio.sleep(0.1)
    backend.down = False  # no other turn comes: the timer retries on its own

    async def saved() -> bool:
        return await memory.count(app_name=APP, user_id="u0") == 1

    await eventually(saved)


def test_one_event_loop_per_call_as_in_veadk_scripts(tmp_path: Path):
    # asyncio.run per call: a timer armed on a loop that is gone must not lose or break anything.
    memory = memory_at(tmp_path)
    saver = memory.auto_saver(min_messages=100, min_seconds=3600)

    async def turn(session: dict) -> None:
        saver.notify(session)

    earlier, current = make_session("earlier", app=APP, user="u0"), make_session("current", app=APP, user="u0")
    asyncio.run(turn(earlier))
    asyncio.run(saver.before_turn(current, timeout=2))
    assert memory.count_sync(app_name=APP, user_id="u0") == 1
    asyncio.run(turn(current))
    asyncio.run(saver.flush())
    assert memory.count_sync(app_name=APP, user_id="u0") == 2
    assert saver.tracked() == 0
    memory.close_sync()


def wait_until(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def test_notify_from_plain_sync_code_saves_in_the_background(tmp_path: Path):
    """A sync chat loop (no event loop at all) notifies after each turn: no error, the threshold
    save happens on its own, and flush_sync saves the tail."""
    memory = memory_at(tmp_path)
    saver = memory.auto_saver(min_messages=2, min_seconds=3600)
    one = make_session("s1", app=APP, user="u0", turns=[("user", "I keep bees")])
    saver.notify(one)  # below the threshold: tracked, not saved
    assert saver.pending() == 1
    two = make_session("s2", app=APP, user="u0", turns=[("user", "I live in Porto"), ("user", "I am vegan")])
    saver.notify(two)
    wait_until(lambda: memory.count_sync(app_name=APP, user_id="u0") == 2)
    memory.flush_sync()
    assert memory.count_sync(app_name=APP, user_id="u0") == 3 and saver.tracked() == 0
    memory.close_sync()


def test_adk_sync_runner_turns_are_auto_saved(tmp_path: Path):
    """ADK's ``Runner.run`` runs each turn in an ``asyncio.run`` of its own: the threshold saves
    and the idle timer must not die with the turn's loop."""
    memory = memory_at(tmp_path)
    agent = Agent(
        name="a", model=ScriptedLlm(), long_term_memory=memory, min_messages_threshold=3, min_time_threshold=0.2
    )
    sessions_ = InMemorySessionService()
    runner = Runner(agent=agent, app_name=APP, session_service=sessions_)
    asyncio.run(sessions_.create_session(app_name=APP, user_id="u0", session_id="s1"))
    for text in ("my passport expires in August", "I live in Lisbon", "my cat is Tom"):
        msg = types.Content(role="user", parts=[types.Part(text=text)])
        list(runner.run(user_id="u0", session_id="s1", new_message=msg))
    # 3 user lines (the model's replies are not kept by the default policy); the last one only
    # by the idle timer, after the last turn's loop ended.
    wait_until(lambda: memory.count_sync(app_name=APP, user_id="u0") == 3)
    memory.close_sync()


async def test_closing_the_memory_ends_its_background_thread(tmp_path: Path):
    memory = memory_at(tmp_path)
    saver = memory.auto_saver(min_messages=1, min_seconds=3600)
    saver.notify(make_session("s1", app=APP, user="u0"))
    await memory.flush()
    assert await memory.count(app_name=APP, user_id="u0") == 1
    thread = memory.portal._thread
    assert thread is not None and thread.is_alive()  # the saves ran there
    await memory.close()
    thread.join(5)
    assert not thread.is_alive()
