"""An ADK agent that remembers across sessions (and across restarts).

    python examples/cross_session.py              # offline: a scripted model, no key
    LONGTERM_EXAMPLE_MODEL=gemini-2.5-flash GOOGLE_API_KEY=... python examples/cross_session.py

Session 1: the user tells the agent something. The agent saves the session on its own
(auto-save; Runner.close() flushes the rest). Session 2, in a fresh Runner with a fresh
session service, as after a restart: the agent calls load_memory and answers from it. The
example prints what load_memory recalled (and, with a real model, the agent's reply).
Needs: pip install 'longterm[adk]'.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from google.adk.events import Event
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


def recalled(event: Event) -> list[str]:
    """The texts ``load_memory`` handed the model in ``event``, if it is the tool's answer."""
    texts = []
    for part in event.content.parts if event.content and event.content.parts else []:
        answer = part.function_response
        if answer is not None and answer.name == "load_memory":
            for entry in getattr((answer.response or {}).get("result"), "memories", []):
                texts += [p.text for p in entry.content.parts or [] if p.text]
    return texts


async def chat(store: Path, session_id: str, text: str) -> tuple[str, list[str]]:
    """One turn in a new session, on a fresh runner; the agent's reply and what it recalled."""
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
    reply, memories = "", []
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for event in runner.run_async(user_id=USER, session_id=session_id, new_message=message):
        memories += recalled(event)
        if event.content and event.content.parts and event.content.parts[0].text:
            reply = event.content.parts[0].text
    await runner.close()  # flushes what auto-save has not written yet
    return reply, memories


async def main() -> None:
    store = Path(os.environ.get("LONGTERM_EXAMPLE_STORE") or Path(tempfile.mkdtemp()) / "memory.db")
    scripted = not os.environ.get("LONGTERM_EXAMPLE_MODEL")
    said = "I'm allergic to shellfish and I prefer window seats."
    print("session 1, user: ", said)
    reply, _ = await chat(store, "session-1", said)
    print("session 1, agent:", reply)
    question = "Anything I should tell the airline about my meal and seat?"
    if scripted:  # the scripted model calls load_memory with what follows "recall:"
        question = "recall: allergic shellfish window seats"
    print("session 2, user: ", question)
    reply, memories = await chat(store, "session-2", question)
    for text in memories:
        print("session 2 > recalled from memory:", text)
    if not scripted:  # the scripted model only echoes the tool's answer; a real one replies
        print("session 2, agent:", reply)


if __name__ == "__main__":
    asyncio.run(main())
