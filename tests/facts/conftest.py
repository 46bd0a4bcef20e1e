"""The fact scenarios' fixtures: every backend of the contract suite, and a scripted model.

The seam: ``provider_id``/``backend_name``/``backend_config``/``open_memory`` are the
contract suite's (imported, so the scenarios run on every engine it runs on); ``chat`` is a
``ScriptedChat`` on 127.0.0.1 that knows ``RULES``; ``facts_config(chat)`` points a memory at it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from longterm.testing.scripted_llm import FactRule, ScriptedChat
from tests.contract.conftest import backend_config, backend_name, open_memory, provider_id  # noqa: F401

RULES = [
    FactRule(r"\bI (?:live|moved) (?:in|to) (\w+)", "The user lives in {1}", "home city"),
    FactRule(r"\bI(?:'m| am) (vegetarian|vegan)\b", "The user is {1}", "diet"),
    FactRule(r"\bmy favou?rite player is (\w+)", "The user's favorite player is {1}", "favorite player"),
    FactRule(
        r"\bmy brother's favou?rite player is (\w+)",
        "The user's brother's favorite player is {1}",
        "favorite player",
        subject="user's brother",
    ),
]


def facts_config(chat: ScriptedChat, **more: Any) -> dict[str, Any]:
    """Short model deadline; retries only when a test flushes (no timer fires mid-test)."""
    return {
        "base_url": chat.base_url,
        "model": "scripted",
        "api_key": "k",
        "timeout": 1.0,
        "retry_seconds": 600,
        **more,
    }


@pytest.fixture
def chat() -> Iterator[ScriptedChat]:
    with ScriptedChat(RULES, slow_seconds=2.0) as c:
        yield c
