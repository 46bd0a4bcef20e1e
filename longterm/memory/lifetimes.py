"""A memory's life: how long it lives (``ttl``, ``expires_at``), and the moment a read is made at.

The seam: ``seconds(name, value)`` reads a lifetime (seconds or a ``timedelta``, positive and
finite); ``expiry(now, ttl=, expires_at=, default=)`` is the moment a save's memories stop being
returned (None: never), the save's own ``ttl``/``expires_at`` winning over the memory's default;
``SETTLED`` is the ledger session holding the ids of records corrected (``update``) or swept after
they expired, which a save with ``reconsider=True`` leaves as they are.

Why the clock starts at the save: a chat imported a year late with ``ttl=30 days`` lives 30 days
from the import, as the user asked; an ``expires_at`` names the moment itself. Why a ledger set
and not only the ledger's events: ``reconsider=True`` writes every event of a session again on
purpose (erased ones included), but a correction or an expiry is the owner's word on that very
memory, which no replay may undo.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from ..errors import InvalidInputError
from ..sessions import parse_timestamp

#: Ledger session of the record ids a reconsidered save leaves alone (a NUL-led id no caller can send).
SETTLED = "\x00settled"
#: Longest lifetime accepted (seconds): 1,000 years, past which a date is not a lifetime.
MAX_TTL = 1_000 * 365.25 * 86_400


def seconds(name: str, value: Any) -> float:
    """``value`` (seconds, or a ``timedelta``) as positive finite seconds; an ``InvalidInputError`` naming ``name``."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInputError(f"{name} is seconds or a timedelta, got {value!r}.")
    if not 0 < value <= MAX_TTL:
        raise InvalidInputError(f"{name} must be more than 0 and at most {MAX_TTL:.0f} seconds, got {value!r}.")
    return float(value)


def moment(name: str, value: Any) -> float:
    """``value`` (an aware ``datetime``, seconds since the epoch or ISO 8601 with a zone) as seconds."""
    if isinstance(value, bool) or value is None:
        raise InvalidInputError(f"{name} is an aware datetime, seconds since the epoch or ISO 8601, got {value!r}.")
    if isinstance(value, datetime) and value.tzinfo is None:
        raise InvalidInputError(f"{name} is a naive datetime; give it a timezone (e.g. tzinfo=timezone.utc).")
    return parse_timestamp(value)


def expiry(now: float, *, ttl: Any = None, expires_at: Any = None, default: float | None = None) -> float | None:
    """When memories saved at ``now`` stop being returned: ``expires_at``, else ``now + ttl``, else
    ``now + default`` (the memory's ``ttl``), else None (never)."""
    if ttl is not None and expires_at is not None:
        raise InvalidInputError("pass ttl or expires_at, not both.")
    if expires_at is not None:
        return moment("expires_at", expires_at)
    if ttl is not None:
        return now + seconds("ttl", ttl)
    return None if default is None else now + default


__all__ = ["MAX_TTL", "SETTLED", "expiry", "moment", "seconds"]
