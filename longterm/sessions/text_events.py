"""The most common event, read without the models: a dict of text parts and nothing else.

The seam: ``text_event(raw, event_id)`` is a ``TextEvent`` when ``raw`` has the shape
``shapes.text_parts`` reads (a dict of at most ``id``, ``author``, ``timestamp`` and ``content``,
a dict of at most ``role`` and ``parts`` of ``text`` alone: what a chat transcript, an OpenAI or
LangChain message read by ``shapes`` or a JSON dump of a text turn is), its author a ``str``
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
from ..shapes import text_parts
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


def text_event(raw: Any, event_id: str) -> TextEvent | None:
    """``raw`` as a ``TextEvent`` when it has that shape, else None (see the module docstring)."""
    texts = text_parts(raw)
    if texts is None:
        return None
    author, ts = raw.get("author"), raw.get("timestamp")
    if author is not None and type(author) is not str:
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
    return TextEvent(event_id, author, seconds, raw["content"].get("role"), [repair_unicode(t) for t in texts])
