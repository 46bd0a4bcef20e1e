"""Facts follow their evidence, on every backend: an erase takes away what the erased words
said and nothing else, and a rebuild that fails leaves the facts as they were.

Each test here failed before facts were made to agree with the evidence left in the store
(the erase deleted every fact a session had touched, kept a retraction after its evidence
was erased, and a failed rebuild deleted every fact for good).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory, LongTermMemoryError
from longterm.testing import make_session
from longterm.testing.scripted_llm import ScriptedChat
from tests.facts.conftest import facts_config
from tests.facts.test_scenarios import APP, DAY, T0, USER, current, every, said, save


async def test_erasing_a_session_that_repeated_a_fact_keeps_the_fact_the_rest_still_says(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I live in Porto."), said(2, "As I said, I live in Porto."))
    assert [f["sessions"] for f in await every(m)] == [["s1", "s2"]]
    [s2_event] = [r.id async for r in m.iter_records(app_name=APP, user_id=USER) if r.session_id == "s2"]

    assert await m.delete_memory(app_name=APP, user_id=USER, session_id="s2") == 1  # its event only
    assert await scope_holds(m, s2_event) == []  # its history forgot the erased event
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
    m = open_memory(facts=facts_config(chat, batch_events=1))  # one call a batch: three batches to fail halfway
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


async def scope_holds(m: LongTermMemory, word: str) -> list[str]:
    """Every place in the user's records (text, content, metadata: facts, their history, and
    whatever else is stored there) that still holds ``word``."""
    found = []
    async for rec in m.iter_records(app_name=APP, user_id=USER):
        dump = rec.model_dump_json()
        if word.casefold() in dump.casefold():
            found.append(dump[:300])
    return found


def files_hold(backend_config: dict[str, Any], word: str) -> list[str]:
    """The local store's files (``memory.db``, ``-wal``, ``-shm``) that still hold ``word`` as bytes."""
    path = Path(backend_config["path"])
    return [p.name for p in path.parent.glob(path.name + "*") if word.encode() in p.read_bytes()]


async def test_erased_words_are_in_no_fact_no_history_and_no_mark(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat, backend_name: str, backend_config: dict[str, Any]
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I live in Paris."))
    reworded = "The user lives in Berlin, having left Paris"  # a model rewording the update from the old fact
    chat.answer("reconcile", lambda task: {"decision": "UPDATE", "target": "f1", "text": reworded})
    await save(m, said(2, "I moved to Berlin."))
    uncited = {"facts": [{"text": "The user's PIN is 4417"}]}  # cites no event: every event of its batch backs it
    chat.answer("extract", lambda task: uncited)
    pin = [("user", "My PIN is 4417."), ("user", "Nice weather.")]
    await save(m, make_session("s3", APP, USER, turns=pin, start=T0 + 3 * DAY))
    assert await current(m) == [reworded, "The user's PIN is 4417"]
    [pin_event] = [r.id async for r in m.iter_records(app_name=APP, user_id=USER) if r.text == "My PIN is 4417."]
    erased = [r.id async for r in m.iter_records(app_name=APP, user_id=USER) if r.session_id == "s1"] + [pin_event]

    await m.delete_memory(app_name=APP, user_id=USER, session_id="s1")
    await m.delete_memory(app_name=APP, user_id=USER, memory_id=pin_event)
    assert await current(m) == ["The user lives in Berlin"]  # in its own evidence's words
    for word in ("Paris", "4417", *erased):  # nor the erased records' ids (in a fact's history)
        assert await scope_holds(m, word) == [], word
    if backend_name == "local":  # the store's bytes too (freed pages: the local engine's secure delete)
        await m.close()
        assert files_hold(backend_config, "Berlin")  # the bytes are read: what is kept is found
        for word in ("Paris", "4417"):
            assert files_hold(backend_config, word) == [], word
