"""Agents with long-term memory, end to end with ADK's Runner, an in-memory session
service and a scripted model (it stands in for the LLM, never for memory)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from google.adk.sessions import InMemorySessionService
from google.adk.tools import load_memory as adk_module_load_memory
from google.adk.tools.load_memory_tool import LoadMemoryTool
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types

from longterm import ConfigurationError, LongTermMemory
from longterm.backends.local import LocalBackend
from longterm.integrations.adk import Agent, Runner
from longterm.integrations.scripted_llm import ScriptedLlm

APP = "assistant_app"


def make(tmp_path: Path, name: str = "m.db", **agent_kwargs):
    memory = LongTermMemory(backend_config={"path": str(tmp_path / name)}, app_name=APP)
    agent = Agent(name="assistant", model=ScriptedLlm(), long_term_memory=memory, **agent_kwargs)
    sessions = InMemorySessionService()
    return memory, agent, sessions, Runner(agent=agent, app_name=APP, session_service=sessions)


async def say(runner: Runner, sessions: InMemorySessionService, user: str, session_id: str, text: str) -> list:
    if await sessions.get_session(app_name=APP, user_id=user, session_id=session_id) is None:
        await sessions.create_session(app_name=APP, user_id=user, session_id=session_id)
    msg = types.Content(role="user", parts=[types.Part(text=text)])
    return [e async for e in runner.run_async(user_id=user, session_id=session_id, new_message=msg)]


def tool_output(events: list) -> str:
    return str([p.function_response.response for e in events if e.content for p in e.content.parts if p.function_response])


async def eventually(cond, timeout: float = 5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not await cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_remembers_across_sessions_and_processes(tmp_path: Path):
    memory, agent, sessions, runner = make(tmp_path, min_messages_threshold=1)
    await say(runner, sessions, "ana", "s1", "My favourite tea is genmaicha")
    await eventually(lambda: _count(memory, "ana", 1))  # auto-saved in the background, no flush
    events = await say(runner, sessions, "ana", "s2", "recall: favourite tea")
    assert "genmaicha" in tool_output(events)
    assert "genmaicha" in events[-1].content.parts[0].text
    await runner.close()

    # a new process: everything re-created, the store is all that remains
    memory2, agent2, sessions2, runner2 = make(tmp_path)
    events = await say(runner2, sessions2, "ana", "s3", "recall: tea")
    assert "genmaicha" in tool_output(events)
    await runner2.close()


async def _count(memory: LongTermMemory, user: str, n: int) -> bool:
    return await memory.count(app_name=APP, user_id=user) == n


async def test_message_threshold(tmp_path: Path):
    memory, agent, sessions, runner = make(tmp_path, min_messages_threshold=4, min_time_threshold=3600)
    await say(runner, sessions, "bo", "s1", "fact one")  # 2 events: below the threshold
    await asyncio.sleep(0.1)
    assert await memory.count(app_name=APP, user_id="bo") == 0
    await say(runner, sessions, "bo", "s1", "fact two")  # 4 events
    await eventually(lambda: _count(memory, "bo", 2))


async def test_time_threshold(tmp_path: Path):
    memory, agent, sessions, runner = make(tmp_path, min_messages_threshold=100, min_time_threshold=0.3)
    await say(runner, sessions, "cy", "s1", "fact one")
    await asyncio.sleep(0.1)
    assert await memory.count(app_name=APP, user_id="cy") == 0
    await asyncio.sleep(0.3)
    await say(runner, sessions, "cy", "s1", "fact two")
    await eventually(lambda: _count(memory, "cy", 2))


async def test_new_session_saves_the_previous_tail(tmp_path: Path):
    memory, agent, sessions, runner = make(tmp_path, min_messages_threshold=100, min_time_threshold=3600)
    await say(runner, sessions, "di", "old", "I was born in Porto")
    await say(runner, sessions, "di", "new", "hello again")
    await eventually(lambda: _count(memory, "di", 1))
    assert (await memory.search_memory(app_name=APP, user_id="di", query="born")).memories[0].custom_metadata["session_id"] == "old"


async def test_runner_close_flushes_every_tail(tmp_path: Path):
    memory, agent, sessions, runner = make(tmp_path, min_messages_threshold=100, min_time_threshold=3600)
    await say(runner, sessions, "ed", "s1", "first fact")
    await say(runner, sessions, "fi", "s1", "second fact")
    assert agent.auto_saver.pending() == 4
    await runner.close()
    assert await memory.count(app_name=APP, user_id="ed") == 1
    assert await memory.count(app_name=APP, user_id="fi") == 1
    assert agent.auto_saver.pending() == 0


async def test_failing_backend_never_breaks_the_reply(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    class Flaky(LocalBackend):
        down = True
        written: list = []

        def _commit(self, records, vectors, scope, session_id, event_ids):
            if self.down:
                raise ConnectionError("disk unplugged")
            type(self).written.extend(r.id for r in records)
            super()._commit(records, vectors, scope, session_id, event_ids)

    backend = Flaky(tmp_path / "m.db")
    memory = LongTermMemory(backend=backend, app_name=APP)
    agent = Agent(name="assistant", model=ScriptedLlm(), long_term_memory=memory, min_messages_threshold=1)
    sessions = InMemorySessionService()
    runner = Runner(agent=agent, app_name=APP, session_service=sessions)
    with caplog.at_level(logging.WARNING, logger="longterm.autosave"):
        events = await say(runner, sessions, "gu", "s1", "my locker code is 4711")
        assert events[-1].content.parts[0].text == "ok"  # the reply arrived
        await asyncio.sleep(0.2)
    assert "auto-save of session s1 failed" in caplog.text and "disk unplugged" in caplog.text
    backend.down = False
    await say(runner, sessions, "gu", "s1", "and my bike is red")  # next trigger retries
    await eventually(lambda: _count(memory, "gu", 2))
    assert len(Flaky.written) == len(set(Flaky.written)) == 2


async def test_two_agents_two_memories(tmp_path: Path):
    m1, a1, s1, r1 = make(tmp_path, "one.db", min_messages_threshold=1)
    m2, a2, s2, r2 = make(tmp_path, "two.db", min_messages_threshold=1)
    await say(r1, s1, "ho", "x", "secret of agent one: blue")
    await say(r2, s2, "ho", "x", "secret of agent two: green")
    await eventually(lambda: _count(m1, "ho", 1))
    await eventually(lambda: _count(m2, "ho", 1))
    assert "blue" in tool_output(await say(r1, s1, "ho", "y", "recall: secret"))
    out2 = tool_output(await say(r2, s2, "ho", "y", "recall: secret"))
    assert "green" in out2 and "blue" not in out2


def test_tools_are_the_agents_own(tmp_path: Path):
    memory, agent, *_ = make(tmp_path, preload_memory=True)
    tools = [t for t in agent.tools if isinstance(t, LoadMemoryTool)]
    assert len(tools) == 1 and tools[0] is not adk_module_load_memory
    assert any(isinstance(t, PreloadMemoryTool) for t in agent.tools)
    _, other, *_ = make(tmp_path, "b.db")
    assert [t for t in other.tools if isinstance(t, LoadMemoryTool)][0] is not tools[0]
    plain = Agent(name="plain", model=ScriptedLlm())
    assert plain.tools == []


@pytest.mark.parametrize("var, value, message", [
    ("LONGTERM_MIN_MESSAGES_THRESHOLD", "ten", "MIN_MESSAGES_THRESHOLD from environment variable LONGTERM_MIN_MESSAGES_THRESHOLD must be an integer"),
    ("MIN_TIME_THRESHOLD", "-5", "must be zero or more"),
    ("MIN_MESSAGES_THRESHOLD", "0", "at least 1"),
])
def test_bad_thresholds_fail_at_construction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str, message: str):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigurationError, match=message):
        make(tmp_path)


def test_thresholds_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MIN_MESSAGES_THRESHOLD", "3")
    monkeypatch.setenv("LONGTERM_MIN_TIME_THRESHOLD", "7.5")
    _, agent, *_ = make(tmp_path)
    assert (agent.auto_saver.min_messages, agent.auto_saver.min_seconds) == (3, 7.5)
    _, agent, *_ = make(tmp_path, "b.db", min_messages_threshold=2)
    assert agent.auto_saver.min_messages == 2


async def test_recover_after_a_crash(tmp_path: Path):
    memory, agent, sessions, runner = make(tmp_path, auto_save_session=False)
    await say(runner, sessions, "iv", "s1", "I moved to Oslo")
    await say(runner, sessions, "iv", "s2", "I work as a nurse")
    # the process dies here: no flush, no close; the session store survives
    fresh = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, app_name=APP)
    results = await fresh.recover_sessions(sessions, app_name=APP, user_id="iv")
    assert sum(r.saved for r in results) == 2
    assert await fresh.count(app_name=APP, user_id="iv") == 2
    assert sum(r.saved for r in await fresh.recover_sessions(sessions, app_name=APP, user_id="iv")) == 0


async def test_as_tool_for_openai_style_function_calling(tmp_path: Path):
    memory = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    await memory.add_session_to_memory({"id": "s", "app_name": "a", "user_id": "u", "events": [
        {"id": "1", "author": "user", "content": {"role": "user", "parts": [{"text": "My cat is called Miso"}]}}]})
    tool = memory.as_tool(app_name="a", user_id="u")
    schema = tool.openai_schema()
    assert schema["function"]["name"] == "load_memory"
    assert schema["function"]["parameters"]["required"] == ["query"]
    out = await tool(query="cat name")
    assert out["memories"][0]["text"] == "My cat is called Miso"
    other = memory.as_tool(app_name="a", user_id="someone-else")
    assert (await other(query="cat"))["memories"] == []
