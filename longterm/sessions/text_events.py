"""The most common event, read without the models: a dict of text parts and nothing else.

The seam: ``text_event(raw, event_id)`` is a ``TextEvent`` when ``raw`` has the shape
``shapes.text_parts`` reads (a dict of at most ``id``, ``author``, ``timestamp`` and ``content``,
a dict of at most ``role`` and ``parts`` of ``text`` alone: what a chat transcript, an OpenAI or
LangChain message read by ``shapes`` or a JSON dump of a text turn is), or is an ADK event
object of text parts alone (``_adk_text``: what an ADK runner's session holds), its author a ``str``
and its time an ``int`` or a ``float`` (a subclass goes the ``Event`` way). For anything else it
is None, and the caller reads the event as an ``Event``. A ``TextEvent`` holds what ``Event``
makes of such a dict: the author and texts repaired (``repair_unicode``), the time read by
``parse_timestamp`` (a time it refuses: None, so the ``Event`` path says why);
``policies.classify.classify_text`` classifies it as ``classify`` does the ``Event``.

Why: validating an event's three models (``Event``, ``Content``, ``Part``, with their field
validators) was 5.2 us of the ~13 us planning takes a record, a tenth of a save; the checks
here cost well under one. ``tests/unit/test_text_events.py`` holds both paths to the same
records and errors on generated events and policies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError
from ..records import repair_unicode
from ..shapes import TEXT_CONTENT_FIELDS, text_parts
from .timestamps import parse_timestamp


@dataclass(slots=True)
class TextEvent:
    """An event of text parts (see the module docstring), with ``Event``'s field names."""

    id: str
    author: str
    timestamp: float
    role: str | None
    """``content.role`` as sent (``classify`` reads it through the alias table)."""
    texts: list[str]
    """Each part's text, repaired."""
    custom_metadata: None = None


#: The fields of an ADK event object the ``Event`` path reads besides id, author, timestamp and
#: content (its others, ``actions`` say, are kept by ``Event`` and read by nothing of a save).
_ADK_READ = ("partial", "error_code", "error_message", "input_transcription", "output_transcription", "custom_metadata")
_PART_SET = frozenset({"text"})


def _adk_text(raw: Any) -> tuple[Any, Any, Any, list[str]] | None:
    """(author, timestamp, content role, texts) of an ADK event object (a pydantic model, as
    ``google.adk.events.Event``) of text parts alone: each part a model with only ``text`` set,
    its content only ``role`` and ``parts``, none of ``_ADK_READ`` set. None for anything else."""
    if type(raw) is dict or getattr(raw, "__pydantic_fields_set__", None) is None:
        return None
    if any(getattr(raw, name, None) is not None for name in _ADK_READ):
        return None
    content = getattr(raw, "content", None)
    fields = getattr(content, "__pydantic_fields_set__", None)
    if content is None or fields is None or not TEXT_CONTENT_FIELDS.issuperset(fields) or content.__pydantic_extra__:
        return None
    parts = content.parts
    if type(parts) is not list or not parts:
        return None
    texts = []
    for part in parts:
        fields = getattr(part, "__pydantic_fields_set__", None)
        if fields is None or not _PART_SET.issuperset(fields) or getattr(part, "__pydantic_extra__", None):
            return None
        if type(text := part.text) is not str:
            return None
        texts.append(text)
    return getattr(raw, "author", None), getattr(raw, "timestamp", None), content.role, texts


def text_event(raw: Any, event_id: str) -> TextEvent | None:
    """``raw`` as a ``TextEvent`` when it has that shape, else None (see the module docstring)."""
    texts = text_parts(raw)
    if texts is not None:
        author, ts, role = raw.get("author"), raw.get("timestamp"), raw["content"].get("role")
    elif (adk := _adk_text(raw)) is not None:
        author, ts, role, texts = adk
    else:
        return None
    if (author is not None and type(author) is not str) or (role is not None and type(role) is not str):
        return None
    if ts is None:
        seconds = 0.0
    elif type(ts) in (int, float):
        try:
            seconds = parse_timestamp(ts)
        except InvalidInputError:  # the Event path refuses it, naming the field
            return None
    else:
        return None
    author = "" if author is None else repair_unicode(author)
    return TextEvent(event_id, author, seconds, role, [repair_unicode(t) for t in texts])
