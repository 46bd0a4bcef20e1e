"""Facts follow their evidence, on every backend: an erase takes away what the erased words
said and nothing else, and a rebuild that fails leaves the facts as they were.

Each test here failed before facts were made to agree with the evidence left in the store
(the erase deleted every fact a session had touched, kept a retraction after its evidence
was erased, and a failed rebuild deleted every fact for good).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from longterm import LongTermMemory, LongTermMemoryError
from longterm.testing.scripted_llm import ScriptedChat
from tests.facts.conftest import facts_config
from tests.facts.test_scenarios import APP, USER, current, every, said, save


async def test_erasing_a_session_that_repeated_a_fact_keeps_the_fact_the_rest_still_says(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I live in Porto."), said(2, "As I said, I live in Porto."))
    assert [f["sessions"] for f in await every(m)] == [["s1", "s2"]]

    assert await m.delete_memory(app_name=APP, user_id=USER, session_id="s2") == 1  # its event only
    [fact] = await every(m)
    assert fact["text"] == "The user lives in Porto" and fact["valid_until"] is None
    assert fact["sessions"] == ["s1"] and len(fact["evidence"]) == 1
    assert await m.get_user_profile(USER, app_name=APP) == "- The user lives in Porto"

    assert await m.delete_memory(app_name=APP, user_id=USER, session_id="s1") == 2  # nothing says it now
    assert await every(m) == []


async def test_erasing_the_words_that_retracted_a_fact_makes_it_hold_again(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I live in Porto."))
    chat.answer("extract", lambda task: {"facts": [{"text": "The user left Porto", "evidence": ["e1"]}]})
    chat.answer("reconcile", lambda task: {"decision": "DELETE", "target": "f1"})
    await save(m, said(2, "I don't live in Porto any more."))
    assert await current(m) == []

    await m.delete_memory(app_name=APP, user_id=USER, session_id="s2")
    assert await current(m) == ["The user lives in Porto"]
    assert (await every(m))[0]["history"][-1]["op"] == "reopened"


async def test_deleting_a_fact_by_id_makes_the_fact_it_replaced_current_again(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I live in Porto."))
    await save(m, said(2, "I moved to Lisbon."))
    lisbon = next(f for f in await every(m) if f["valid_until"] is None)

    assert await m.delete_memory(app_name=APP, user_id=USER, memory_id=lisbon["id"]) == 1
    assert await current(m) == ["The user lives in Porto"]


async def test_a_rebuild_that_fails_keeps_the_facts_and_a_later_one_works(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I live in Porto.", "I'm vegetarian."), said(2, "I moved to Lisbon."))
    before = await every(m)
    assert len(before) == 3

    chat.down = True
    with pytest.raises(LongTermMemoryError, match="503"):
        await m.rebuild_facts(app_name=APP, user_id=USER)
    assert await every(m) == before  # nothing deleted: the new facts were never made
    chat.fail("ok", "ok", "500")  # and one that fails halfway, after two answers
    chat.down = False
    with pytest.raises(LongTermMemoryError, match="500"):
        await m.rebuild_facts(app_name=APP, user_id=USER)
    assert await every(m) == before

    assert await m.rebuild_facts(app_name=APP, user_id=USER) == {"before": 3, "after": 3, "events": 3}
    assert await every(m) == before
