"""A fact model's answer over the 4 MB it may be (docs/facts.md, "How it fails"), on every engine:
its batch is not marked in the store's ledger, waits (``flush_facts``), says why (``facts_error``
and the log) and is tried again until an answer is usable, in this process or the next."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from longterm import LongTermMemory
from longterm.facts.llm import MAX_ANSWER_BYTES
from longterm.testing.scripted_llm import ScriptedChat
from tests.facts.conftest import facts_config
from tests.facts.test_scenarios import APP, USER, current, said

TOO_LONG = f"answered more than {MAX_ANSWER_BYTES:,} bytes"


@pytest.mark.parametrize("provider_id", ["local"])  # the fact layer's own logic: one engine (13 s each)
async def test_an_oversized_answer_leaves_its_batch_waiting_until_an_answer_is_usable(
    open_memory: Callable[..., LongTermMemory], chat: ScriptedChat, caplog: pytest.LogCaptureFixture
):
    settings = facts_config(chat, timeout=30)  # the answer is refused for its size, never for its time
    m = open_memory(facts=settings)
    chat.fail("long", "long")  # the save's try and the flush's: each answer just over the limit
    with caplog.at_level(logging.WARNING, logger="longterm.facts"):
        await m.add_session_to_memory(said(1, "I live in Porto."))
        assert await m.flush_facts() == 1
    assert TOO_LONG in (m.facts_error or "")
    assert TOO_LONG in caplog.text
    assert await current(m) == []
    await m.close()  # a restart: the batch is in no queue now, only unmarked in the store's ledger

    again = open_memory(facts=settings)
    chat.fail("long")
    assert await again.distill_facts(app_name=APP, user_id=USER) == 1
    assert TOO_LONG in (again.facts_error or "")
    assert await again.distill_facts(app_name=APP, user_id=USER) == 0
    assert again.facts_error is None
    assert await current(again) == ["The user lives in Porto"]
