"""A framework-neutral ``load_memory`` tool: a function plus its JSON schema.

The seam: ``memory.as_tool(app_name=, user_id=)`` returns a ``MemoryTool`` bound to one
user. Give ``tool.openai_schema()`` to an OpenAI-style chat API as a function tool; when
the model calls it, ``await tool(**arguments)`` (or ``tool.call_sync``) returns plain
JSON-ready data. The binding to (app, user) happens here, in code: the model can choose
the query, never whose memories it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from .memory import LongTermMemory

DESCRIPTION = (
    "Search the long-term memory of this user: facts, preferences and events from earlier "
    "conversations. Call it when the answer may depend on something the user said before."
)


class MemoryTool:
    name = "load_memory"
    description = DESCRIPTION
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for, in the user's words."}},
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(self, memory: "LongTermMemory", *, app_name: str, user_id: str, top_k: Optional[int] = None) -> None:
        memory._scope(app_name, user_id)  # validate now, not at the model's first call
        self.memory, self.app_name, self.user_id, self.top_k = memory, app_name, user_id, top_k

    def openai_schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}

    async def __call__(self, query: str) -> dict[str, Any]:
        res = await self.memory.search_memory(app_name=self.app_name, user_id=self.user_id, query=query, top_k=self.top_k)
        return {
            "memories": [
                {
                    "text": " ".join(p.text for p in m.content.parts if getattr(p, "text", None)),
                    "author": m.author,
                    "timestamp": m.timestamp,
                    "id": m.id,
                    "score": m.custom_metadata.get("score"),
                }
                for m in res.memories
            ]
        }

    def call_sync(self, query: str) -> dict[str, Any]:
        return self.memory._sync(self(query))
