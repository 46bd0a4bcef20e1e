"""Agents with long-term memory, end to end with ADK's Runner, an in-memory session
service and a scripted model (it stands in for the LLM, never for memory)."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest
from google.adk.sessions import InMemorySessionService
from google.adk.tools import load_memory as adk_module_load_memory
from google.adk.tools.load_memory_tool import LoadMemoryTool
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types

from longterm import ConfigurationError, LongTermMemory, MemoryAutoSavePolicy
from longterm.backends.local import LocalBackend
from longterm.integrations.adk import Agent, Runner
from longterm.retrieval.embedders import HashingEmbedder
from longterm.telemetry import pseudonym
from longterm.testing.scripted_llm import ScriptedLlm

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
    parts = [p for e in events if e.content for p in e.content.parts or []]
    return str([p.function_response.response for p in parts if p.function_response])


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


async def test_time_threshold_fires_without_another_turn(tmp_path: Path):
    # The user says one thing and leaves: the idle timer saves it; no later turn is needed.
    memory, agent, sessions, runner = make(tmp_path, min_messages_threshold=100, min_time_threshold=0.2)
    await say(runner, sessions, "cy", "s1", "fact one")
    await eventually(lambda: _count(memory, "cy", 1))
    await say(runner, sessions, "cy", "s1", "fact two")
    await eventually(lambda: _count(memory, "cy", 2))
    await eventually(lambda: _untracked(agent))  # saved and idle: forgotten


async def _untracked(agent: Agent) -> bool:
    return agent.auto_saver.tracked() == 0


async def test_new_session_saves_the_previous_tail(tmp_path: Path):
    memory, agent, sessions, runner = make(tmp_path, min_messages_threshold=100, min_time_threshold=3600)
    await say(runner, sessions, "di", "old", "I was born in Porto")
    await say(runner, sessions, "di", "new", "hello again")
    assert await memory.count(app_name=APP, user_id="di") == 1  # saved when the new turn started
    hit = (await memory.search_memory(app_name=APP, user_id="di", query="born")).memories[0]
    assert hit.custom_metadata["session_id"] == "old"


# -- save before recall ---------------------------------------------------------------------


async def test_next_session_recalls_the_last_one_in_its_first_turn(tmp_path: Path):
    # Default thresholds (10 events, 60 s): session A's one turn is far below both.
    memory, agent, sessions, runner = make(tmp_path)
    await say(runner, sessions, "jo", "A", "My passport expires in August 2027")
    events = await say(runner, sessions, "jo", "B", "recall: passport")
    assert "August 2027" in tool_output(events)
    await runner.close()


async def test_save_before_recall_covers_only_that_users_sessions(tmp_path: Path):
    memory, agent, sessions, runner = make(tmp_path)
    await say(runner, sessions, "ka", "A", "Ka likes plums")
    await say(runner, sessions, "lu", "A", "Lu likes pears")
    await say(runner, sessions, "ka", "B", "recall: likes")
    assert await memory.count(app_name=APP, user_id="ka") == 1
    assert await memory.count(app_name=APP, user_id="lu") == 0  # lu started no turn: nothing forced
    await runner.close()


async def test_a_slow_save_delays_the_turn_by_the_timeout_at_most(tmp_path: Path):
    gate = threading.Event()

    class SlowToStore(HashingEmbedder):  # saving hangs; searching does not
        def embed(self, texts, *, kind="passage"):
            if kind == "passage":
                gate.wait(30)
            return super().embed(texts, kind=kind)

    memory = LongTermMemory(backend=LocalBackend(tmp_path / "m.db", embedder=SlowToStore()), app_name=APP)
    agent = Agent(name="assistant", model=ScriptedLlm(), long_term_memory=memory, save_before_recall_timeout=0.05)
    sessions = InMemorySessionService()
    runner = Runner(agent=agent, app_name=APP, session_service=sessions)
    await say(runner, sessions, "mo", "A", "My locker is number 12")
    events = await say(runner, sessions, "mo", "B", "recall: locker")  # A's save hangs: the turn goes on
    assert events[-1].content.parts[0].text.startswith("From memory:")
    gate.set()
    await eventually(lambda: _count(memory, "mo", 1))  # the save went on in the background
    await runner.close()


class RecordingLlm(ScriptedLlm):
    """The scripted model, also keeping the text of every request it was sent."""

    requests: list[str] = []

    async def generate_content_async(self, llm_request, stream: bool = False):
        self.requests.append(" ".join(p.text or "" for c in llm_request.contents for p in c.parts or []))
        async for response in super().generate_content_async(llm_request, stream):
            yield response


FACT = "记一下：我对花生过敏，而且我是素食者。"


async def test_veadk_example_recalls_in_session_twos_first_turn():
    # VeADK's documented cross-session example: default settings, VeADK's Runner calls.
    memory = LongTermMemory(backend="local", app_name="ltm_demo")
    agent = Agent(name="ltm_agent", model=ScriptedLlm(), long_term_memory=memory, auto_save_session=True)
    runner = Runner(agent=agent, app_name="ltm_demo", user_id="user-42")
    assert await runner.run(messages=FACT, session_id="session-1") == "ok"
    reply = await runner.run(messages="recall: 饮食限制 过敏 素食", session_id="session-2")
    assert "花生过敏" in reply and "素食者" in reply
    await runner.close()


async def test_veadk_example_with_preload_memory():
    model = RecordingLlm(requests=[])
    memory = LongTermMemory(backend="local", app_name="ltm_demo")
    agent = Agent(name="ltm_agent", model=model, long_term_memory=memory, preload_memory=True)
    runner = Runner(agent=agent, app_name="ltm_demo", user_id="user-42")
    await runner.run(messages=FACT, session_id="session-1")
    await runner.run(messages="我有什么饮食限制？我对什么过敏？", session_id="session-2")
    assert FACT in model.requests[-1]  # preloaded into session 2's first model call
    await runner.close()


# -- role names and reconsidering -------------------------------------------------------------


async def test_veadk_policy_with_assistant_role_keeps_the_models_words(tmp_path: Path):
    policy = MemoryAutoSavePolicy(preset="custom", include_roles=["user", "assistant"])
    memory, agent, sessions, runner = make(tmp_path, min_messages_threshold=1, auto_save_memory_policy=policy)
    await say(runner, sessions, "ny", "s1", "hello")
    await eventually(lambda: _count(memory, "ny", 2))
    assert sorted([r.role async for r in memory.iter_records(app_name=APP, user_id="ny")]) == ["model", "user"]
    await runner.close()


@pytest.mark.parametrize("reconsider, saved", [(False, 3), (True, 4)])
async def test_an_agent_can_reconsider_what_an_older_policy_dropped(tmp_path: Path, reconsider: bool, saved: int):
    memory, agent, sessions, runner = make(tmp_path, min_messages_threshold=1)  # default policy: user text only
    await say(runner, sessions, "ol", "s1", "first question")
    await runner.close()
    assert await memory.count(app_name=APP, user_id="ol") == 1  # the reply "ok" was dropped, and marked handled
    await memory.close()

    both = {"preset": "custom", "include_roles": ["user", "assistant"]}
    memory2, agent2, _, _ = make(
        tmp_path, min_messages_threshold=1, auto_save_memory_policy=both, auto_save_reconsider=reconsider
    )
    runner2 = Runner(agent=agent2, app_name=APP, session_service=sessions)
    await say(runner2, sessions, "ol", "s1", "second question")
    await runner2.close()
    # the second turn's question and reply, plus (reconsidered) the first turn's reply
    assert await memory2.count(app_name=APP, user_id="ol") == saved


# -- memory failure is not a turn failure -------------------------------------------------------


class Unsearchable(LocalBackend):
    def _fulltext(self, *args, **kwargs):
        raise ConnectionError("search node on fire")


def make_unsearchable(tmp_path: Path, **agent_kwargs):
    memory = LongTermMemory(backend=Unsearchable(tmp_path / "m.db"), app_name=APP)
    agent = Agent(name="assistant", model=ScriptedLlm(), long_term_memory=memory, **agent_kwargs)
    sessions = InMemorySessionService()
    return sessions, Runner(agent=agent, app_name=APP, session_service=sessions)


async def test_failing_search_tells_the_model_and_the_turn_completes(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    sessions, runner = make_unsearchable(tmp_path)
    with caplog.at_level(logging.WARNING):
        events = await say(runner, sessions, "pa", "s1", "recall: anything")
    assert "memory is unavailable" in tool_output(events)
    assert events[-1].content.parts[0].text.startswith("From memory:")  # the model went on to answer
    assert "search node on fire" in caplog.text
    await runner.close()


async def test_failing_preload_leaves_the_turn_without_memories(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    sessions, runner = make_unsearchable(tmp_path, preload_memory=True)
    with caplog.at_level(logging.WARNING):
        events = await say(runner, sessions, "qu", "s1", "what do you know about me?")
    assert events[-1].content.parts[0].text == "ok"
    assert "search node on fire" in caplog.text
    await runner.close()


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

        def _commit(self, records, vectors, scope, session_id, event_ids, **kw):
            if self.down:
                raise ConnectionError("disk unplugged")
            type(self).written.extend(r.id for r in records)
            super()._commit(records, vectors, scope, session_id, event_ids, **kw)

    backend = Flaky(tmp_path / "m.db")
    memory = LongTermMemory(backend=backend, app_name=APP)
    agent = Agent(name="assistant", model=ScriptedLlm(), long_term_memory=memory, min_messages_threshold=1)
    sessions = InMemorySessionService()
    runner = Runner(agent=agent, app_name=APP, session_service=sessions)
    with caplog.at_level(logging.WARNING, logger="longterm.autosave"):
        events = await say(runner, sessions, "gu", "s1", "my locker code is 4711")
        assert events[-1].content.parts[0].text == "ok"  # the reply arrived
        await asyncio.sleep(0.2)
    assert f"auto-save of session {pseudonym('s1')} failed" in caplog.text and "disk unplugged" in caplog.text
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


@pytest.mark.parametrize(
    "var, value, message",
    [
        (
            "LONGTERM_MIN_MESSAGES_THRESHOLD",
            "ten",
            "MIN_MESSAGES_THRESHOLD from environment variable LONGTERM_MIN_MESSAGES_THRESHOLD must be an integer",
        ),
        ("MIN_TIME_THRESHOLD", "-5", "must be zero or more"),
        ("MIN_MESSAGES_THRESHOLD", "0", "at least 1"),
    ],
)
def test_bad_thresholds_fail_at_construction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str, message: str
):
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
    await memory.add_session_to_memory(
        {
            "id": "s",
            "app_name": "a",
            "user_id": "u",
            "events": [
                {"id": "1", "author": "user", "content": {"role": "user", "parts": [{"text": "My cat is called Miso"}]}}
            ],
        }
    )
    tool = memory.as_tool(app_name="a", user_id="u")
    schema = tool.openai_schema()
    assert schema["function"]["name"] == "load_memory"
    assert schema["function"]["parameters"]["required"] == ["query"]
    out = await tool(query="cat name")
    assert out["memories"][0]["text"] == "My cat is called Miso"
    other = memory.as_tool(app_name="a", user_id="someone-else")
    assert (await other(query="cat"))["memories"] == []
