"""Remember a conversation, then recall from it. Offline, no API key; run it twice to see
that the second run writes nothing new (each message of the session is saved once).

    python examples/quickstart.py

Then, from the same directory, the CLI and the MCP server see the same memories:

    longterm search "Thai food" --app quickstart --user alice
    longterm stats
"""

from longterm import LongTermMemory


def main() -> None:
    with LongTermMemory(app_name="quickstart") as memory:  # ./.longterm/memory.db
        conversation = [  # OpenAI-style messages; ADK sessions, LangChain messages and text work too
            {"role": "user", "content": "I'm vegetarian and I love Thai food."},
            {"role": "assistant", "content": "Noted, no meat!"},
            {"role": "user", "content": "My flight to Bangkok leaves on March 3rd."},
        ]
        result = memory.add_sync(conversation, user_id="alice", session_id="monday")
        print(f"saved {result.saved} new memories of {result.new_events} new events")

        for question in ["What food do I like?", "When is my flight?"]:
            print(question)
            for m in memory.search_sync(question, user_id="alice", top_k=2):
                print(f"  {m.score:.2f}  {m.text}")


if __name__ == "__main__":
    main()
