"""Pydantic AI, for real and offline (its FunctionModel): a fact told in one run is found by
``load_memory`` in the next, saved once however often a run's messages are saved, and never
another user's; the toolset's user is the code's choice."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    StructuredContent,
    TextContent,
    TextPart,
    UserPromptPart,
)

from longterm import InvalidInputError, LongTermMemory
from longterm.integrations.pydantic_ai import memory_toolset, save_messages
from tests.integrations.scripted import pydantic_model

FACT = "I'm allergic to shellfish"


@dataclass
class Deps:
    user_id: str


def _found(output: str) -> list[dict]:
    assert output.startswith("From memory: "), output
    return json.loads(output.removeprefix("From memory: "))["memories"]


async def test_run_one_fact_is_found_by_load_memory_in_run_two_and_by_no_other_user() -> None:
    memory = LongTermMemory(app_name="assistant")
    agent = Agent(pydantic_model(), deps_type=Deps, toolsets=[memory_toolset(memory)])
    first = await agent.run(FACT, deps=Deps("alice"))
    saved = await save_messages(memory, first.new_messages(), user_id="alice", session_id="run-1")
    assert saved.saved == 1  # the user's words (the default policy)
    second = await agent.run("recall: what am I allergic to?", deps=Deps("alice"))
    [hit] = _found(second.output)
    assert hit["text"] == FACT and hit["score"] >= 0.7
    assert _found((await agent.run("recall: what am I allergic to?", deps=Deps("bob"))).output) == []
    await memory.close()


async def test_a_runs_messages_saved_again_store_nothing_twice() -> None:
    memory = LongTermMemory(app_name="assistant")
    agent = Agent(pydantic_model(), toolsets=[memory_toolset(memory, user_id="alice")])
    first = await agent.run(FACT)
    one = await save_messages(memory, first.new_messages(), user_id="alice", session_id="s1", policy="all")
    assert (one.new_events, one.saved) == (2, 2)
    again = await save_messages(memory, first.new_messages(), user_id="alice", session_id="s1", policy="all")
    assert (again.new_events, again.saved) == (0, 0)
    second = await agent.run("ok", message_history=first.all_messages())  # "ok" said by the user this time
    both = await save_messages(memory, second.all_messages(), user_id="alice", session_id="s1", policy="all")
    assert (both.new_events, both.saved) == (2, 2)  # only run 2's: its history was saved with run 1
    texts = [m.text for m in (await memory.get_all(user_id="alice")).memories]
    assert sorted(texts) == sorted([FACT, "ok", "ok", "ok"])
    with pytest.raises(InvalidInputError, match="new_messages"):
        await save_messages(memory, [{"role": "user", "content": "hi"}], user_id="alice", session_id="s1")
    await memory.close()


async def test_the_user_is_fixed_by_user_id_a_function_of_deps_or_deps_user_id() -> None:
    memory = LongTermMemory(app_name="assistant")
    remember = "remember: The user's dog is called Rex"
    await Agent(pydantic_model(), toolsets=[memory_toolset(memory, user_id="alice")]).run(remember)
    by_deps = Agent(pydantic_model(), deps_type=dict, toolsets=[memory_toolset(memory, user_id=lambda d: d["who"])])
    assert _found((await by_deps.run("recall: dog", deps={"who": "alice"})).output)[0]["text"].endswith("Rex")
    assert _found((await by_deps.run("recall: dog", deps={"who": "carol"})).output) == []
    nobody = Agent(pydantic_model(), toolsets=[memory_toolset(memory)])
    with pytest.raises(InvalidInputError, match="has no user"):
        await nobody.run("recall: dog")
    await memory.close()


async def test_a_store_that_fails_costs_the_run_its_recall_not_the_reply() -> None:
    memory = LongTermMemory(app_name="assistant")
    agent = Agent(pydantic_model(), toolsets=[memory_toolset(memory, user_id="alice")])
    await memory.close()
    result = await agent.run("recall: anything")
    assert "Long-term memory is unavailable" in result.output


async def test_text_and_structured_content_of_a_prompt_are_saved_as_the_model_was_sent_them() -> None:
    memory = LongTermMemory(app_name="assistant")
    ui = StructuredContent({"city": "Porto", "screen": "bookings"}, tag="ui_state")
    prompt = ["I keep a pet hedgehog", TextContent("my code name is Falcon", metadata={"app": "only"}), ui]
    run = await Agent(pydantic_model()).run(prompt)
    loaded = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(run.all_messages()))
    assert (await save_messages(memory, run.all_messages(), user_id="alice", session_id="s1")).saved == 1
    assert (await save_messages(memory, loaded, user_id="alice", session_id="s1")).new_events == 0
    [saved] = (await memory.get_all(user_id="alice")).memories
    assert saved.text == "\n".join(["I keep a pet hedgehog", "my code name is Falcon", ui.content])
    assert '<ui_state>{"city":"Porto","screen":"bookings"}</ui_state>' in saved.text and "only" not in saved.text
    assert [m.text for m in await memory.search("Falcon", user_id="alice")] == [saved.text]
    await memory.close()


async def test_a_history_rebuilt_from_its_text_or_loaded_from_json_is_saved_once() -> None:
    memory = LongTermMemory(app_name="assistant")
    agent = Agent(pydantic_model())
    first = await agent.run("I keep a pet hedgehog")
    await save_messages(memory, first.all_messages(), user_id="alice", session_id="s1", policy="all")
    # the app keeps (role, text) and builds the history anew: new parts, new times
    rebuilt = [ModelRequest(parts=[UserPromptPart("I keep a pet hedgehog")]), ModelResponse(parts=[TextPart("ok")])]
    second = await agent.run("I keep a pet hedgehog", message_history=rebuilt)  # said again: a new memory
    saved = await save_messages(memory, second.all_messages(), user_id="alice", session_id="s1", policy="all")
    assert (saved.new_events, saved.saved) == (2, 2)
    loaded = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(second.all_messages()))
    third = await agent.run("what pets?", message_history=loaded)
    saved = await save_messages(memory, third.all_messages(), user_id="alice", session_id="s1", policy="all")
    assert (saved.new_events, saved.saved) == (2, 2)  # "what pets?" and its answer
    texts = [m.text for m in (await memory.get_all(user_id="alice")).memories]
    assert sorted(texts) == sorted(["I keep a pet hedgehog"] * 2 + ["ok"] * 3 + ["what pets?"])
    await memory.close()
