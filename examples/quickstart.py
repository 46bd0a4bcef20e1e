"""Save a conversation, then recall from it in a new one. Offline; run it twice to see
that the second save writes nothing new.

    python examples/quickstart.py
"""

import asyncio

from longterm import LongTermMemory


async def main() -> None:
    memory = LongTermMemory(app_name="quickstart")  # ./.longterm/memory.db
    yesterday = {
        "id": "monday",
        "app_name": "quickstart",
        "user_id": "alice",
        "events": [
            {
                "id": "1",
                "author": "user",
                "content": {"role": "user", "parts": [{"text": "I'm vegetarian and I love Thai food."}]},
            },
            {"id": "2", "author": "assistant", "content": {"role": "model", "parts": [{"text": "Noted, no meat!"}]}},
            {
                "id": "3",
                "author": "user",
                "content": {"role": "user", "parts": [{"text": "My flight to Bangkok leaves on March 3rd."}]},
            },
        ],
    }
    result = await memory.add_session_to_memory(yesterday)
    print(f"saved {result.saved} new memories of {result.new_events} new events")

    for question in ["What food do I like?", "When is my flight?"]:
        found = await memory.search_memory(app_name="quickstart", user_id="alice", query=question)
        print(question, "->", [m.content.parts[0].text for m in found.memories])
    await memory.close()


if __name__ == "__main__":
    asyncio.run(main())
