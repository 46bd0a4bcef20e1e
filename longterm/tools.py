"""A framework-neutral ``load_memory`` tool: a function plus its JSON schema.

The seam: ``memory.as_tool(app_name=, user_id=)`` returns a ``MemoryTool`` bound to one
user. Give ``tool.openai_schema()`` to an OpenAI-style chat API as a function tool; when
the model calls it, ``await tool(**arguments)`` (or ``tool.call_sync``) returns plain
JSON-ready data. The binding to (app, user) happens here, in code: the model can choose
the query, never whose memories it reads. ``user_id`` defaults to the memory's
``user_id`` (VeADK's deprecated ``LongTermMemory(user_id=...)``).

Why a failing memory returns a result instead of raising: a tool call is part of an agent's
turn, and a store that is down must cost the turn its recall, not the reply. The tool says
memory is unavailable (``unavailable``, shared with the ADK tools) and the error is logged
with its cause; the library API (``search_memory``) still raises.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .entries import entry_text
from .errors import InvalidInputError

if TYPE_CHECKING:
    from .memory import LongTermMemory

log = logging.getLogger("longterm.tools")

DESCRIPTION = (
    "Search the long-term memory of this user: facts, preferences and events from earlier "
    "conversations. Call it when the answer may depend on something the user said before."
)

#: What the model reads when memory cannot be searched.
UNAVAILABLE = "Long-term memory is unavailable right now; answer without it."


def unavailable(tool: str, exc: BaseException) -> dict[str, Any]:
    """Log why ``tool`` could not search memory; return the tool result that tells the model."""
    if isinstance(exc, InvalidInputError):  # the model's arguments, not the store: let it try again
        log.warning("%s refused the model's query: %s", tool, exc)
        return {"memories": [], "error": f"The query was refused: {exc}"}
    cause = f"{type(exc).__name__}: {exc}"
    log.error("%s: memory is unavailable, the turn goes on without it: %s", tool, cause, exc_info=exc)
    return {"memories": [], "error": UNAVAILABLE}


class MemoryTool:
    name = "load_memory"
    description = DESCRIPTION
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for, in the user's words."}},
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(
        self, memory: LongTermMemory, *, app_name: str, user_id: str | None = None, top_k: int | None = None
    ) -> None:
        user: str = user_id or memory.user_id  # VeADK's LongTermMemory(user_id=...): the default user
        memory._scope(app_name, user)  # validate now, not at the model's first call
        self.memory, self.app_name, self.user_id, self.top_k = memory, app_name, user, top_k

    def openai_schema(self) -> dict[str, Any]:
        function = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return {"type": "function", "function": function}

    async def __call__(self, query: str) -> dict[str, Any]:
        try:
            res = await self.memory.search_memory(
                app_name=self.app_name, user_id=self.user_id, query=query, top_k=self.top_k
            )
        except Exception as exc:
            return unavailable(self.name, exc)
        return {
            "memories": [
                {
                    "text": entry_text(m),
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
