"""A framework-neutral ``load_memory`` tool: a function plus its JSON schema.

The seam: ``memory.as_tool(app_name=, user_id=)`` returns a ``MemoryTool`` bound to one
user, over the memory's port (``longterm.ports.MemoryPort``). Give ``tool.openai_schema()``
to an OpenAI-style chat API as a function tool; when the model calls it,
``await tool(**arguments)`` (or ``tool.call_sync``) returns plain JSON-ready data. The
binding to (app, user) happens here, in code: the model can choose the query, never whose
memories it reads. ``user_id`` defaults to the memory's ``user_id`` (VeADK's deprecated
``LongTermMemory(user_id=...)``).

Why a failing memory returns a result instead of raising: a tool call is part of an agent's
turn, and a store that is down must cost the turn its recall, not the reply. The tool says
memory is unavailable (``unavailable``, shared with the ADK tools); the library API
(``search_memory``) still raises.

Why one line per outage: a store that is down fails every turn's search. The tools log one
warning when a memory's outage starts (what failed, no traceback: the cause is ours to word)
and one when it answers again (how long, how many calls went without it), the calls in
between at debug level; ``answered(memory)`` is what a tool calls after a search that worked.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .entries import entry_text
from .errors import InvalidInputError, LongTermMemoryError

if TYPE_CHECKING:
    from .ports import MemoryPort

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Search the long-term memory of this user: facts, preferences and events from earlier "
    "conversations. Call it when the answer may depend on something the user said before."
)

#: What the model reads when memory cannot be searched.
UNAVAILABLE = "Long-term memory is unavailable right now; answer without it."


@dataclass
class _Outage:
    since: float
    calls: int
    backend: str


_lock = threading.Lock()
#: Memories (by ``id``) whose searches fail now, as the tools saw them; an entry leaves with its memory.
_down: dict[int, _Outage] = {}


def _where(memory: object) -> dict[str, object]:
    return {"backend": getattr(memory, "backend_name", None), "index": getattr(memory, "index", None)}


def unavailable(tool: str, exc: BaseException, memory: object = None) -> dict[str, Any]:
    """Log why ``tool`` could not search ``memory`` (once per outage); return the tool result
    that tells the model."""
    if isinstance(exc, InvalidInputError):  # the model's arguments, not the store: let it try again
        log.warning("%s refused the model's query: %s", tool, exc, extra=_where(memory))
        return {"memories": [], "error": f"The query was refused: {exc}"}
    cause = f"{type(exc).__name__}: {exc}"
    key, where = id(memory), _where(memory)
    with _lock:
        outage = _down.get(key)
        if outage is None:
            _down[key] = _Outage(time.monotonic(), 1, str(where["backend"]))
            if memory is not None:
                weakref.finalize(memory, _down.pop, key, None)
        else:
            outage.calls += 1
    if outage is not None:
        log.debug("%s: memory is still unavailable: %s", tool, cause, extra=where)
    elif isinstance(exc, LongTermMemoryError):  # says what failed and what to do: no traceback
        log.warning("%s: memory is unavailable, turns go on without it until it answers: %s", tool, cause, extra=where)
    else:  # our bug: its traceback, once
        log.error("%s: memory is unavailable, turns go on without it: %s", tool, cause, exc_info=exc, extra=where)
    return {"memories": [], "error": UNAVAILABLE}


def answered(tool: str, memory: object = None) -> None:
    """A search of ``tool`` on ``memory`` worked: log the end of its outage, if it had one."""
    if not _down:  # the common case: nothing to look up
        return
    with _lock:
        outage = _down.pop(id(memory), None)
    if outage is not None:
        log.warning(
            "%s: memory answers again after %.1f s (%d calls went without it)",
            tool,
            time.monotonic() - outage.since,
            outage.calls,
            extra=_where(memory),
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

    def __init__(
        self, memory: MemoryPort, *, app_name: str, user_id: str | None = None, top_k: int | None = None
    ) -> None:
        user: str = user_id or memory.user_id  # VeADK's LongTermMemory(user_id=...): the default user
        memory.scope(app_name, user)  # validate now, not at the model's first call
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
            return unavailable(self.name, exc, self.memory)
        answered(self.name, self.memory)
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
        return self.memory.portal.call(self(query))
