"""What ``search_memory`` returns: ADK's types when google-adk is installed, look-alikes otherwise.

The seam: ``MemoryServiceBase``, ``MemoryEntry``, ``SearchMemoryResponse``, ``EntryContent``
(a ``MemoryEntry``'s content type) and ``make_content(dict)``. With google-adk importable they *are* ADK's classes, so
``LongTermMemory`` subclasses ``BaseMemoryService`` and ADK's ``Runner``, its pydantic
``InvocationContext`` and its ``load_memory`` tool accept it and its results unchanged
(pydantic validates those by class, so duck typing would not be enough). Without
google-adk, pydantic models with the same field names stand in, and the core install
stays free of ADK's dependency tree.
"""

from __future__ import annotations

import logging
from abc import ABC
from typing import Any

from pydantic import BaseModel, Field

from .sessions import Content

log = logging.getLogger(__name__)

try:  # pragma: no branch - which arm runs depends on the install
    from google.adk.memory.base_memory_service import BaseMemoryService as MemoryServiceBase
    from google.adk.memory.base_memory_service import SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.genai.types import Content as EntryContent
    from google.genai.types import Part as _Part

    HAVE_ADK = True
except ImportError:
    HAVE_ADK = False
    EntryContent = Content  # type: ignore[misc,assignment]  # ours stands in for genai's

    class MemoryServiceBase(ABC):  # type: ignore[no-redef]  # noqa: B024
        """Stand-in for ADK's BaseMemoryService when google-adk is not installed."""

    class MemoryEntry(BaseModel):  # type: ignore[no-redef]
        """Same fields as ADK's MemoryEntry."""

        content: Content
        custom_metadata: dict[str, Any] = Field(default_factory=dict)
        id: str | None = None
        author: str | None = None
        timestamp: str | None = None

    class SearchMemoryResponse(BaseModel):  # type: ignore[no-redef]
        memories: list[MemoryEntry] = Field(default_factory=list)


if HAVE_ADK:  # templates for the fast path of make_content
    # Constructed, not validated: genai's models build their validators on first validation
    # (``defer_build``), ~3 ms for ``Part``, and these two need none: every field given is valid.
    _TEXT_PART = _Part.model_construct(text="")
    _EMPTY_CONTENT = EntryContent.model_construct(role="user", parts=[])


def _text_only(content: dict[str, Any]) -> bool:
    parts = content.get("parts")
    return (
        isinstance(parts, list)
        and isinstance(content.get("role"), str)
        and all(type(p) is dict and len(p) == 1 and type(p.get("text")) is str for p in parts)
    )


def make_content(content: dict[str, Any], fallback_text: str) -> EntryContent:
    """The stored ADK-shaped content as ADK's ``types.Content`` (or ours, ``EntryContent`` either way).

    Text-only content (nearly every memory) is copied from validated templates with only
    ``role`` and ``text`` replaced: genai's validators run in Python and cost 20 us per
    hit, more than the whole query on a fast engine; the copy gives an equal object in 5.
    """
    if HAVE_ADK and _text_only(content):
        parts = [_TEXT_PART.model_copy(update={"text": p["text"]}) for p in content["parts"]]
        return _EMPTY_CONTENT.model_copy(update={"role": content["role"], "parts": parts})
    try:
        return EntryContent.model_validate(content)
    except Exception:  # content written by another tool or version: keep its text
        log.debug("stored content did not validate; returning its text", exc_info=True)
        return EntryContent.model_validate({"role": content.get("role") or "user", "parts": [{"text": fallback_text}]})


def entry_text(entry: Any) -> str:
    """The text parts of a ``MemoryEntry`` (ADK's or ours), joined by spaces."""
    content = getattr(entry, "content", None)
    parts = getattr(content, "parts", None) or []
    return " ".join(t for t in (getattr(p, "text", None) for p in parts) if t)


__all__ = [
    "HAVE_ADK",
    "EntryContent",
    "MemoryEntry",
    "MemoryServiceBase",
    "SearchMemoryResponse",
    "entry_text",
    "make_content",
]
