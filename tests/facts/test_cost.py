"""The fact layer's model cost: one call a batch, whatever the number of facts, for the same
facts as the two-step form (local backend: the layer's own logic; the scenarios run on every
engine).

Each test failed before the combined call: a batch cost one extraction plus one reconcile call
per fact that resembled a held one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from longterm import LongTermMemory
from longterm.testing.scripted_llm import ScriptedChat
from tests.facts.conftest import facts_config
from tests.facts.test_scenarios import APP, USER, current, every, said, save


def local(tmp_path: Path, chat: ScriptedChat, name: str, **more: Any) -> LongTermMemory:
    return LongTermMemory(backend_config={"path": str(tmp_path / f"{name}.db")}, facts=facts_config(chat, **more))


async def story(m: LongTermMemory) -> list[dict[str, Any]]:
    """Three facts, then three changes of them and one fact said again: every fact at the end."""
    await save(m, said(1, "I live in Porto.", "I'm vegetarian.", "My favorite player is Messi."))
    await save(
        m, said(2, "I moved to Lisbon.", "I'm vegan now.", "My favorite player is Ronaldo.", "I live in Lisbon.")
    )
    await save(m, said(3, "My brother's favorite player is Zidane."))
    facts = await every(m)
    await m.close()
    return facts


async def test_a_batch_costs_one_call_whatever_its_facts_and_gives_the_two_step_facts(
    tmp_path: Path, chat: ScriptedChat
):
    facts = await story(local(tmp_path, chat, "combined"))
    assert chat.usage["calls"] == 3  # one a save: the held facts came with the events
    assert [f["text"] for f in facts if f["valid_until"] is None] == [
        "The user lives in Lisbon",
        "The user is vegan",
        "The user's favorite player is Ronaldo",
        "The user's brother's favorite player is Zidane",
    ]
    calls = chat.usage["calls"]
    assert await story(local(tmp_path, chat, "two-step", combined=False)) == facts  # ids, times, history
    assert chat.usage["calls"] - calls == 3 + 6  # the two-step form: and a call per fact like a held one


async def test_a_batch_that_changes_its_own_fact_keeps_the_history_in_one_call(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, chat, "m")
    await save(m, said(1, "I live in Porto.", "I moved to Lisbon."))
    assert chat.usage["calls"] == 1
    porto, lisbon = await every(m)
    assert porto["text"] == "The user lives in Porto" and porto["superseded_by"] == lisbon["id"]
    assert lisbon["text"] == "The user lives in Lisbon" and lisbon["valid_until"] is None
    await m.close()


async def test_a_decision_on_a_fact_its_own_answer_replaced_applies_to_the_replacement(
    tmp_path: Path, chat: ScriptedChat
):
    m = local(tmp_path, chat, "m")
    await save(m, said(1, "I live in Porto."))
    both_on_f1 = {
        "facts": [
            {"text": "The user lives in Lisbon", "evidence": ["e1"], "decision": "UPDATE", "target": "f1"},
            {"text": "The user lives in Madrid", "evidence": ["e2"], "decision": "UPDATE", "target": "f1"},
        ]
    }
    chat.answer("extract", lambda task: both_on_f1)
    await save(m, said(2, "I moved to Lisbon.", "No, to Madrid."))
    assert await current(m) == ["The user lives in Madrid"]
    trail = await m.fact_history(app_name=APP, user_id=USER, fact_id=(await every(m))[-1]["id"])
    assert [f["text"] for f in trail] == [
        "The user lives in Porto",
        "The user lives in Lisbon",
        "The user lives in Madrid",
    ]
    await m.close()


async def test_an_answer_without_decisions_is_reconciled_the_two_step_way(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, chat, "m")
    await save(m, said(1, "I live in Porto."))
    chat.answer("extract", lambda task: {"facts": [{"text": "The user lives in Lisbon", "evidence": ["e1"]}]})
    chat.answer("reconcile", lambda task: {"decision": "UPDATE", "target": "f1", "text": task["new"]["text"]})
    await save(m, said(2, "I moved to Lisbon."))
    assert chat.requests == ["extract", "extract", "reconcile"] and chat.usage["calls"] == 3
    assert await current(m) == ["The user lives in Lisbon"]
    await m.close()


async def test_a_custom_extraction_prompt_runs_as_written_in_the_two_step_form(tmp_path: Path, chat: ScriptedChat):
    # A prompt written for the two-step form (before the combined call existed) is the one sent.
    from longterm.facts.llm import EXTRACT_PROMPT

    custom = EXTRACT_PROMPT + "\nOnly facts about food."
    facts = await story(local(tmp_path, chat, "custom", extract_prompt=custom))
    assert chat.usage["calls"] == 3 + 6  # the two-step form's calls
    assert [f["text"] for f in facts if f["valid_until"] is None][:2] == [
        "The user lives in Lisbon",
        "The user is vegan",
    ]
