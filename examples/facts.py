"""Facts that stay true: a user moves and changes diet; the profile says what holds now,
the history what held before, and search puts the current fact first. Then the cost of
distilling 100 saved events.

    python examples/facts.py

Offline it uses the scripted model from ``longterm.testing`` (a few rules on 127.0.0.1);
with ``LONGTERM_FACTS_BASE_URL`` and ``LONGTERM_FACTS_MODEL`` (and ``_API_KEY``) set, your model.
"""

import asyncio
import os
import tempfile

from longterm import LongTermMemory
from longterm.testing import make_session
from longterm.testing.scripted_llm import FactRule, ScriptedChat

RULES = [
    FactRule(r"\bI (?:live|moved) (?:in|to) (\w+)", "The user lives in {1}", "home city"),
    FactRule(r"\bI(?:'m| am) (vegetarian|vegan)\b", "The user is {1}", "diet"),
    FactRule(r"\bI work (?:at|for) (\w+)", "The user works at {1}", "employer"),
    FactRule(r"\bmy sister (\w+)", "The user has a sister called {1}", "sister", subject="user"),
]
DAY = 86_400.0
SMALL_TALK = ["How are you?", "Thanks, that helps.", "What's the weather like?", "Tell me a joke.", "Ok, good."]


def conversation(n: int) -> list[tuple[str, str]]:
    """Ten user turns (and replies), two of which state a fact."""
    facts = [f"I live in City{n}.", "I'm vegan now." if n % 2 else "I'm vegetarian.", "I work at Acme."]
    said = [facts[n % 3], f"my sister Ana{n % 2} visits soon"] + [SMALL_TALK[i % 5] for i in range(8)]
    return [t for text in said for t in (("user", text), ("model", "Noted."))]


async def story(memory: LongTermMemory) -> None:
    turns = [
        ["I live in Porto and I'm vegetarian.", "I work at Acme."],
        ["Big news: I moved to Lisbon!", "And I'm vegan now."],
    ]
    for n, said in enumerate(turns):
        session = make_session(f"chat-{n}", "app", "alice", [("user", s) for s in said], start=1.7e9 + n * DAY)
        await memory.add_session_to_memory(session)  # returns at once: facts follow in the background
        await memory.flush_facts()
    print("profile:\n" + await memory.get_user_profile("alice", app_name="app"))
    facts = await memory.list_facts(app_name="app", user_id="alice")
    home = next(f for f in facts if "Lisbon" in f["text"])
    trail = await memory.fact_history(app_name="app", user_id="alice", fact_id=home["id"])
    print("history:", " -> ".join(f"{f['text']} (until {f['valid_until'] or 'now'})" for f in trail))
    found = await memory.search_memory(app_name="app", user_id="alice", query="where does the user live", top_k=3)
    print("search:", [" ".join(p.text for p in e.content.parts if p.text) for e in found.memories])


async def cost(settings: dict, chat: ScriptedChat, live: bool) -> None:
    """100 user events in 10 sessions: distilled after each save (``live``, as an agent saves),
    or all at once (an import: batches of ``batch_events``)."""
    before = dict(chat.usage)
    with tempfile.TemporaryDirectory() as tmp:
        memory = LongTermMemory(backend_config={"path": f"{tmp}/cost.db"}, facts=settings)
        for n in range(10):
            session = make_session(f"s{n}", "app", "bob", conversation(n), start=1.7e9 + n * DAY)
            await memory.add_session_to_memory(session)
            if live:
                await memory.flush_facts()
        await memory.flush_facts()
        facts = len(await memory.list_facts(app_name="app", user_id="bob"))
        await memory.close()
    used = {k: chat.usage[k] - before[k] for k in before}
    print(
        f"100 events, {'after each save' if live else 'at once'}: {used['calls']} model calls, "
        f"{used['prompt_tokens']} prompt + {used['completion_tokens']} completion tokens; {facts} current facts"
    )


async def main() -> None:
    base_url, model = os.environ.get("LONGTERM_FACTS_BASE_URL"), os.environ.get("LONGTERM_FACTS_MODEL")
    with tempfile.TemporaryDirectory() as tmp, ScriptedChat(RULES) as chat:
        settings = {"base_url": base_url or chat.base_url, "model": model or "scripted"}
        memory = LongTermMemory(backend_config={"path": f"{tmp}/memory.db"}, facts=settings)
        await story(memory)
        await memory.close()
        if not base_url:  # the scripted endpoint counts what it was asked
            await cost(settings, chat, live=True)
            await cost(settings, chat, live=False)


if __name__ == "__main__":
    asyncio.run(main())
