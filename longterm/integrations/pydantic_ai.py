"""Pydantic AI integration: a memory toolset, and a run's messages saved exactly once.

The seam, over a ``LongTermMemory`` and its public API:

- ``memory_toolset(memory, user_id=...)``: a ``FunctionToolset`` with ``load_memory(query)``
  (and ``save_memory(text)`` unless ``save=False``) for ``Agent(toolsets=[...])``. Whose memories
  is the code's choice, never the model's: ``user_id="alice"``, a callable given the run's deps
  (``user_id=lambda deps: deps.account.id``), or, when none is given, the run's
  ``ctx.deps.user_id`` (an attribute or a key). A store that fails gives the model "memory is
  unavailable", never an exception in the run (``longterm.tools``).
- ``await save_messages(memory, result.all_messages(), user_id=, session_id=)``: a run's
  messages with its history saved as session ``session_id`` through the memory's auto-save
  policy (the user's words by default; ``policy=`` another), exactly once however often they are
  saved: the same list again, or a later run's ``all_messages()``. (``new_messages()`` counts
  occurrences within itself: a later run's sentence that repeats an earlier run's, same role and
  words, passes for it there; the whole history counts it as the new one it is.)

Why ids from what a message says: Pydantic AI's messages carry no ids, and a run's history comes
back in the next one (``message_history=``), often rebuilt by the app from the text it stored,
with new times, or loaded from JSON. A part is known by its role (user, assistant, tool call or
result, system), its content (text, media URLs, a call's id, name and arguments) and which
occurrence of that same role and content it is in the list (``integrations.conversation``), never
by its time: the history however rebuilt is what the ledger saw, and a sentence said again later
in the conversation is a new memory. A user prompt keeps its text (``str``, ``TextContent``, a
``StructuredContent``'s text as the model was sent it) and media by URL; bytes are not kept.
Pydantic AI has no memory interface of its own: tools and an explicit save are its seams. Which
app: ``app_name=``, else the memory's ``default_app`` (its ``app_name``, else ``"default_app"``):
give every integration of one memory the same app name and they share each user's memories.
Install with ``pip install 'longterm[pydantic-ai]'``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pydantic_core

from ..errors import InvalidInputError, require

require("pydantic_ai", package="pydantic-ai-slim", extra="pydantic-ai", purpose="longterm.integrations.pydantic_ai")

from pydantic_ai import FunctionToolset, RunContext  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelRequest,
    ModelResponse,
    StructuredContent,
    SystemPromptPart,
    TextContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UploadedFile,
    UserPromptPart,
)

from ..records import SaveResult  # noqa: E402
from ..tools import DESCRIPTION, answered, unavailable  # noqa: E402
from .conversation import app_of, keyed, save_conversation  # noqa: E402

if TYPE_CHECKING:
    from ..memory import LongTermMemory

#: Who the tools serve: a user id, or a function of the run's deps returning one.
UserOf = str | Callable[[Any], str] | None
#: What tells the model that save_memory stored the text.
SAVED = "Saved to long-term memory."


def _user_content(content: Any) -> list[dict[str, Any]]:
    """A user prompt's content as typed parts: its text (a ``TextContent``'s ``content``, and a
    ``StructuredContent``'s: its value as text, as the model was sent it), media by URL or by a
    provider's file id; bytes (``BinaryContent``) and cache points are not kept."""
    items = [content] if isinstance(content, str) else list(content)
    parts: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, TextContent):  # StructuredContent is one
            text = item.content
            if not text and isinstance(item, StructuredContent):
                text = pydantic_core.to_json(item.value).decode()
            parts.append({"type": "text", "text": text})
        elif getattr(item, "kind", "") == "image-url":
            parts.append({"type": "image_url", "image_url": {"url": item.url}})
        elif isinstance(getattr(item, "url", None), str):
            parts.append({"type": "file", "file": {"file_url": item.url}})
        elif isinstance(item, UploadedFile):
            parts.append({"type": "file", "file": {"file_id": item.file_id}})
    return parts


def _part(part: Any, when: float) -> dict[str, Any] | None:
    """One message part as an OpenAI chat message; None: not the conversation (retries, thinking)."""
    if isinstance(part, UserPromptPart):
        content = _user_content(part.content)
        return {"role": "user", "content": content, "timestamp": part.timestamp.timestamp()} if content else None
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content, "timestamp": part.timestamp.timestamp()}
    if isinstance(part, TextPart):
        return {"role": "assistant", "content": part.content, "timestamp": when} if part.content else None
    if isinstance(part, ToolCallPart):
        call = {"id": part.tool_call_id, "function": {"name": part.tool_name, "arguments": part.args_as_json_str()}}
        return {"role": "assistant", "tool_calls": [call], "timestamp": when}
    if isinstance(part, ToolReturnPart):
        return {
            "role": "tool",
            "tool_call_id": part.tool_call_id,
            "name": part.tool_name,
            "content": part.model_response_str(),
            "timestamp": part.timestamp.timestamp(),
        }
    return None


def conversation(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """A run's ``ModelRequest``/``ModelResponse`` messages as chat messages with ids, one a part."""
    pairs = []
    for message in messages:
        if not isinstance(message, (ModelRequest, ModelResponse)):
            raise InvalidInputError(
                f"save_messages takes Pydantic AI's messages (ModelRequest, ModelResponse), got "
                f"{type(message).__name__}; pass result.new_messages() or result.all_messages()."
            )
        when = message.timestamp.timestamp() if message.timestamp is not None else None
        for part in message.parts:
            chat = _part(part, when or 0.0)
            if chat is not None:  # known by what it is, not by its time (module docstring)
                pairs.append((chat, {k: v for k, v in chat.items() if k != "timestamp"}))
    return keyed(pairs, "pai")


async def save_messages(
    memory: LongTermMemory,
    messages: Sequence[Any],
    *,
    user_id: str,
    session_id: str,
    app_name: str | None = None,
    policy: Any = None,
) -> SaveResult:
    """Save a run's ``messages`` (``result.all_messages()``, or ``new_messages()``) as session
    ``session_id`` of the user, through the policy, exactly once however often they are saved."""
    return await save_conversation(
        memory,
        conversation(messages),
        app_name=app_of(memory, app_name),
        user_id=user_id,
        session_id=session_id,
        policy=policy,
    )


def _user(user_id: UserOf, deps: Any) -> str:
    if isinstance(user_id, str):
        return user_id
    if user_id is not None:
        return user_id(deps)
    found = deps.get("user_id") if isinstance(deps, Mapping) else getattr(deps, "user_id", None)
    if not isinstance(found, str) or not found:
        raise InvalidInputError(
            "the memory toolset has no user: pass memory_toolset(memory, user_id=...) (an id, or a function "
            "of the run's deps), or run the agent with deps that have a user_id."
        )
    return found


def memory_toolset(
    memory: LongTermMemory,
    *,
    user_id: UserOf = None,
    app_name: str | None = None,
    top_k: int | None = None,
    save: bool = True,
) -> FunctionToolset[Any]:
    """``load_memory(query)`` (and ``save_memory(text)``) bound to the user ``user_id`` names, in
    ``app_name`` (default: the memory's ``default_app``); see the module docstring."""
    app = app_of(memory, app_name)
    if isinstance(user_id, str):
        memory.scope(app, user_id)  # a bad id is an error now, not at the model's first call
    toolset: FunctionToolset[Any] = FunctionToolset()

    async def load_memory(ctx: RunContext[Any], query: str) -> dict[str, Any]:
        """Search the long-term memory of this user."""
        return await memory.as_tool(app_name=app, user_id=_user(user_id, ctx.deps), top_k=top_k)(query)

    async def save_memory(ctx: RunContext[Any], text: str) -> str:
        """Save one durable fact or preference the user stated, as one self-contained sentence."""
        user = _user(user_id, ctx.deps)
        try:
            await memory.add_memory(app_name=app, user_id=user, memories=[text])
        except Exception as exc:
            return str(unavailable("save_memory", exc, memory)["error"])
        answered("save_memory", memory)
        return SAVED

    toolset.add_function(load_memory, name="load_memory", description=DESCRIPTION)
    if save:
        toolset.add_function(save_memory, name="save_memory")
    return toolset


__all__ = ["memory_toolset", "save_messages"]
