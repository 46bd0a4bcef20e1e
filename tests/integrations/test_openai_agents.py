"""The OpenAI Agents SDK, for real and offline (its own ScriptedModel): a fact told in one run is
found by ``load_memory`` in the next, saved once however often a run is replayed, and never
another user's."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession

from longterm import BackendUnavailableError, LongTermMemory
from longterm.integrations.openai_agents import LongTermHooks, memory_instructions, memory_tools, save_items
from tests.integrations.scripted import assistant_message, function_call, openai_model, recall, tool_outputs

FACT = "I'm allergic to shellfish"


async def test_run_one_fact_is_found_by_load_memory_in_run_two_and_by_no_other_user() -> None:
    memory = LongTermMemory(app_name="assistant")
    model = openai_model(
        [assistant_message("Noted.")],
        recall("what am I allergic to?"),
        [assistant_message("You are allergic to shellfish.")],
        recall("what am I allergic to?", call_id="c2"),
        [assistant_message("I don't know.")],
    )
    alice = Agent(name="assistant", model=model, tools=memory_tools(memory, user_id="alice"))
    await Runner.run(alice, FACT, hooks=LongTermHooks(memory, user_id="alice", session_id="run-1"))
    second = await Runner.run(
        alice, "What am I allergic to?", hooks=LongTermHooks(memory, user_id="alice", session_id="run-2")
    )
    found = json.loads(tool_outputs(second))["memories"]
    assert found[0]["text"] == FACT and found[0]["score"] >= 0.7

    bob = Agent(name="assistant", model=model, tools=memory_tools(memory, user_id="bob"))
    theirs = await Runner.run(
        bob, "What am I allergic to?", hooks=LongTermHooks(memory, user_id="bob", session_id="b1")
    )
    assert json.loads(tool_outputs(theirs)) == {"memories": []}
    assert await memory.search("shellfish", user_id="bob") == []
    await memory.close()


async def test_a_run_saved_again_and_replayed_by_its_session_stores_nothing_twice() -> None:
    memory = LongTermMemory(app_name="assistant")
    model = openai_model(
        [assistant_message("Noted.")],
        recall("allergic", call_id="c1"),
        [assistant_message("Noted.")],  # the same words again, later: another message
        [assistant_message("Noted.")],
    )
    agent = Agent(name="assistant", model=model, tools=memory_tools(memory, user_id="alice"))
    session = SQLiteSession("s1")  # replays the conversation's history into every run
    hooks = LongTermHooks(memory, user_id="alice", session_id="s1", policy="all")
    first = await Runner.run(agent, FACT, hooks=hooks, session=session)
    stored = await memory.count(app_name="assistant", user_id="alice")
    assert stored == 2  # the user's words and the assistant's (policy "all")
    for again in (
        await hooks.save(),
        await save_items(memory, first.to_input_list(), user_id="alice", session_id="s1", policy="all"),
        await save_items(memory, first.new_items, user_id="alice", session_id="s1", policy="all"),
    ):
        assert again.new_events == 0 and again.saved == 0
    await Runner.run(agent, "what am I allergic to?", hooks=hooks, session=session)
    await Runner.run(agent, "yes", hooks=hooks, session=session)
    texts = [m.text for m in (await memory.get_all(user_id="alice")).memories]
    assert texts.count(FACT) == 1 and texts.count("Noted.") == 3 and "yes" in texts
    assert (
        await save_items(memory, await session.get_items(), user_id="alice", session_id="s1", policy="all")
    ).saved == 0
    await memory.close()


async def test_agent_hooks_and_the_default_policy_keep_the_users_words() -> None:
    memory = LongTermMemory(app_name="assistant")
    hooks = LongTermHooks(memory, user_id="alice", session_id="s1")
    agent = Agent(name="assistant", model=openai_model([assistant_message("Noted.")]), hooks=hooks.agent_hooks)
    await Runner.run(agent, FACT)
    assert [m.text for m in (await memory.get_all(user_id="alice")).memories] == [FACT]
    assert (await hooks.agent_hooks.save()).new_events == 0
    await memory.close()


async def test_memory_instructions_preload_and_save_memory_saves() -> None:
    memory = LongTermMemory(app_name="assistant")
    model = openai_model(
        [function_call("save_memory", {"text": "The user's dog is called Rex"}, call_id="c1")],
        [assistant_message("Saved.")],
        [assistant_message("Rex.")],
    )
    agent = Agent(
        name="assistant",
        model=model,
        tools=memory_tools(memory, user_id="alice", save=True),
        instructions=memory_instructions(memory, "Be brief.", user_id="alice"),
    )
    await Runner.run(agent, "Remember that my dog is called Rex")
    await Runner.run(agent, "What is my dog called?")
    assert model.calls[2].system_instructions.startswith("Be brief.\n\nWhat you remember")
    assert "- The user's dog is called Rex" in model.calls[2].system_instructions
    assert model.calls[0].system_instructions == "Be brief."  # nothing yet to remember
    await memory.close()


async def test_a_store_that_fails_costs_the_run_its_recall_not_the_reply() -> None:
    memory = LongTermMemory(app_name="assistant")
    tools = memory_tools(memory, user_id="alice", save=True)
    await memory.close()
    model = openai_model(recall("anything"), [assistant_message("Sorry.")])
    result = await Runner.run(Agent(name="assistant", model=model, tools=tools), "hi")
    assert result.final_output == "Sorry."
    assert json.loads(tool_outputs(result))["error"].startswith("Long-term memory is unavailable")


class Outage:
    """``LongTermMemory.add_session_to_memory``, failing while ``down``: the store fails, not the SDK."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.down, save = True, LongTermMemory.add_session_to_memory

        async def failing(memory: LongTermMemory, *args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise BackendUnavailableError("the store is down")
            return await save(memory, *args, **kwargs)

        monkeypatch.setattr(LongTermMemory, "add_session_to_memory", failing)


async def test_a_store_that_fails_at_the_runs_end_costs_its_save_not_the_reply(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    closed = LongTermMemory(app_name="assistant")
    hooks = LongTermHooks(closed, user_id="alice", session_id="s0")
    await closed.close()
    assert (
        await Runner.run(Agent(name="a", model=openai_model([assistant_message("hi!")])), "hi", hooks=hooks)
    ).final_output == "hi!"

    memory = LongTermMemory(app_name="assistant")
    outage = Outage(monkeypatch)
    steps = [[assistant_message(reply)] for reply in ("Noted.", "Hello again.", "Bye.")]
    agent = Agent(name="assistant", model=openai_model(*steps))
    hooks = LongTermHooks(memory, user_id="alice", session_id="s1", policy="all")
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="longterm"):
        assert (await Runner.run(agent, FACT, hooks=hooks)).final_output == "Noted."
    [record] = [r for r in caplog.records if r.name.startswith("longterm")]
    assert record.levelno == logging.WARNING and record.exc_info is None and "the store is down" in record.message
    assert await memory.count(app_name="assistant", user_id="alice") == 0
    outage.down = False
    await Runner.run(agent, "hi", hooks=hooks)  # no Session: this run's items, and those run 1 left
    outage.down = True
    await Runner.run(agent, "bye", hooks=hooks)
    with pytest.raises(BackendUnavailableError):
        await hooks.save()  # asked for: a failure says so
    outage.down = False
    assert (await hooks.save()).saved == 2 and (await hooks.save()).saved == 0
    texts = sorted(m.text for m in (await memory.get_all(user_id="alice")).memories)
    assert texts == sorted([FACT, "Noted.", "hi", "Hello again.", "bye", "Bye."])  # each once
    await memory.close()
