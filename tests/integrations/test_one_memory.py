"""One memory for all of a user's agents: an ADK agent, an OpenAI Agents SDK agent, a Pydantic AI
agent and the MCP server (reached through the OpenAI SDK's ``MCPServerStdio``) share one store;
each saves one fact about alice, and each recalls all four.

Which app: every integration uses one app name for one store, "assistant" here: ADK its Runner's
``app_name``, the OpenAI and Pydantic AI integrations the memory's ``default_app`` (its
``app_name``, from the URI's ``?app=``), the MCP server its ``--app``. The index rule of
``memory.routing`` puts them all in the index named after that app.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from agents import Agent as OpenAIAgent
from agents import Runner as OpenAIRunner
from agents.mcp import MCPServerStdio
from google.genai import types
from pydantic_ai import Agent as PydanticAgent

from longterm import LongTermMemory
from longterm.integrations.adk import Agent as AdkAgent
from longterm.integrations.adk import Runner as AdkRunner
from longterm.integrations.openai_agents import LongTermHooks, memory_tools
from longterm.integrations.pydantic_ai import memory_toolset, save_messages
from longterm.testing.scripted_llm import ScriptedLlm
from tests.integrations.scripted import assistant_message, function_call, openai_model, pydantic_model, tool_outputs

FACTS = {
    "adk": "I'm allergic to shellfish",
    "openai": "My passport expires in August 2027",
    "pydantic": "I prefer window seats",
    "mcp": "My dog is called Rex",
}
QUERY = "shellfish passport window dog"


def _all_facts(text: str) -> bool:
    return all(fact in text for fact in FACTS.values())


async def _adk_turn(runner: AdkRunner, session_id: str, text: str) -> str:
    if await runner.session_service.get_session(app_name="assistant", user_id="alice", session_id=session_id) is None:
        await runner.session_service.create_session(app_name="assistant", user_id="alice", session_id=session_id)
    message = types.Content(role="user", parts=[types.Part(text=text)])
    said = []
    async for event in runner.run_async(user_id="alice", session_id=session_id, new_message=message):
        said += [str(p.function_response.response) for p in (event.content.parts or []) if p.function_response]
    return "\n".join(said)


async def test_four_agents_of_four_frameworks_share_one_users_memory(tmp_path: Path) -> None:
    uri = f"longterm://{tmp_path / 'memory.db'}?app=assistant"
    memories = [LongTermMemory.from_uri(uri, top_k=10) for _ in range(3)]  # one per agent, as three processes
    adk_memory, openai_memory, pydantic_memory = memories

    adk = AdkRunner(
        agent=AdkAgent(name="assistant", model=ScriptedLlm(), long_term_memory=adk_memory), app_name="assistant"
    )
    openai_model_ = openai_model(
        [assistant_message("Noted.")],
        [function_call("load_memory", {"query": QUERY}, call_id="c1")],
        [assistant_message("Here is what I remember.")],
    )
    openai_agent = OpenAIAgent(
        name="assistant", model=openai_model_, tools=memory_tools(openai_memory, user_id="alice")
    )
    pydantic_agent = PydanticAgent(pydantic_model(), toolsets=[memory_toolset(pydantic_memory, user_id="alice")])
    mcp_model = openai_model(
        [function_call("save_memory", {"text": FACTS["mcp"]}, call_id="m1")],
        [assistant_message("Saved.")],
        [function_call("search_memory", {"query": QUERY, "top_k": 10}, call_id="m2")],
        [assistant_message("Here is what I remember.")],
    )
    command = [sys.executable, "-m", "longterm.cli", "--uri", uri, "mcp", "--app", "assistant", "--user", "alice"]
    params = {"command": command[0], "args": command[1:], "env": dict(os.environ)}
    async with MCPServerStdio(params=params, client_session_timeout_seconds=60) as server:
        mcp_agent = OpenAIAgent(name="assistant", model=mcp_model, mcp_servers=[server])

        # Each saves one fact about alice.
        await _adk_turn(adk, "adk-1", FACTS["adk"])
        await adk_memory.flush()
        hooks = LongTermHooks(openai_memory, user_id="alice", session_id="openai-1")
        await OpenAIRunner.run(openai_agent, FACTS["openai"], hooks=hooks)
        told = await pydantic_agent.run(FACTS["pydantic"])
        await save_messages(pydantic_memory, told.new_messages(), user_id="alice", session_id="pydantic-1")
        await OpenAIRunner.run(mcp_agent, "Remember that my dog is called Rex")

        # Each recalls all four.
        assert _all_facts(await _adk_turn(adk, "adk-2", f"recall: {QUERY}"))
        assert _all_facts(tool_outputs(await OpenAIRunner.run(openai_agent, "What do you know about me?")))
        assert _all_facts((await pydantic_agent.run(f"recall: {QUERY}")).output)
        found = json.loads(tool_outputs(await OpenAIRunner.run(mcp_agent, "What do you know about me?")))
        assert _all_facts("\n".join(m["text"] for m in found["memories"]))

    await adk.close()
    for memory in memories:
        await memory.close()
    check = LongTermMemory.from_uri(uri)
    assert await check.indices() == ["assistant"]
    assert {m.text for m in (await check.get_all(user_id="alice")).memories} >= set(FACTS.values())
    await check.close()
