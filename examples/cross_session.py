"""An ADK agent that remembers across sessions (and across restarts).

    python examples/cross_session.py              # offline: a scripted model, no key
    LONGTERM_EXAMPLE_MODEL=gemini-2.5-flash GOOGLE_API_KEY=... python examples/cross_session.py

Session 1: the user tells the agent something. The agent saves the session on its own
(auto-save; Runner.close() flushes the rest). Session 2, in a fresh Runner with a fresh
session service, as after a restart: the agent calls load_memory and answers from it.
Needs: pip install 'longterm[adk]'.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from google.adk.sessions import InMemorySessionService
from google.genai import types

from longterm import LongTermMemory
from longterm.integrations.adk import Agent, Runner

APP, USER = "travel_agent", "alice"


def model():
    name = os.environ.get("LONGTERM_EXAMPLE_MODEL")
    if name:
        return name  # any model id ADK understands, e.g. gemini-2.5-flash (needs its API key)
    from longterm.testing.scripted_llm import ScriptedLlm

    return ScriptedLlm()


async def chat(store: Path, session_id: str, text: str) -> str:
    memory = LongTermMemory(app_name=APP, backend_config={"path": str(store)})
    agent = Agent(
        name="travel_agent",
        model=model(),
        instruction="You are a travel assistant. Use load_memory to recall what the user told you before.",
        long_term_memory=memory,
    )
    sessions = InMemorySessionService()
    runner = Runner(agent=agent, app_name=APP, session_service=sessions)
    await sessions.create_session(app_name=APP, user_id=USER, session_id=session_id)
    reply = ""
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for event in runner.run_async(user_id=USER, session_id=session_id, new_message=message):
        if event.content and event.content.parts and event.content.parts[0].text:
            reply = event.content.parts[0].text
    await runner.close()  # flushes what auto-save has not written yet
    return reply


async def main() -> None:
    store = Path(os.environ.get("LONGTERM_EXAMPLE_STORE") or Path(tempfile.mkdtemp()) / "memory.db")
    print("session 1 >", await chat(store, "session-1", "I'm allergic to shellfish and I prefer window seats."))
    scripted = not os.environ.get("LONGTERM_EXAMPLE_MODEL")
    question = "Anything I should tell the airline about my meal and seat?"
    if scripted:
        question = "recall: allergic shellfish window seats"
    print("session 2 >", await chat(store, "session-2", question))


if __name__ == "__main__":
    asyncio.run(main())
