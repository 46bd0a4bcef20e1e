"""Record sizes: the largest record an engine accepts, refused before anything is embedded or written.

The seam: ``record_bytes(r)`` is what a limit counts by default (an engine may count
something else: mem0 the text its one embedding represents); ``doubtful(records, limit)``
is a cheap test, fit for the event loop, of which records may be over ``limit``; and
``check(records, limit, count, engine)`` counts those (blocking work) and refuses the save
with an ``InvalidInputError`` that says the limit and what to do.

Why apart from the engine: a limit is a rule about records, the same for every engine;
the engine only says its number (``max_record_bytes``) and how it counts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from ..errors import InvalidInputError
from ..records import MemoryRecord


def record_bytes(r: MemoryRecord) -> int:
    """The text and, unless it is just the text, the content (compact UTF-8 JSON, as stored)."""
    if r.text_only_content():
        return len(r.text.encode())
    return len(r.text.encode()) + len(json.dumps(r.content, ensure_ascii=False, separators=(",", ":")).encode())


def doubtful(records: Sequence[MemoryRecord], limit: int | None) -> list[MemoryRecord]:
    """The records that may be over ``limit`` (None: no limit)."""
    if limit is None:
        return []
    # No UTF-8 character is over 4 bytes; only the others need their bytes counted.
    return [r for r in records if not (4 * len(r.text) <= limit and r.text_only_content())]


def check(
    records: Sequence[MemoryRecord], limit: int | None, count: Callable[[MemoryRecord], int], engine: str
) -> None:
    """Refuse the save when one of ``records`` is over ``limit``, as ``count`` counts it."""
    for r in records:
        size = count(r)
        if limit is not None and size > limit:
            raise InvalidInputError(
                f"event {r.event_id!r} of session {r.session_id!r} is {size} bytes, over the {engine} "
                f"backend's limit of {limit}; raise backend_config['max_record_bytes'] or "
                "exclude such events with the auto-save policy."
            )
