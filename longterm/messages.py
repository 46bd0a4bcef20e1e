"""The argument of ``add()``: text, one message or a list of them (mem0's ``add()`` inputs).

The seam: ``as_messages(value)`` returns the messages as a list, each still in the shape it was
given (``shapes.as_event`` reads them later, off the loop for a big list), or raises
``InvalidInputError``: nothing at all, and a message holding no text and nothing else, are
refused, as ``add("")`` is, for saved they would be empty memories.

Why apart from ``shapes``: the shapes are every save's; this is one method's argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .errors import InvalidInputError
from .shapes import is_adk_object, is_mapping, plain


def as_messages(value: Any) -> list[Any]:
    """What ``add()`` takes (mem0's ``add()`` inputs): a string, one message, or a list of them."""
    if isinstance(value, str):
        if not value.strip():
            raise InvalidInputError("add() was given an empty string; pass text, a message or a list of messages.")
        return [value]
    if isinstance(value, Mapping) or is_adk_object(value) or hasattr(value, "model_dump"):
        items = [value]
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
        items = list(value)
        if not items:
            raise InvalidInputError("add() was given an empty list; pass text, a message or a list of messages.")
    else:
        raise InvalidInputError(f"add() takes text, a message or a list of messages, got {type(value).__name__}.")
    for i, item in enumerate(items):
        if _blank(item):
            raise InvalidInputError(
                f"events[{i}] has no text: add() saves each message it is given as a memory; leave it out."
            )
    return items


def _blank(message: Any) -> bool:
    """Whether a message given to ``add()`` holds no text and nothing else (no tool call, no
    part of another kind): saved, it would be an empty memory. A look at its fields, no reading."""
    if isinstance(message, str):
        return not message.strip()
    d = None if is_adk_object(message) else plain(message)
    if not isinstance(d, Mapping) or d.get("tool_calls") or d.get("function_call"):
        return False
    content = d.get("content")
    if isinstance(content, Mapping):
        content = content.get("parts")
    elif "parts" in d and content is None:
        content = d.get("parts")
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, (list, tuple)):
        texts = [p.get("text") if is_mapping(p) and set(p) <= {"text", "type"} else p for p in content]
        return all(isinstance(t, str) and not t.strip() for t in texts)
    return False
