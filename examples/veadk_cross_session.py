"""VeADK's documented cross-session example, on longterm: only the imports and the model differ.

    python examples/veadk_cross_session.py          # offline: a scripted model, no key
    LONGTERM_EXAMPLE_MODEL=gemini-2.5-flash GOOGLE_API_KEY=... python examples/veadk_cross_session.py

Session 1: the user states a fact in one turn, far below the auto-save thresholds (10
events, 60 s). Session 2 is brand new: its first turn recalls the fact through
``load_memory``, because a turn saves the user's other sessions before memory is searched.
Memories are kept in ``./.longterm/memory.db`` (``LONGTERM_HOME`` moves it), so a second
run finds the fact twice: once per run's session 1. The example prints what ``load_memory``
recalled in session 2 (and, with a real model, the agent's reply).
Needs: pip install 'longterm[adk]'.
"""

from __future__ import annotations

import asyncio
import os

from longterm import LongTermMemory
from longterm.integrations.adk import Agent, Runner

APP_NAME = "ltm_demo"
USER_ID = "user-42"
QUESTION = "帮我推荐一道适合我的菜，要考虑我的饮食限制。"


def model():
    name = os.environ.get("LONGTERM_EXAMPLE_MODEL")
    if name:
        return name  # any model id ADK understands (needs its API key)
    from longterm.testing.scripted_llm import ScriptedLlm

    return ScriptedLlm()  # calls load_memory for messages starting with "recall:"


async def recalled(runner: Runner, session_id: str) -> list[str]:
    """The texts ``load_memory`` handed the model in that session."""
    session = await runner.session_service.get_session(app_name=APP_NAME, user_id=USER_ID, session_id=session_id)
    texts = []
    for event in session.events if session else []:
        for part in event.content.parts if event.content and event.content.parts else []:
            answer = part.function_response
            if answer is not None and answer.name == "load_memory":
                for entry in getattr((answer.response or {}).get("result"), "memories", []):
                    texts += [p.text for p in entry.content.parts or [] if p.text]
    return texts


def build_runner() -> Runner:
    ltm = LongTermMemory(backend="local", app_name=APP_NAME)
    agent = Agent(
        name="ltm_agent",
        model=model(),
        instruction="你是个人助理。当用户问起之前告诉过你的事情时，使用 `load_memory` 工具去回忆。",
        long_term_memory=ltm,
        auto_save_session=True,
    )
    return Runner(agent=agent, app_name=APP_NAME, user_id=USER_ID)


async def main() -> None:
    runner = build_runner()
    print("Session 1 ->", await runner.run(messages="记一下：我对花生过敏，而且我是素食者。", session_id="session-1"))
    # A real model chooses its own load_memory query; the scripted one searches for what follows "recall:".
    real = bool(os.environ.get("LONGTERM_EXAMPLE_MODEL"))
    question = QUESTION if real else f"recall: 饮食限制 过敏 素食 ({QUESTION})"
    reply = await runner.run(messages=question, session_id="session-2")
    for text in await recalled(runner, "session-2"):
        print("Session 2 -> recalled:", text)
    if real:  # the scripted model only echoes the tool's answer; a real one replies
        print("Session 2 ->", reply)
    await runner.close()  # saves session 2 too


if __name__ == "__main__":
    asyncio.run(main())
