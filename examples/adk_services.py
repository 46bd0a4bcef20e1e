"""ADK's own server and dev UI on a longterm store: ``adk web`` / ``adk api_server`` by URI.

    python examples/adk_services.py      # offline: writes ./adk_agents, runs two sessions as ADK's server would
    adk web adk_agents --memory_service_uri longterm://$PWD/.longterm/memory.db   # then, for real

ADK's CLI builds its memory service from ``--memory_service_uri``; the scheme ``longterm`` comes
from the agents directory's ``services.yaml``, which names ``LongTermMemoryService``. This
example writes that directory (an agent that saves each turn through
``CallbackContext.add_session_to_memory()`` and recalls with ADK's own ``load_memory``, on the
scripted model, or on ``LONGTERM_EXAMPLE_MODEL``), then does what ``adk web`` does at start:
reads ``services.yaml``, builds the memory from the URI and runs the agent's sessions; session
2 recalls session 1. Needs: pip install 'longterm[adk]'.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from pathlib import Path

from google.adk.cli.service_registry import get_service_registry, load_services_module
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

SERVICES_YAML = """\
services:
  - scheme: longterm
    type: memory
    class: longterm.integrations.adk.LongTermMemoryService
"""
AGENT = """\
import os

from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.tools import load_memory

from longterm.testing.scripted_llm import ScriptedLlm


async def save_to_memory(callback_context: CallbackContext) -> None:
    await callback_context.add_session_to_memory()  # exactly once: only new events are written


root_agent = LlmAgent(
    name="assistant",
    model=os.environ.get("LONGTERM_EXAMPLE_MODEL") or ScriptedLlm(),
    instruction="Use load_memory to recall what the user told you in earlier conversations.",
    tools=[load_memory],
    after_agent_callback=save_to_memory,
)
"""


def write_agents(agents: Path) -> None:
    (agents / "assistant").mkdir(parents=True, exist_ok=True)
    (agents / "services.yaml").write_text(SERVICES_YAML)
    (agents / "assistant" / "__init__.py").write_text("from . import agent\n")
    (agents / "assistant" / "agent.py").write_text(AGENT)


async def turn(runner: Runner, session_id: str, text: str) -> str:
    await runner.session_service.create_session(app_name="assistant", user_id="alice", session_id=session_id)
    recalled, reply = [], ""
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for event in runner.run_async(user_id="alice", session_id=session_id, new_message=message):
        for part in event.content.parts if event.content and event.content.parts else []:
            if part.function_response is not None:
                found = (part.function_response.response or {}).get("result")
                recalled += [p.text for m in getattr(found, "memories", []) for p in m.content.parts or [] if p.text]
            elif part.text:
                reply = part.text
    return recalled[0] if recalled else reply


async def main() -> None:
    agents, store = Path("adk_agents").resolve(), Path(".longterm/memory.db").resolve()
    write_agents(agents)
    uri = f"longterm://{store}"
    load_services_module(str(agents))  # what adk web does with --memory_service_uri, step by step
    memory = get_service_registry().create_memory_service(uri, agents_dir=str(agents))
    print(f"{uri} -> {type(memory).__name__} on {memory.backend_name}")
    sys.path.insert(0, str(agents))
    agent = importlib.import_module("assistant.agent").root_agent
    runner = Runner(app_name="assistant", agent=agent, session_service=InMemorySessionService(), memory_service=memory)
    print("session 1 >", await turn(runner, "s1", "I'm allergic to shellfish"))
    question = "What am I allergic to?" if os.environ.get("LONGTERM_EXAMPLE_MODEL") else "recall: allergic"
    print("session 2 > recalled:", await turn(runner, "s2", question))
    await runner.close()
    await memory.close()
    print(f"try it in ADK's dev UI: adk web {agents.name} --memory_service_uri {uri}")


if __name__ == "__main__":
    asyncio.run(main())
