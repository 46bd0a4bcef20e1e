"""OpenAI Agents SDK integration: memory tools, hooks that save each run, memories in the instructions.

The seam, over a ``LongTermMemory`` and its public API:

- ``memory_tools(memory, user_id=, save=False)``: the SDK's function tools ``load_memory(query)``
  (and ``save_memory(text)``), bound in code to one user: the model chooses the query, never whose
  memories it reads. A store that fails gives the model "memory is unavailable", never an
  exception in the run (``longterm.tools``).
- ``LongTermHooks(memory, user_id=, session_id=)``: ``RunHooks`` (``Runner.run(..., hooks=)``);
  ``hooks.agent_hooks`` is the same recorder as ``AgentHooks`` (``Agent(hooks=)``). It follows
  the items of each model call (``on_llm_start``'s input, ``on_llm_end``'s output) and, when the
  run ends, saves them as session ``session_id`` through the memory's auto-save policy (the
  user's words by default; ``policy=`` another). A store that fails then costs the run its save,
  not its reply: the failure is logged (a warning) and the items kept, so the next run's save or
  ``await hooks.save()`` writes them, once. ``await hooks.save()`` saves what it has seen (after a
  run that raised, say); there a failure raises.
- ``save_items(memory, items, user_id=, session_id=)``: the same save for items you hold
  (``result.to_input_list()``, a ``Session``'s items).
- ``memory_instructions(memory, instructions, user_id=)``: dynamic instructions (the SDK's way to
  preload): the instructions, then what the memory holds about the user's last message.

Why at the end of the run: a user's question saved before the model searches would be found by
its own search; the run's items are saved once it answered. Why exactly once whatever is replayed:
every item gets an id derived from what it is (``integrations.conversation``), so the items each
call hands again, a session's replayed history or a second ``save`` are events the ledger has
seen. Which app: ``app_name=``, else the memory's ``default_app`` (its ``app_name``, else
``"default_app"``), the app of ``memory.add``/``search``: give every integration of one memory
the same app name and they share each user's memories. Install with ``pip install
'longterm[openai-agents]'``.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import LongTermMemoryError, require

require("agents", package="openai-agents", extra="openai-agents", purpose="longterm.integrations.openai_agents")

from agents import AgentHooks, FunctionTool, RunContextWrapper, RunHooks, function_tool  # noqa: E402

from ..records import SaveResult  # noqa: E402
from ..tools import DESCRIPTION, answered, unavailable  # noqa: E402
from .conversation import app_of, keyed, save_conversation  # noqa: E402

if TYPE_CHECKING:
    from ..memory import LongTermMemory

log = logging.getLogger(__name__)

#: Item types that are the conversation; others (reasoning, hosted tool calls) are the model's steps.
MESSAGE_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
#: What tells the model that save_memory stored the text.
SAVED = "Saved to long-term memory."
#: How the log says a run's save failed (its items wait for the next save).
NOT_SAVED = "long-term memory could not save this run's items; the next save writes them. Session"


def _plain(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    return dump(exclude_unset=True) if callable(dump) else {}


def _part(part: Any) -> dict[str, Any] | None:
    """One content part, reduced to what it says (the same whether the SDK's output or its replay)."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    p = _plain(part)
    kind = p.get("type")
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": str(p.get("text") or "")}
    if kind == "refusal":
        return {"type": "refusal", "refusal": str(p.get("refusal") or "")}
    if kind == "input_image" and isinstance(p.get("image_url"), str):
        return {"type": "image_url", "image_url": {"url": p["image_url"]}}
    if kind == "input_file" and (p.get("file_id") or p.get("file_url") or p.get("filename")):
        ref = {k: p[k] for k in ("file_id", "file_url", "filename") if p.get(k)}
        return {"type": "file", "file": ref}
    return None  # audio and other media: nothing a memory searches


def _message(item: Any, names: dict[str, str]) -> dict[str, Any] | None:
    """An SDK item (Responses API shape) as an OpenAI chat message; None: not the conversation."""
    d = _plain(item)
    kind = d.get("type", "message" if "role" in d else None)
    if kind == "message" and d.get("role") in MESSAGE_ROLES:
        content = d.get("content")
        parts = [p for p in (_part(x) for x in ([content] if isinstance(content, str) else content or [])) if p]
        return {"role": MESSAGE_ROLES[d["role"]], "content": parts} if parts else None
    if kind == "function_call":
        names[str(d.get("call_id"))] = str(d.get("name") or "")
        call = {"id": d.get("call_id"), "function": {"name": d.get("name"), "arguments": d.get("arguments") or "{}"}}
        return {"role": "assistant", "tool_calls": [call]}
    if kind == "function_call_output":
        output = d.get("output")
        body = output if isinstance(output, str) else [p for p in (_part(x) for x in output or []) if p]
        return {
            "role": "tool",
            "tool_call_id": d.get("call_id"),
            "name": names.get(str(d.get("call_id")), ""),
            "content": body,
        }
    return None


def conversation(items: Sequence[Any]) -> list[dict[str, Any]]:
    """``items`` (input items, output items, or ``result.new_items``) as chat messages with ids."""
    names: dict[str, str] = {}
    pairs = []
    for item in items:
        to_input = getattr(item, "to_input_item", None)  # a RunItem of result.new_items
        d = _plain(to_input() if callable(to_input) else item)
        message = _message(d, names)
        if message is not None:  # a message's own id (unique, or a placeholder) is part of what it is
            pairs.append((message, {"message": message, "id": d.get("id") if "content" in message else None}))
    return keyed(pairs, "oai")


async def save_items(
    memory: LongTermMemory,
    items: Sequence[Any],
    *,
    user_id: str,
    session_id: str,
    app_name: str | None = None,
    policy: Any = None,
) -> SaveResult:
    """Save a run's ``items`` (``result.to_input_list()``, a session's items) as session
    ``session_id`` of the user, through the policy, exactly once however often they come."""
    return await save_conversation(
        memory,
        conversation(items),
        app_name=app_of(memory, app_name),
        user_id=user_id,
        session_id=session_id,
        policy=policy,
    )


def memory_tools(
    memory: LongTermMemory, *, user_id: str, app_name: str | None = None, top_k: int | None = None, save: bool = False
) -> list[FunctionTool]:
    """``load_memory(query)`` (and with ``save=True``, ``save_memory(text)``) as the SDK's function
    tools, bound to ``user_id`` in ``app_name`` (default: the memory's ``default_app``)."""
    app = app_of(memory, app_name)
    search = memory.as_tool(app_name=app, user_id=user_id, top_k=top_k)

    async def load_memory(query: str) -> str:
        return json.dumps(await search(query), ensure_ascii=False, default=str)

    async def save_memory(text: str) -> str:
        try:
            await memory.add_memory(app_name=app, user_id=user_id, memories=[text])
        except Exception as exc:
            return str(unavailable("save_memory", exc, memory)["error"])
        answered("save_memory", memory)
        return SAVED

    tools = [function_tool(load_memory, name_override="load_memory", description_override=DESCRIPTION)]
    if save:
        what = "Save one durable fact or preference the user stated, as one self-contained sentence."
        tools.append(function_tool(save_memory, name_override="save_memory", description_override=what))
    return tools


class _Recorder:
    """The items of one conversation as its model calls see them, and their save."""

    def __init__(self, memory: LongTermMemory, app: str, user_id: str, session_id: str, policy: Any) -> None:
        memory.scope(app, user_id)  # a bad id is an error now, not at the end of the first run
        self.memory, self.app, self.user_id, self.session_id, self.policy = memory, app, user_id, session_id, policy
        self.items: list[Any] = []
        self.unsaved: list[dict[str, Any]] = []
        """The messages a save that failed left (with their ids): the next save writes them."""

    def started(self, input_items: Sequence[Any]) -> None:
        self.items = list(input_items)

    def ended(self, output: Sequence[Any]) -> None:
        self.items = [*self.items, *output]

    async def save(self) -> SaveResult:
        """Save the items seen and what a failed save left, each once (by id); a failure raises
        and keeps them all for the next save."""
        fresh = conversation(self.items)
        ids = {m["id"] for m in fresh}
        messages = [*(m for m in self.unsaved if m["id"] not in ids), *fresh]
        try:
            result = await save_conversation(
                self.memory,
                messages,
                app_name=self.app,
                user_id=self.user_id,
                session_id=self.session_id,
                policy=self.policy,
            )
        except BaseException:
            self.unsaved = messages
            raise
        self.unsaved = []
        return result

    async def settle(self) -> None:
        """The save at a run's end: a store that fails costs the run its save, not its reply
        (the failure logged, the items kept for the next save)."""
        try:
            await self.save()
        except Exception as exc:
            cause = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, LongTermMemoryError):  # says what failed: no traceback
                log.warning("%s %r: %s", NOT_SAVED, self.session_id, cause)
            else:  # our bug: its traceback
                log.error("%s %r: %s", NOT_SAVED, self.session_id, cause, exc_info=exc)


class LongTermAgentHooks(AgentHooks[Any]):
    """``LongTermHooks``' recorder as one agent's hooks (``Agent(hooks=...)``)."""

    def __init__(self, recorder: _Recorder) -> None:
        self.recorder = recorder

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: str | None, input_items: list[Any]) -> None:
        self.recorder.started(input_items)

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.recorder.ended(response.output)

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        await self.recorder.settle()

    async def save(self) -> SaveResult:
        return await self.recorder.save()


class LongTermHooks(RunHooks[Any]):
    """Saves each run's items to long-term memory when it ends (module docstring); ``agent_hooks``
    is the same as one agent's ``AgentHooks``."""

    def __init__(
        self,
        memory: LongTermMemory,
        *,
        user_id: str,
        session_id: str,
        app_name: str | None = None,
        policy: Any = None,
    ) -> None:
        self.recorder = _Recorder(memory, app_of(memory, app_name), user_id, session_id, policy)
        self.agent_hooks = LongTermAgentHooks(self.recorder)

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: str | None, input_items: list[Any]) -> None:
        self.recorder.started(input_items)

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.recorder.ended(response.output)

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        await self.recorder.settle()

    async def save(self) -> SaveResult:
        """Save what the hooks have seen and what a run's save that failed left (the ledger
        skips what was saved); a store that fails raises here."""
        return await self.recorder.save()


def _last_user_text(items: Sequence[Any]) -> str:
    for message in reversed(conversation(items)):
        if message["role"] == "user":
            return " ".join(p["text"] for p in message["content"] if p.get("type") == "text")
    return ""


def memory_instructions(
    memory: LongTermMemory,
    instructions: Any = "",
    *,
    user_id: str,
    app_name: str | None = None,
    top_k: int = 3,
    min_score: float = 0.2,
) -> Callable[[RunContextWrapper[Any], Any], Awaitable[str]]:
    """Dynamic instructions (``Agent(instructions=...)``): ``instructions`` (text, or the SDK's
    ``(context, agent)`` callable), then the user's memories that match their last message
    (``top_k`` at most, scoring ``min_score`` or more); a store that fails adds nothing (logged)."""
    search = memory.as_tool(app_name=app_of(memory, app_name), user_id=user_id, top_k=top_k)

    async def with_memories(context: RunContextWrapper[Any], agent: Any) -> str:
        base = instructions(context, agent) if callable(instructions) else instructions
        text = str(await base if inspect.isawaitable(base) else base)
        query = _last_user_text(context.turn_input)
        found = (await search(query))["memories"] if query.strip() else []
        lines = [m["text"] for m in found if m["text"] and (m["score"] or 0) >= min_score]
        if not lines:
            return text
        remembered = "\n".join(f"- {line}" for line in lines)
        return f"{text}\n\nWhat you remember about this user from earlier conversations:\n{remembered}".strip()

    return with_memories


__all__ = ["LongTermAgentHooks", "LongTermHooks", "memory_instructions", "memory_tools", "save_items"]
