"""``longterm demo``: the main job end to end on the embedded default, offline.

Two earlier conversations are saved with the default policy (what the user said), then a
new session asks questions and prints what memory recalled for each. Nothing here needs
a network, a model or an API key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .memory import LongTermMemory

APP, USER = "demo_app", "alice"

#: Printed after the demo: the one step from recalled words to facts that stay current.
FACTS_HINT = (
    "Facts that stay current (Lisbon replaces Porto, with history) and a profile to preload: set "
    "LONGTERM_FACTS_BASE_URL, LONGTERM_FACTS_MODEL and LONGTERM_FACTS_API_KEY (any OpenAI-compatible "
    "endpoint); see docs/facts.md."
)

CONVERSATIONS: list[list[tuple[str, str]]] = [
    [
        ("user", "Hi! I'm Alice. I just moved to Lisbon for a job at a solar energy startup."),
        ("model", "Welcome to Lisbon, Alice! How is the new job?"),
        ("user", "Great so far. I'm allergic to peanuts, so the office snacks are a minefield."),
        ("model", "Good to know. I'll keep that in mind."),
        ("user", "My sister Maria is visiting in March; we want to go hiking in Sintra."),
    ],
    [
        ("user", "I adopted a cat last weekend and named her Pixel."),
        ("model", "Pixel is a lovely name!"),
        ("user", "我最近在学习中文，每周二晚上上课。"),
        ("user", "For my birthday on June 12th I'd like to try a Japanese omakase restaurant."),
    ],
]

QUESTIONS = [
    "What is my cat called?",
    "Which food am I allergic to?",
    "Who is visiting me in March, and what do we plan?",
    "我什么时候上中文课？",
    "What kind of restaurant did I want for my birthday?",
]


def sessions() -> list[dict[str, Any]]:
    out = []
    for n, turns in enumerate(CONVERSATIONS, start=1):
        events = [
            {
                "id": f"s{n}-e{i}",
                "author": "user" if role == "user" else "assistant",
                "timestamp": 1_760_000_000 + n * 86_400 + i * 60,
                "content": {"role": role, "parts": [{"text": text}]},
            }
            for i, (role, text) in enumerate(turns)
        ]
        out.append({"id": f"session-{n}", "app_name": APP, "user_id": USER, "events": events})
    return out


async def run(memory: LongTermMemory, emit: Callable[[str, Any], None]) -> None:
    """Save the conversations, then ask; ``emit(kind, payload)`` does the printing."""
    for s in sessions():
        result = await memory.add_session_to_memory(s)
        emit("saved", result)
    for q in QUESTIONS:
        response = await memory.search_memory(app_name=APP, user_id=USER, query=q, top_k=2)
        emit("recall", (q, response.memories))
