"""The fact layer against a model that is wrong, hostile or slow, and against a second worker
(local backend: this is the layer's own logic; the scenarios run it on every engine).

Each test failed before its fix: a NOOP naming no fact we showed dropped the new fact; a
consolidation answer with a cycle left no current fact; a cut emoji in an answer blocked a
user's facts for good; an erase waited for another user's model calls; a fact distilled by
another worker from evidence erased meanwhile stayed; one long fact emptied the profile.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from longterm import InvalidInputError, LongTermMemory
from longterm.facts.decide import MAX_FACT_CHARS
from longterm.facts.distill import POISON_STRIKES
from longterm.testing.scripted_llm import ScriptedChat
from tests.facts.conftest import RULES, facts_config
from tests.facts.test_scenarios import APP, DAY, T0, USER, current, every, said, save


@pytest.fixture
def chat() -> Iterator[ScriptedChat]:
    with ScriptedChat(RULES) as c:
        yield c


def local(tmp_path: Path, chat: ScriptedChat, **more: Any) -> LongTermMemory:
    return LongTermMemory(
        backend_config={"path": str(tmp_path / "m.db")}, app_name=APP, facts=facts_config(chat, **more)
    )


async def test_a_noop_naming_a_fact_it_was_never_shown_keeps_the_new_fact(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, chat)
    await save(m, said(1, "My favorite player is Messi."))
    chat.answer("reconcile", lambda task: {"decision": "NOOP", "target": "f99"})
    await save(m, said(2, "My favorite player is Ronaldo."))
    assert "The user's favorite player is Ronaldo" in await current(m)
    await m.close()


async def test_a_noop_on_another_persons_fact_keeps_both_apart(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, chat)
    await save(m, said(1, "My favorite player is Messi."))
    chat.answer("reconcile", lambda task: {"decision": "NOOP", "target": "f1"})
    await save(m, said(2, "My brother's favorite player is Neymar."))
    facts = {f["text"]: f for f in await every(m)}
    assert facts["The user's favorite player is Messi"]["sessions"] == ["s1"]
    assert facts["The user's brother's favorite player is Neymar"]["sessions"] == ["s2"]
    await m.close()


async def test_a_consolidation_answer_with_a_cycle_keeps_one_current_fact(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, chat)
    await save(m, said(1, "I live in Porto."), said(2, "I'm vegan."))
    cycle = {"merges": [{"keep": "f1", "drop": "f2"}, {"keep": "f2", "drop": "f1"}]}
    chat.answer("consolidate", lambda task: cycle)
    assert await m.consolidate_facts(app_name=APP, user_id=USER) == {"before": 2, "after": 1}
    assert len(await current(m)) == 1
    await m.close()


async def test_a_cut_emoji_or_a_huge_text_in_an_answer_is_repaired_and_the_user_goes_on(
    tmp_path: Path, chat: ScriptedChat
):
    m = local(tmp_path, chat)
    answer = {"facts": [{"text": "The user loves \ud83c pizza", "evidence": ["e1"]}, {"text": "x" * 100_000}]}
    chat.answer("extract", lambda task: answer)
    await save(m, said(1, "Pizza is my favourite food."))
    assert sorted(await current(m), key=len) == ["The user loves \ufffd pizza", "x" * MAX_FACT_CHARS]
    await save(m, said(2, "I live in Porto."))
    assert "The user lives in Porto" in await current(m)
    await m.close()


async def test_a_batch_failing_for_a_reason_not_the_model_is_skipped_after_three_tries(
    tmp_path: Path, chat: ScriptedChat, monkeypatch: pytest.MonkeyPatch
):
    m = local(tmp_path, chat)
    layer = m._own.parts.facts  # the fact layer of the app's index
    assert layer is not None
    real = layer.backend.upsert

    async def broken(records: Any) -> None:
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(layer.backend, "upsert", broken)
    await m.add_session_to_memory(said(1, "I live in Porto."))  # try 1 (evidence is written by the facade)
    # flush: the pass the save started (1), then a retry (2); the next flush's try (3) skips it
    assert [await m.flush_facts() for _ in range(2)] == [1, 0]
    monkeypatch.setattr(layer.backend, "upsert", real)
    await save(m, said(2, "I'm vegan."))  # the user's later facts are not blocked behind it
    assert await current(m) == ["The user is vegan"]
    await m.close()


async def test_an_erase_never_waits_for_the_model(tmp_path: Path, chat: ScriptedChat):
    chat.gate = threading.Event()  # alice's model calls hang until the gate opens
    m = local(tmp_path, chat, timeout=60)
    await m.add_session_to_memory(said(1, "I live in Porto."))
    await m.add_session_to_memory({**said(1, "I'm vegan."), "user_id": "bob"})
    try:
        assert await asyncio.wait_for(m.delete_memories(app_name=APP, user_id="bob"), 10) == 1
        assert await asyncio.wait_for(m.delete_memory(app_name=APP, user_id=USER, session_id="s1"), 10) == 1
    finally:
        chat.gate.set()
    assert await m.flush_facts() == 0 and await every(m) == []
    await m.close()


async def test_a_fact_another_worker_distils_from_evidence_erased_meanwhile_does_not_stay(
    tmp_path: Path, chat: ScriptedChat
):
    chat.gate = threading.Event()
    worker = local(tmp_path, chat, timeout=60)  # two memories on one file: two processes
    eraser = local(tmp_path, chat, timeout=60)
    await worker.add_session_to_memory(said(1, "I live in Porto."))
    layer = worker._own.parts.facts
    assert layer is not None
    for _ in range(200):  # until the worker took the batch and waits for the model
        if not layer.pending():
            break
        await asyncio.sleep(0.05)
    assert await eraser.delete_memory(app_name=APP, user_id=USER, session_id="s1") == 1
    chat.gate.set()
    assert await worker.flush_facts() == 0
    assert await every(worker) == [] and await eraser.get_user_profile(USER, app_name=APP) == ""
    await worker.close()
    await eraser.close()


async def test_the_profile_skips_a_fact_too_long_for_it_not_the_ones_after(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, chat, profile_chars=200)
    chat.answer("extract", lambda task: {"facts": [{"text": "The user's bio: " + "x" * 300, "evidence": ["e1"]}]})
    await save(m, said(1, "Here is my bio."))
    await save(m, said(2, "I live in Porto."))
    assert await m.get_user_profile(USER, app_name=APP) == "- The user lives in Porto"
    await m.close()


async def test_as_of_takes_a_datetime_or_an_iso_string_and_bad_values_say_so(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, chat)
    await save(m, said(1, "I live in Porto."))
    await save(m, said(3, "I moved to Lisbon."))
    then = datetime.fromtimestamp(T0 + 2 * DAY, tz=timezone.utc)
    for as_of in (T0 + 2 * DAY, then, then.isoformat()):
        assert [f["text"] for f in await m.list_facts(app_name=APP, user_id=USER, as_of=as_of)] == [
            "The user lives in Porto"
        ]
    for bad in ("yesterday", True, [1]):
        with pytest.raises(InvalidInputError, match="as_of"):
            await m.list_facts(app_name=APP, user_id=USER, as_of=bad)
    with pytest.raises(InvalidInputError, match="fact_id"):
        await m.fact_history(app_name=APP, user_id=USER, fact_id=["f1"])  # type: ignore[arg-type]
    await m.close()


@pytest.mark.parametrize("fault", ["deep", "long", "shape", "malformed"])
async def test_an_unusable_answer_is_retried_never_skipped(tmp_path: Path, chat: ScriptedChat, fault: str):
    m = local(tmp_path, chat)
    chat.fail(*[fault] * POISON_STRIKES)  # as many times as a fault of ours may fail
    await m.add_session_to_memory(said(1, "I live in Porto."))
    assert await m.flush_facts() == 1  # the save's try and the flush's: the event waits
    assert await m.flush_facts() == 1  # the third: still waiting, not skipped
    assert await m.flush_facts() == 0
    assert await current(m) == ["The user lives in Porto"]
    await m.close()


async def test_a_model_that_sends_a_byte_at_a_time_fails_within_the_timeout_and_is_retried(
    tmp_path: Path, chat: ScriptedChat, caplog: pytest.LogCaptureFixture
):
    chat.dribble_seconds = 0.2  # each byte in time for any read timeout: only a deadline on the call stops it
    m = local(tmp_path, chat, timeout=2)
    chat.fail("dribble")
    with caplog.at_level(logging.WARNING, logger="longterm.facts"):
        await m.add_session_to_memory(said(1, "I live in Porto."))
        assert await asyncio.wait_for(m.flush_facts(), 10) == 0  # the save's try failed, the flush's landed
    first, retry = chat.times  # when the dribbled call and its retry reached the model
    assert retry - first < 2 + 1
    assert "did not answer within 2 s" in caplog.text
    assert await current(m) == ["The user lives in Porto"]
    await asyncio.wait_for(m.close(), 10)


async def test_a_model_that_stays_down_is_retried_with_backoff_not_hammered(tmp_path: Path, chat: ScriptedChat):
    chat.down = True
    m = local(tmp_path, chat, retry_seconds=0.2)
    await m.add_session_to_memory(said(1, "I live in Porto."))
    await asyncio.sleep(3.3)  # tries at 0, 0.2, 0.6, 1.4 and 3.0 s (every 0.2 s: 16 tries)
    gaps = [b - a for a, b in zip(chat.times, chat.times[1:], strict=False)]
    assert 2 <= len(gaps) <= 5, gaps  # not every 0.2 s (16 tries)
    # Each wait at least the doubled backoff: a busy machine only adds to a wait (it once made
    # 0.2 s into 0.35 and 0.4 into 0.45, which a ratio of neighbouring gaps read as no backoff).
    assert all(gap >= 0.9 * 0.2 * 2**i for i, gap in enumerate(gaps)), gaps
    chat.down = False
    await m.add_session_to_memory(said(2, "I'm vegan."))  # the user's next save tries at once
    for _ in range(100):
        if len(await current(m)) == 2:
            break
        await asyncio.sleep(0.05)
    assert await current(m) == ["The user lives in Porto", "The user is vegan"]
    await m.close()


async def test_an_erase_after_the_worker_took_a_users_records_leaves_no_fact_of_them(
    tmp_path: Path, chat: ScriptedChat, monkeypatch: pytest.MonkeyPatch
):
    # The cause of a rare failure of the test above: the worker had taken the user's queued
    # records, and the erase's mark went in before it read the marks for its batch; that read
    # then counted the erase as already followed, and the fact it distilled from the erased
    # record stayed. Here the worker's first read of the marks waits until the erase is done.
    from longterm.facts.erasure import Erasures

    erased, calls = threading.Event(), []
    real = Erasures.read

    async def read(self: Erasures, scope: Any) -> set[str]:
        calls.append(scope)
        if len(calls) == 1:  # the worker's, with the user's records taken: the erase comes now
            await asyncio.to_thread(erased.wait, 10)
        return await real(self, scope)

    monkeypatch.setattr(Erasures, "read", read)
    m = local(tmp_path, chat, timeout=60)
    await m.add_session_to_memory(said(1, "I live in Porto."))
    while not calls:
        await asyncio.sleep(0.01)
    assert await asyncio.wait_for(m.delete_memory(app_name=APP, user_id=USER, session_id="s1"), 10) == 1
    erased.set()
    assert await m.flush_facts() == 0
    assert await every(m) == []
    await m.close()
