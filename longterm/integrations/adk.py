"""Google ADK integration: an ``Agent`` with ``long_term_memory=`` and a ``Runner`` that uses it.

The seam: ``Agent(..., long_term_memory=LongTermMemory(...))`` is an ADK ``LlmAgent`` that
(1) gets a ``load_memory`` tool of its own (a fresh ``LoadMemoryTool`` instance: ADK's
module-level ``load_memory`` object is shared by every agent in the process and must not
be mutated), plus ADK's ``PreloadMemoryTool`` with ``preload_memory=True``; and
(2) with ``auto_save_session=True`` saves its sessions after turns through an
``AutoSaver`` (thresholds, session switches, flush; see ``longterm.autosave``).
``Runner(agent=...)`` is ADK's runner with ``agent.long_term_memory`` as its memory
service unless one is passed, and ``close()`` flushes every unsaved tail first.

Why an after-agent callback: it runs once per turn with the live session, after the
turn's events were appended; it only schedules work, so a slow or failing backend never
delays or breaks the reply. Install with ``pip install 'longterm[adk]'``.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from pydantic import Field, PrivateAttr, ValidationError

from ..errors import raise_ours_from, require

require("google.adk", package="google-adk", extra="adk", purpose="longterm.integrations.adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.runners import Runner as _AdkRunner  # noqa: E402
from google.adk.tools.load_memory_tool import LoadMemoryTool  # noqa: E402
from google.adk.tools.preload_memory_tool import PreloadMemoryTool  # noqa: E402

from ..autosave import AutoSaver  # noqa: E402
from ..memory import LongTermMemory  # noqa: E402

log = logging.getLogger("longterm.adk")


def _tool_names(tools: list[Any]) -> set[str]:
    return {getattr(t, "name", getattr(t, "__name__", "")) for t in tools}


class Agent(LlmAgent):
    """An ADK LlmAgent with long-term memory: tools added, sessions saved automatically."""

    long_term_memory: Optional[LongTermMemory] = None
    auto_save_session: bool = True
    preload_memory: bool = False
    min_messages_threshold: Optional[int] = Field(default=None, description="Default: env or 10")
    min_time_threshold: Optional[float] = Field(default=None, description="Default: env or 60 s")
    auto_save_memory_policy: Any = None

    _saver: Optional[AutoSaver] = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise_ours_from(exc)  # a bad threshold is a ConfigurationError, not pydantic noise
            raise

    def model_post_init(self, __context: Any) -> None:
        super().model_post_init(__context)
        if self.long_term_memory is None:
            return
        names = _tool_names(self.tools)
        if "load_memory" not in names:
            self.tools.append(LoadMemoryTool())
        if self.preload_memory and "preload_memory" not in names:
            self.tools.append(PreloadMemoryTool())
        if self.auto_save_session:
            self._saver = self.long_term_memory.auto_saver(
                min_messages=self.min_messages_threshold, min_seconds=self.min_time_threshold, policy=self.auto_save_memory_policy
            )
            callbacks = self.after_agent_callback
            callbacks = [] if callbacks is None else list(callbacks) if isinstance(callbacks, list) else [callbacks]
            self.after_agent_callback = [*callbacks, self._after_turn]

    async def _after_turn(self, callback_context: Any) -> None:
        if self._saver is not None:
            try:
                self._saver.notify(callback_context.session)
            except Exception:  # bookkeeping must never cost the user a reply
                log.exception("auto-save could not be scheduled")
        return None

    @property
    def auto_saver(self) -> Optional[AutoSaver]:
        return self._saver


class Runner(_AdkRunner):
    """ADK's Runner, defaulting ``memory_service`` to the agent's ``long_term_memory``."""

    def __init__(self, *, agent: Any = None, memory_service: Any = None, **kwargs: Any) -> None:
        if memory_service is None and agent is not None:
            memory_service = getattr(agent, "long_term_memory", None)
        super().__init__(agent=agent, memory_service=memory_service, **kwargs)

    async def close(self) -> None:
        memories = []
        for a in _walk(self.agent):
            m = getattr(a, "long_term_memory", None)
            if m is not None and all(m is not x for x in memories):
                memories.append(m)
        try:
            for m in memories:
                await m.flush()
        finally:
            await super().close()


def _walk(agent: Any):
    if agent is None:
        return
    yield agent
    for sub in getattr(agent, "sub_agents", None) or []:
        yield from _walk(sub)


__all__ = ["Agent", "Runner"]
