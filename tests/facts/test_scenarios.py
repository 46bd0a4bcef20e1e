"""The fact layer's scenarios, on every backend of the contract suite, against a scripted model.

Each test saves conversations as a user would, waits for the background work with
``flush_facts`` and checks what an agent would see: the current facts, the history, search
and the profile.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from longterm import LongTermMemory
from longterm.testing import make_session
from longterm.testing.scripted_llm import ScriptedChat
from tests.facts.conftest import facts_config

APP, USER = "app", "u1"
DAY = 86_400.0
T0 = 1_700_000_000.0


def said(n: int, *texts: str) -> dict[str, Any]:
    """Session ``s<n>``, on day ``n``: the user says ``texts``, the agent answers each."""
    turns = [t for text in texts for t in (("user", text), ("model", "Noted."))]
    return make_session(f"s{n}", APP, USER, turns=turns, start=T0 + n * DAY)


async def save(m: LongTermMemory, *sessions: dict[str, Any]) -> None:
    for s in sessions:
        await m.add_session_to_memory(s)
    assert await m.flush_facts() == 0


async def current(m: LongTermMemory) -> list[str]:
    return [f["text"] for f in await m.list_facts(app_name=APP, user_id=USER)]


async def every(m: LongTermMemory) -> list[dict[str, Any]]:
    return await m.list_facts(app_name=APP, user_id=USER, include_superseded=True)


def texts(response: Any) -> list[str]:
    return [" ".join(p.text for p in e.content.parts if p.text) for e in response.memories]


async def test_moved_city_new_fact_is_current_old_in_history_search_puts_current_first(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I live in Porto, near the river."))
    await save(m, said(2, "Big news: I moved to Lisbon last month."))

    assert await current(m) == ["The user lives in Lisbon"]
    facts = {f["text"]: f for f in await every(m)}
    porto, lisbon = facts["The user lives in Porto"], facts["The user lives in Lisbon"]
    assert porto["superseded_by"] == lisbon["id"] and porto["valid_until"] == lisbon["valid_from"]
    trail = await m.fact_history(app_name=APP, user_id=USER, fact_id=lisbon["id"])
    assert [f["text"] for f in trail] == ["The user lives in Porto", "The user lives in Lisbon"]
    assert [h["op"] for h in trail[0]["history"]] == ["added", "superseded"]
    assert len(lisbon["evidence"]) == 1 and lisbon["sessions"] == ["s2"]

    found = await m.search_memory(app_name=APP, user_id=USER, query="which city does the user live in", top_k=5)
    assert texts(found)[0] == "The user lives in Lisbon"
    assert found.memories[0].custom_metadata["longterm"]["kind"] == "fact"
    assert "The user lives in Porto" not in texts(found)  # superseded: history only
    evidence = await m.search_memory(app_name=APP, user_id=USER, query="Porto river", kind="evidence")
    assert texts(evidence)[0] == "I live in Porto, near the river."
    assert all("longterm" not in e.custom_metadata for e in evidence.memories)
    as_of = await m.list_facts(app_name=APP, user_id=USER, as_of=T0 + 1.5 * DAY)
    assert [f["text"] for f in as_of] == ["The user lives in Porto"]


async def test_diet_change_supersedes_and_the_profile_says_what_is_true_now(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I'm vegetarian, so no meat for me."), said(2, "I live in Porto."))
    await save(m, said(3, "These days I'm vegan, actually."))

    assert await current(m) == ["The user lives in Porto", "The user is vegan"]
    profile = await m.get_user_profile(USER, app_name=APP)
    assert profile == "- The user lives in Porto\n- The user is vegan"
    assert [f["text"] for f in await every(m) if f["valid_until"]] == ["The user is vegetarian"]


async def test_a_statement_about_another_person_supersedes_nothing(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    chat.naive = True  # a model that takes similarity for contradiction: the layer's guard must hold
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "My favorite player is Messi."))
    await save(m, said(2, "My brother's favorite player is Ronaldo."))

    assert "reconcile" in chat.requests  # the model was asked, and said UPDATE
    assert await current(m) == [
        "The user's favorite player is Messi",
        "The user's brother's favorite player is Ronaldo",
    ]
    assert all(f["valid_until"] is None for f in await every(m))
    assert (await m.get_user_profile(USER, app_name=APP)).splitlines()[0] == "- The user's favorite player is Messi"


async def test_the_same_fact_said_three_times_is_one_fact_with_all_its_evidence(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I live in Porto."))
    await save(m, said(2, "As I said, I live in Porto."), said(3, "i live in porto!"))

    facts = await every(m)
    assert [f["text"] for f in facts] == ["The user lives in Porto"]
    assert len(facts[0]["evidence"]) == 3 and facts[0]["sessions"] == ["s1", "s2", "s3"]
    assert [h["op"] for h in facts[0]["history"]] == ["added", "confirmed", "confirmed"]


async def test_erasing_a_session_or_the_user_erases_the_facts_they_produced(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I live in Porto."), said(2, "I'm vegetarian."))
    await save(m, said(3, "I moved to Lisbon."))

    assert await m.delete_memory(app_name=APP, user_id=USER, session_id="s3") == 2  # its event and the fact
    assert await current(m) == ["The user lives in Porto", "The user is vegetarian"]  # Porto is current again
    assert "Lisbon" not in await m.get_user_profile(USER, app_name=APP)

    await m.delete_memories(app_name=APP, user_id=USER)
    assert await every(m) == [] and await m.get_user_profile(USER, app_name=APP) == ""
    await m.add_session_to_memory(said(2, "I'm vegetarian."))  # erased stays erased: nothing is new
    assert await m.flush_facts() == 0 and await every(m) == []


async def test_model_down_then_up_facts_catch_up_exactly_once_across_restarts(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    chat.down = True
    m = open_memory(facts=facts_config(chat))
    await m.add_session_to_memory(said(1, "I live in Porto."))
    assert await m.flush_facts() == 1  # the saved event waits; the evidence is saved and found
    assert texts(await m.search_memory(app_name=APP, user_id=USER, query="Porto")) == ["I live in Porto."]
    assert await current(m) == []
    await m.close()  # the process stops while the model is down

    chat.down = False
    m = open_memory(facts=facts_config(chat))
    await save(m, said(2, "I'm vegan."))  # the first save for this user catches up on s1 too
    assert await current(m) == ["The user lives in Porto", "The user is vegan"]
    assert chat.requests.count("extract") == 1  # one call for both sessions
    await m.close()

    m = open_memory(facts=facts_config(chat))
    await save(m, said(3, "Nice weather today."))
    assert chat.requests.count("extract") == 2  # only s3: nothing was distilled twice
    assert [len(f["evidence"]) for f in await every(m)] == [1, 1]


async def test_a_batch_that_fails_halfway_lands_once_as_a_whole(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat, combined=False))  # the two-step form: calls to fail between
    chat.fail("ok", "ok", "malformed", "malformed")  # extract, Lisbon's reconcile, then the vegan one fails
    await m.add_session_to_memory(said(1, "I live in Porto.", "I moved to Lisbon.", "I'm vegan."))
    assert await m.flush_facts() == 3 and await every(m) == []  # nothing of the batch landed
    assert await m.flush_facts() == 0
    assert await current(m) == ["The user lives in Lisbon", "The user is vegan"]
    assert [f["text"] for f in await every(m) if f["valid_until"]] == ["The user lives in Porto"]


async def test_an_older_statement_saved_later_goes_to_history_not_to_the_present(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    await save(m, said(2, "I moved to Lisbon."))
    await save(m, said(1, "I live in Porto."))  # an import of an older conversation
    assert await current(m) == ["The user lives in Lisbon"]
    porto, lisbon = await every(m)  # oldest first
    assert porto["text"] == "The user lives in Porto" and porto["superseded_by"] == lisbon["id"]
    assert porto["valid_until"] == lisbon["valid_from"]


async def test_rebuild_gives_the_same_facts_from_the_same_answers(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat, batch_events=2))
    await save(m, said(1, "I live in Porto.", "I'm vegetarian."))
    await save(m, said(2, "I moved to Lisbon."), said(3, "I'm vegan now."))
    before = await every(m)
    assert len(before) == 4

    result = await m.rebuild_facts(app_name=APP, user_id=USER)
    assert result == {"before": 4, "after": 4, "events": 4}
    assert await every(m) == before


async def test_malformed_json_429_timeouts_and_drops_are_retried_and_land_once(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    for n, fault in enumerate(["malformed", "429", "500", "timeout", "drop"], start=1):
        chat.fail(fault, fault)  # the attempt after the save and flush's retry both fail
        await m.add_session_to_memory(said(n, f"I live in City{n}."))
        assert await m.flush_facts() == 1, fault  # failed: kept for later, evidence saved
        assert await m.flush_facts() == 0, fault  # retried: landed
    facts = await every(m)
    assert [f["text"] for f in facts if not f["valid_until"]] == ["The user lives in City5"]
    assert len(facts) == 5 and all(len(f["evidence"]) == 1 for f in facts)


async def test_an_answer_nested_too_deep_is_the_models_fault_retried_until_a_good_one_lands(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    m = open_memory(facts=facts_config(chat))
    chat.fail("deep", "deep", "deep")  # valid JSON, 10,000 lists deep: three times, more than a fault of ours may fail
    await m.add_session_to_memory(said(1, "I live in Porto."))
    assert await m.flush_facts() == 1  # the save's try and the flush's: the event waits
    assert await m.flush_facts() == 1  # the third: still waiting, not skipped
    assert await m.flush_facts() == 0  # a good answer: the fact lands
    assert await current(m) == ["The user lives in Porto"]
    assert chat.requests.count("extract") == 4


async def test_a_save_never_waits_for_the_model(open_memory: Callable[..., LongTermMemory], chat: ScriptedChat):
    chat.gate = threading.Event()  # every model call is held until the gate opens
    m = open_memory(facts=facts_config(chat, timeout=60))
    result = await asyncio.wait_for(m.add_session_to_memory(said(1, "I live in Porto.")), 60)
    assert result.saved == 1 and await current(m) == []
    chat.gate.set()
    await save(m)
    assert await current(m) == ["The user lives in Porto"]


async def test_consolidate_resolves_what_an_add_only_model_left_but_never_merges_two_people(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat
):
    chat.add_only = True  # every reconcile answer is ADD: the old and the new both stay current
    m = open_memory(facts=facts_config(chat))
    await save(m, said(1, "I live in Porto."), said(2, "My favorite player is Messi."))
    await save(m, said(3, "I moved to Lisbon."), said(4, "My brother's favorite player is Ronaldo."))
    assert len(await current(m)) == 4

    chat.add_only, chat.naive = False, True  # a consolidating model that would also merge the two players
    assert await m.consolidate_facts(app_name=APP, user_id=USER) == {"before": 4, "after": 3}
    assert await current(m) == [
        "The user's favorite player is Messi",
        "The user lives in Lisbon",
        "The user's brother's favorite player is Ronaldo",
    ]
    porto = next(f for f in await every(m) if f["text"] == "The user lives in Porto")
    lisbon = next(f for f in await every(m) if f["text"] == "The user lives in Lisbon")
    assert porto["superseded_by"] == lisbon["id"] and set(porto["evidence"]) <= set(lisbon["evidence"])
    assert await m.consolidate_facts(app_name=APP, user_id=USER) == {"before": 3, "after": 3}
