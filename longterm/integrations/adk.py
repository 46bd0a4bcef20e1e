"""Google ADK integration: an ``Agent`` with ``long_term_memory=`` and a ``Runner`` that uses it.

The seam: ``Agent(..., long_term_memory=LongTermMemory(...))`` is an ADK ``LlmAgent`` that
(1) gets a ``load_memory`` tool of its own (a fresh instance: ADK's module-level
``load_memory`` object is shared by every agent in the process and must not be mutated),
plus a preload tool with ``preload_memory=True``; (2) with ``auto_save_session=True`` saves
its sessions through an ``AutoSaver`` (thresholds, idle timer, save before recall, flush;
see ``longterm.autosave``); ``close()`` flushes and releases that saver. ``Runner(agent=...)``
is ADK's runner with ``agent.long_term_memory`` as its memory service unless one is passed;
``close()`` flushes every unsaved tail first. VeADK's runner names work too: ``user_id=``,
``await runner.run(messages=..., session_id=...)``, ``runner.long_term_memory`` and
``save_session_to_long_term_memory(...)``. ``LongTermMemoryService`` and ``register()`` give
ADK's own CLI the store a ``longterm://`` URI names (``adk web --memory_service_uri URI``).

Why callbacks: the before-agent callback runs once per turn before the model or any tool
can search memory, so the user's other sessions are saved first (bounded by
``save_before_recall_timeout``); the after-agent callback runs once per turn with the live
session and only schedules work. Why our own tool classes: a memory that fails must cost
the turn its recall, not the reply - the tool tells the model memory is unavailable and
the error is logged with its cause (the library API itself still raises).
Install with ``pip install 'longterm[adk]'``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

from pydantic import Field, PrivateAttr, ValidationError
from typing_extensions import override

from ..errors import ConfigurationError, InvalidInputError, LongTermMemoryError, raise_ours_from, require

require("google.adk", package="google-adk", extra="adk", purpose="longterm.integrations.adk")

from google.adk.agents import BaseAgent, LlmAgent  # noqa: E402
from google.adk.agents.callback_context import CallbackContext  # noqa: E402
from google.adk.memory import BaseMemoryService  # noqa: E402
from google.adk.models import LlmRequest  # noqa: E402
from google.adk.runners import Runner as _AdkRunner  # noqa: E402
from google.adk.sessions import BaseSessionService, InMemorySessionService  # noqa: E402
from google.adk.tools.load_memory_tool import LoadMemoryTool  # noqa: E402
from google.adk.tools.preload_memory_tool import PreloadMemoryTool  # noqa: E402
from google.adk.tools.tool_context import ToolContext  # noqa: E402
from google.genai import types  # noqa: E402

from ..autosave import AutoSaver  # noqa: E402
from ..memory import LongTermMemory, SaveResult, unsaved_error  # noqa: E402
from ..tools import answered, unavailable  # noqa: E402
from ..uri import SCHEMES, parse_uri  # noqa: E402

log = logging.getLogger(__name__)


def _memory_of(tool_context: ToolContext) -> object:
    """The memory service of the turn ``tool_context`` belongs to (None where ADK does not say):
    an outage is a store's, told apart by it. ADK 2 says it (``get_invocation_context()``, public);
    ADK 1 keeps it private, and there every memory's outage is told as one."""
    invocation = getattr(tool_context, "get_invocation_context", None)
    return None if invocation is None else getattr(invocation(), "memory_service", None)


#: What VeADK's ``run(messages=...)`` takes: text or genai ``Content``, one or a list.
Messages = str | types.Content | list[str | types.Content]
#: The user a Runner runs as when neither ``user_id=`` nor the memory names one (VeADK style calls).
DEFAULT_USER = "default_user"


class LoadMemory(LoadMemoryTool):
    """ADK's ``load_memory``; a failing memory gives the model a "memory is unavailable" result."""

    @override
    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        try:
            result = await super().run_async(args=args, tool_context=tool_context)
        except Exception as exc:
            return unavailable("load_memory", exc, _memory_of(tool_context))
        answered("load_memory", _memory_of(tool_context))
        return result


class PreloadMemory(PreloadMemoryTool):
    """ADK's ``preload_memory``; a failing memory leaves the request without memories, logged."""

    @override
    async def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> None:
        try:
            await super().process_llm_request(tool_context=tool_context, llm_request=llm_request)
        except Exception as exc:
            unavailable("preload_memory", exc, _memory_of(tool_context))
        # No ``answered`` here: ADK's preload logs and swallows a failed search itself, so getting
        # here says nothing about the store (``load_memory`` ends an outage).


def _tool_names(tools: list[Any]) -> set[str]:
    return {getattr(t, "name", getattr(t, "__name__", "")) for t in tools}


def _callbacks(value: Any) -> list[Any]:
    return [] if value is None else list(value) if isinstance(value, list) else [value]


class Agent(LlmAgent):
    """An ADK LlmAgent with long-term memory: tools added, sessions saved automatically."""

    long_term_memory: LongTermMemory | None = None
    auto_save_session: bool = True
    preload_memory: bool = False
    min_messages_threshold: int | None = Field(default=None, description="Default: env or 10")
    min_time_threshold: float | None = Field(default=None, description="Default: env or 60 s")
    auto_save_memory_policy: Any = None
    auto_save_reconsider: bool = False
    """The first auto-save of each session considers every event again (after a policy change)."""
    save_before_recall_timeout: float = Field(default=2.0, ge=0)
    """Seconds a turn waits at most for the user's other sessions to be saved before it may recall."""

    _saver: AutoSaver | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise_ours_from(exc)  # a bad threshold is a ConfigurationError, not pydantic noise
            raise

    @override
    def model_post_init(self, __context: Any) -> None:
        super().model_post_init(__context)
        if self.long_term_memory is None:
            return
        names = _tool_names(self.tools)
        if "load_memory" not in names:
            self.tools.append(LoadMemory())
        if self.preload_memory and "preload_memory" not in names:
            self.tools.append(PreloadMemory())
        if self.auto_save_session:
            self._saver = self.long_term_memory.auto_saver(
                min_messages=self.min_messages_threshold,
                min_seconds=self.min_time_threshold,
                policy=self.auto_save_memory_policy,
                reconsider=self.auto_save_reconsider,
            )
            self.before_agent_callback = [*_callbacks(self.before_agent_callback), self._before_turn]
            self.after_agent_callback = [*_callbacks(self.after_agent_callback), self._after_turn]

    async def _before_turn(self, callback_context: CallbackContext) -> None:
        if self._saver is not None:
            try:
                await self._saver.before_turn(callback_context.session, timeout=self.save_before_recall_timeout)
            except Exception:  # bookkeeping must never cost the user a reply
                log.exception("saving the user's earlier sessions before this turn failed; the turn goes on")
        return None

    async def _after_turn(self, callback_context: CallbackContext) -> None:
        if self._saver is not None:
            try:
                self._saver.notify(callback_context.session)
            except Exception:
                log.exception("auto-save could not be scheduled")
        return None

    @property
    def auto_saver(self) -> AutoSaver | None:
        return self._saver

    async def close(self) -> None:
        """Save what this agent's auto-saver still holds, then release it; raise if a save fails.

        The memory stays open (other agents may use it); close it on its own.
        """
        saver, memory = self._saver, self.long_term_memory
        if saver is None or memory is None:
            return
        self._saver = None
        try:
            await saver.flush()
        finally:
            saver.close()
            memory.release(saver)


class Runner(_AdkRunner):
    """ADK's Runner, defaulting ``memory_service`` to the agent's ``long_term_memory``.

    Also accepts VeADK's names: ``user_id=`` (the user of ``run(messages=...)``), a default
    in-memory session service, ``long_term_memory`` and ``save_session_to_long_term_memory``.
    """

    def __init__(
        self,
        *,
        agent: BaseAgent | None = None,
        memory_service: BaseMemoryService | None = None,
        session_service: BaseSessionService | None = None,
        user_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        own = getattr(agent, "long_term_memory", None)
        if memory_service is None:
            memory_service = own
        super().__init__(
            agent=agent,
            memory_service=memory_service,
            session_service=session_service if session_service is not None else InMemorySessionService(),
            **kwargs,
        )
        self.long_term_memory: LongTermMemory | None = (
            own if own is not None else (memory_service if isinstance(memory_service, LongTermMemory) else None)
        )
        self.user_id: str = user_id or getattr(self.long_term_memory, "user_id", "") or DEFAULT_USER

    @override
    def run(self, messages: Messages | None = None, **kwargs: Any) -> Any:  # ADK's generator, or VeADK's reply
        """ADK's ``run(user_id=, session_id=, new_message=)`` (a generator of events), or, given
        ``messages`` (a string or a list of them), VeADK's ``await run(messages, session_id=)``:
        runs each message as a turn (creating the session if needed) and returns the last reply text."""
        if messages is None:
            return super().run(**kwargs)
        if "new_message" in kwargs:
            raise InvalidInputError("pass messages= (VeADK style) or new_message= (ADK style), not both.")
        return self._run_messages(messages, **kwargs)

    async def _run_messages(
        self, messages: Messages, *, user_id: str = "", session_id: str = "", run_config: Any = None
    ) -> str:
        user_id = user_id or self.user_id
        session_id = session_id or f"tmp-session-{uuid.uuid4().hex}"
        contents = []
        for m in messages if isinstance(messages, list) else [messages]:
            if isinstance(m, str):
                contents.append(types.Content(role="user", parts=[types.Part(text=m)]))
            elif isinstance(m, types.Content):
                contents.append(m)
            else:
                raise InvalidInputError(
                    f"run(messages=...) takes text or google.genai.types.Content, got {type(m).__name__}; "
                    "for media, build a Content with the parts you need."
                )
        where: dict[str, Any] = {"app_name": self.app_name, "user_id": user_id, "session_id": session_id}
        if await self.session_service.get_session(**where) is None:
            await self.session_service.create_session(**where)
        reply = ""
        for content in contents:
            async for event in self.run_async(
                user_id=user_id, session_id=session_id, new_message=content, run_config=run_config
            ):
                for part in (event.content.parts or []) if event.content else []:
                    if part.text and part.text.strip() and not part.thought:
                        reply = part.text
        return reply

    async def save_session_to_long_term_memory(
        self, session_id: str, user_id: str = "", app_name: str = "", **kwargs: Any
    ) -> SaveResult:
        """Save one session of this runner's session service (VeADK's name for ``add_session_to_memory``).

        ``kwargs`` go to ``add_session_to_memory`` (``auto_save_memory_policy=``, ``reconsider=``).
        """
        if self.long_term_memory is None:
            raise ConfigurationError(
                "this Runner has no long-term memory: give the agent long_term_memory=LongTermMemory(...) "
                "or pass memory_service=LongTermMemory(...) to the Runner."
            )
        app_name, user_id = app_name or self.app_name, user_id or self.user_id
        session = await self.session_service.get_session(app_name=app_name, user_id=user_id, session_id=session_id)
        if session is None:
            raise InvalidInputError(
                f"session {session_id!r} of user {user_id!r} in app {app_name!r} is not in this runner's "
                "session service; check the ids (user_id defaults to the runner's user_id)."
            )
        return await self.long_term_memory.add_session_to_memory(session, **kwargs)

    @override
    async def close(self) -> None:
        memories: list[LongTermMemory] = []
        for m in [*(getattr(a, "long_term_memory", None) for a in _walk(self.agent)), self.long_term_memory]:
            if m is not None and all(m is not x for x in memories):
                memories.append(m)
        failure: Exception | None = None
        try:
            for m in memories:
                try:
                    await m.flush()
                except LongTermMemoryError as exc:  # the others are flushed all the same
                    failure = failure or exc
        finally:
            await super().close()
        unsaved = sum(m.unsaved_events() for m in memories)
        if failure is not None and unsaved:
            released = "The runner was closed; its memory stays open (close it with memory.close(flush=False))."
            raise unsaved_error(unsaved, failure, released) from failure


class LongTermMemoryService(LongTermMemory):
    """The memory ADK's CLI builds from ``--memory_service_uri`` (a ``longterm.uri`` URI).

    ``adk web`` / ``adk api_server`` build a custom scheme's service as ``Class(uri=..., **kwargs)``
    (a ``services.yaml`` entry, or the factories ``register()`` adds); ADK's own keyword arguments
    (``agents_dir``, ...) say nothing about the store, so they are left out. It is a
    ``LongTermMemory`` (an ADK ``BaseMemoryService``) on the store the URI names.
    """

    def __init__(self, uri: str = "longterm://", **adk_options: Any) -> None:
        if adk_options:
            log.debug("LongTermMemoryService ignores ADK's options %s", sorted(adk_options))
        super().__init__(**parse_uri(uri))


def register(registry: Any = None) -> None:
    """Register every ``longterm`` URI scheme (``longterm.uri.SCHEMES``) with ADK's service registry
    (default: the CLI's), for a ``services.py`` beside the agents: then ``adk web --memory_service_uri
    longterm:///path/to/memory.db`` serves the agents with that store as their memory."""
    from google.adk.cli.service_registry import get_service_registry

    def factory(uri: str, **adk_options: Any) -> LongTermMemoryService:
        return LongTermMemoryService(uri, **adk_options)

    target = registry if registry is not None else get_service_registry()
    for scheme in SCHEMES:
        target.register_memory_service(scheme, factory)


def _walk(agent: object) -> Iterator[object]:
    if agent is None:
        return
    yield agent
    for sub in getattr(agent, "sub_agents", None) or []:
        yield from _walk(sub)


__all__ = ["Agent", "LoadMemory", "LongTermMemoryService", "PreloadMemory", "Runner", "register"]
