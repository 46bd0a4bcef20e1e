"""An OpenAI Agents SDK agent that remembers across runs, with the SDK's own scripted model.

    python examples/openai_agents_memory.py     # offline: the SDK's ScriptedModel, no key

Run 1: the user tells the agent something; ``LongTermHooks`` saves the run when it ends (the
user's words, by the default policy). Run 2, a new session: the agent calls ``load_memory``
and its instructions already hold what the memory knows about the question
(``memory_instructions``, the SDK's way to preload). Saving run 1 again writes nothing.
With a real model, pass ``model="gpt-5.1"`` (and ``OPENAI_API_KEY``) instead of the scripted one.
Needs: pip install 'longterm[openai-agents]'.
"""

from __future__ import annotations

import asyncio
import json

from agents import Agent, Runner, set_tracing_disabled
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call

from longterm import LongTermMemory
from longterm.integrations.openai_agents import LongTermHooks, memory_instructions, memory_tools, save_items

set_tracing_disabled(True)  # offline: the SDK sends no traces


async def main() -> None:
    memory = LongTermMemory(app_name="assistant")  # ./.longterm/memory.db; the app every agent of yours shares
    model = ScriptedModel(
        [
            [assistant_message("Noted!")],  # run 1
            [function_call("load_memory", {"query": "what am I allergic to?"}, call_id="c1")],  # run 2
            [assistant_message("You're allergic to shellfish.")],
        ]
    )
    agent = Agent(
        name="assistant",
        model=model,
        instructions=memory_instructions(memory, "You are a helpful assistant.", user_id="alice"),
        tools=memory_tools(memory, user_id="alice"),
    )
    first = await Runner.run(
        agent, "I'm allergic to shellfish", hooks=LongTermHooks(memory, user_id="alice", session_id="run-1")
    )
    print("run 1 >", first.final_output)
    again = await save_items(memory, first.to_input_list(), user_id="alice", session_id="run-1")
    print(f"run 1 saved again: {again.saved} new memories")

    second = await Runner.run(
        agent, "What am I allergic to?", hooks=LongTermHooks(memory, user_id="alice", session_id="run-2")
    )
    for item in second.new_items:
        if isinstance(item, ToolCallOutputItem):
            for m in json.loads(item.output)["memories"]:
                print("run 2 > load_memory found:", m["text"])
    print("run 2 > instructions end with:", model.calls[1].system_instructions.splitlines()[-1])
    print("run 2 >", second.final_output)
    await memory.close()


if __name__ == "__main__":
    asyncio.run(main())
