"""A LangGraph graph whose long-term memory is longterm: it saves in one thread and recalls in another.

    python examples/langgraph_store.py       # offline: a scripted "model", no key

The graph is compiled with ``store=LongTermStore(memory, user_at=0)``: element 0 of a namespace
is the longterm user, so ``("alice", "memories")`` is alice's and never bob's. Thread 1: the
user says something worth keeping and the node puts it in the store. Thread 2 (a new
conversation, its own checkpoint): the node searches the store with the question (longterm's
hybrid search) and answers from it; bob, in thread 3, finds nothing. A real graph would call a
chat model where ``reply`` is scripted here. Last, LangMem's memory tools (what an agent calls to
keep and find memories) work over the same store.
Needs: pip install 'longterm[langgraph]' langmem.
"""

from __future__ import annotations

from typing import TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langmem import create_manage_memory_tool, create_search_memory_tool

from longterm import LongTermMemory
from longterm.integrations.langgraph import LongTermStore


class State(TypedDict):
    user: str
    said: str
    answer: str


def reply(state: State) -> dict[str, str]:
    store, ns = get_store(), (state["user"], "memories")
    if state["said"].startswith("Remember: "):  # the scripted "model" decides to save
        fact = state["said"].removeprefix("Remember: ")
        store.put(ns, f"fact-{len(store.search(ns, limit=100)) + 1}", {"text": fact})
        return {"answer": "Noted!"}
    hits = store.search(ns, query=state["said"], limit=1)
    return {"answer": f"You told me: {hits[0].value['text']}" if hits else "I don't know yet."}


def main() -> None:
    with LongTermMemory(app_name="assistant") as memory:  # ./.longterm/memory.db
        store = LongTermStore(memory, user_at=0)
        graph = (
            StateGraph(State)
            .add_node("reply", reply)
            .add_edge(START, "reply")
            .add_edge("reply", END)
            .compile(checkpointer=InMemorySaver(), store=store)
        )

        def ask(user: str, said: str, thread: str) -> str:
            out = graph.invoke({"user": user, "said": said, "answer": ""}, {"configurable": {"thread_id": thread}})
            return str(out["answer"])

        print("thread 1 >", ask("alice", "Remember: I'm allergic to shellfish", "thread-1"))
        print("thread 2 >", ask("alice", "What am I allergic to?", "thread-2"))
        print("bob      >", ask("bob", "What am I allergic to?", "thread-3"))
        manage = create_manage_memory_tool(namespace=("alice", "memories"), store=store)
        recall = create_search_memory_tool(namespace=("alice", "memories"), store=store)
        manage.invoke({"content": "Alice's seat preference is the aisle", "action": "create"})
        print("langmem  >", "aisle" in str(recall.invoke({"query": "seat preference"})))


if __name__ == "__main__":
    main()
