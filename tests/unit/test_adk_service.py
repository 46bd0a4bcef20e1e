"""ADK accepts LongTermMemory as its BaseMemoryService: Runner(memory_service=ltm) and
ADK's own load_memory tool work with it, across sessions and across a 'restart'."""

from __future__ import annotations

from google.adk.agents import LlmAgent
from google.adk.memory import BaseMemoryService
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import load_memory
from google.genai import types

from longterm import LongTermMemory
from longterm.testing.scripted_llm import ScriptedLlm


async def _say(runner: Runner, user: str, session_id: str, text: str) -> list:
    msg = types.Content(role="user", parts=[types.Part(text=text)])
    return [e async for e in runner.run_async(user_id=user, session_id=session_id, new_message=msg)]


async def test_runner_and_load_memory_tool(tmp_path):
    store = {"path": str(tmp_path / "m.db")}
    ltm = LongTermMemory(backend_config=store, app_name="travel")
    assert isinstance(ltm, BaseMemoryService)
    agent = LlmAgent(name="assistant", model=ScriptedLlm(), tools=[load_memory])
    sessions = InMemorySessionService()
    runner = Runner(agent=agent, app_name="travel", session_service=sessions, memory_service=ltm)

    s1 = await sessions.create_session(app_name="travel", user_id="bob")
    await _say(runner, "bob", s1.id, "My passport expires in August 2027")
    session = await sessions.get_session(app_name="travel", user_id="bob", session_id=s1.id)
    result = await ltm.add_session_to_memory(session)
    assert result.saved == 1  # the user's words; the model's "ok" is not kept by default
    await ltm.close()

    # a new process: new memory object, new session service, new session
    ltm2 = LongTermMemory(backend_config=store, app_name="travel")
    sessions2 = InMemorySessionService()
    runner2 = Runner(agent=agent, app_name="travel", session_service=sessions2, memory_service=ltm2)
    s2 = await sessions2.create_session(app_name="travel", user_id="bob")
    events = await _say(runner2, "bob", s2.id, "recall: when does my passport expire")
    responses = [p.function_response for e in events if e.content for p in e.content.parts if p.function_response]
    assert responses and responses[0].name == "load_memory"
    assert "August 2027" in str(responses[0].response)
    final = events[-1].content.parts[0].text
    assert final.startswith("From memory:") and "August 2027" in final

    # another user of the same app sees nothing of bob's
    s3 = await sessions2.create_session(app_name="travel", user_id="eve")
    events = await _say(runner2, "eve", s3.id, "recall: passport")
    responses = [p.function_response for e in events if e.content for p in e.content.parts if p.function_response]
    assert "August" not in str(responses[0].response)
    await ltm2.close()
