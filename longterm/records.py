"""The data model every part of longterm shares: ``Scope``, ``MemoryRecord``, ``Hit``.

The seam: policies produce records, backends store and return them, the facade turns
hits into ADK ``MemoryEntry`` objects. Nothing else crosses module boundaries.

Why the id is derived and not assigned: ``record_id(app, user, session, event)`` is
the upsert key on every backend. A replayed save, a restarted process or two workers
saving the same session compute the same ids, so they overwrite instead of duplicating.
The inputs are length-prefixed before hashing, so no choice of separator characters in
the ids can make two different tuples collide.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .errors import InvalidInputError

#: Longest app name / user id / session id / event id accepted (characters).
MAX_ID_CHARS = 512
#: Timestamps a record may carry (seconds since the epoch): the years 1 to 9999 that every
#: engine and ``datetime`` can represent. NaN and infinities are refused: an engine cannot
#: index them, so such a memory would be saved and never found.
MIN_TIMESTAMP = datetime(1, 1, 2, tzinfo=timezone.utc).timestamp()
MAX_TIMESTAMP = datetime(9999, 12, 30, tzinfo=timezone.utc).timestamp()


def is_valid_unicode(value: str) -> bool:
    """False when ``value`` holds a lone surrogate, which no engine can store (no UTF-8)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_unicode(kind: str, value: str) -> str:
    """``value``, or an ``InvalidInputError`` naming ``kind`` when it holds a lone surrogate."""
    if not is_valid_unicode(value):
        raise InvalidInputError(f"{kind} {value!r} is not valid Unicode (it holds a lone UTF-16 surrogate).")
    return value


def repair_unicode(value: str) -> str:
    """``value`` with lone surrogates replaced by U+FFFD, and split pairs joined.

    They come from text cut in the middle of a UTF-16 pair (an emoji sliced by a client in
    JavaScript, say). Ids are refused instead (``_check_id``); text is repaired, because
    refusing it would keep the whole session from ever being saved over one character.
    """
    if is_valid_unicode(value):
        return value
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def repair_tree(value: Any) -> Any:
    """``repair_unicode`` through dicts and lists (keys too): tool arguments, metadata."""
    if isinstance(value, str):
        return repair_unicode(value)
    if isinstance(value, dict):
        return {repair_tree(k): repair_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [repair_tree(v) for v in value]
    return value


def check_id(kind: str, value: Any) -> str:
    """``value`` if it can be an id (app, user, session, event); else an ``InvalidInputError``."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{kind} must be a string, got {type(value).__name__}.")
    if not value.strip():
        raise InvalidInputError(f"{kind} must be a non-empty string.")
    if len(value) > MAX_ID_CHARS:
        raise InvalidInputError(f"{kind} is {len(value)} characters long; the limit is {MAX_ID_CHARS}.")
    if "\x00" in value:
        raise InvalidInputError(f"{kind} must not contain NUL characters.")
    return check_unicode(kind, value)


class Scope(BaseModel):
    """Who a memory belongs to: one user of one app. Every read and write is scoped."""

    model_config = ConfigDict(frozen=True)

    app_name: str
    user_id: str

    @field_validator("app_name")
    @classmethod
    def _app(cls, v: Any) -> str:
        return check_id("app_name", v)

    @field_validator("user_id")
    @classmethod
    def _user(cls, v: Any) -> str:
        return check_id("user_id", v)


def record_id(app_name: str, user_id: str, session_id: str, event_id: str) -> str:
    """The deterministic id of the memory made from one event (see module docstring)."""
    # Length-prefixed fields: unambiguous whatever characters the ids contain.
    payload = "".join(f"{len(f)}:{f}" for f in (app_name, user_id, session_id, event_id))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def content_digest(*fields: Any) -> str:
    """A short hash of a record's stored fields: engines skip rewriting an unchanged record."""
    return hashlib.blake2b(repr(fields).encode("utf-8"), digest_size=12).hexdigest()


class MemoryRecord(BaseModel):
    """One saved memory: the kept parts of one event, with its scope and provenance."""

    id: str
    app_name: str
    user_id: str
    session_id: str
    event_id: str
    author: str = ""
    role: str = ""
    event_types: list[str] = Field(default_factory=list)
    text: str = ""
    """What full-text and vector search see."""
    content: dict[str, Any] = Field(default_factory=dict)
    """The kept parts, ADK-shaped: ``{"role": ..., "parts": [...]}``."""
    timestamp: float = Field(0.0, ge=MIN_TIMESTAMP, le=MAX_TIMESTAMP, allow_inf_nan=False)
    """Seconds since the epoch (UTC) when the event happened."""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _content_from_text(self) -> MemoryRecord:
        # Stores may leave out content that is just the text (see text_only_content).
        if not self.content and self.text:
            self.content = {"role": self.role or "user", "parts": [{"text": self.text}]}
        return self

    def text_only_content(self) -> bool:
        """True when content is the text as one part: stores may keep the text only."""
        c = self.content
        return len(c) == 2 and c.get("role") == (self.role or "user") and c.get("parts") == [{"text": self.text}]

    def iso_timestamp(self) -> str:
        return datetime.fromtimestamp(self.timestamp, tz=timezone.utc).isoformat()


class Hit(BaseModel):
    """A search result: the record, its score (higher is better) and how it was found."""

    record: MemoryRecord
    score: float
    arms: dict[str, float] = Field(default_factory=dict)
    """Per-arm scores or ranks (e.g. ``{"fulltext": 3.2}``), for explanation and fusion."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Backend notes, e.g. that an arm was unavailable and the answer is degraded."""
