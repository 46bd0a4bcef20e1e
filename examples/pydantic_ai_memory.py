"""A Pydantic AI agent that remembers across runs, with Pydantic AI's FunctionModel.

    python examples/pydantic_ai_memory.py       # offline: a FunctionModel, no key

The agent's toolset is ``memory_toolset``: ``load_memory`` and ``save_memory``, for the user the
run's deps name. Run 1: the user tells the agent something; ``save_messages`` saves the run's
new messages (the user's words, by the default policy), and saving them again writes nothing.
Run 2: the model calls ``load_memory`` and answers from it; another user finds nothing.
With a real model, pass ``"openai:gpt-5.1"`` (and its key) instead of the FunctionModel.
Needs: pip install 'longterm[pydantic-ai]'.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from longterm import LongTermMemory
from longterm.integrations.pydantic_ai import memory_toolset, save_messages


@dataclass
class Deps:
    user_id: str  # whose memories: the toolset reads ctx.deps.user_id


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A model that searches memory when asked a question and answers from what it found."""
    part = messages[-1].parts[-1]
    if isinstance(part, ToolReturnPart):
        found = [m["text"] for m in part.content["memories"]]
        return ModelResponse(parts=[TextPart(f"You told me: {found[0]}" if found else "I don't know yet.")])
    if str(part.content).endswith("?"):
        return ModelResponse(parts=[ToolCallPart("load_memory", {"query": str(part.content)})])
    return ModelResponse(parts=[TextPart("Noted!")])


async def main() -> None:
    memory = LongTermMemory(app_name="assistant")  # ./.longterm/memory.db; the app every agent of yours shares
    agent = Agent(FunctionModel(scripted), deps_type=Deps, toolsets=[memory_toolset(memory)])

    first = await agent.run("I'm allergic to shellfish", deps=Deps("alice"))
    saved = await save_messages(memory, first.new_messages(), user_id="alice", session_id="run-1")
    again = await save_messages(memory, first.new_messages(), user_id="alice", session_id="run-1")
    print(f"run 1 > {first.output} (saved {saved.saved}, then again {again.saved})")

    second = await agent.run("What am I allergic to?", deps=Deps("alice"))
    print("run 2 >", second.output)
    print("bob   >", (await agent.run("What am I allergic to?", deps=Deps("bob"))).output)
    await memory.close()


if __name__ == "__main__":
    asyncio.run(main())
