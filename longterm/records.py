"""The data model every part of longterm shares: ``Scope``, ``MemoryRecord``, ``Hit``, ``Memory``,
``SaveResult``.

The seam: policies produce records, backends store and return them, the facade turns
hits into ADK ``MemoryEntry`` objects (or the simple API's ``Memory``) and saves into
``SaveResult``s. Nothing else crosses module boundaries.

Why the id is derived and not assigned: ``record_id(app, user, session, event)`` is
the upsert key on every backend. A replayed save, a restarted process or two workers
saving the same session compute the same ids, so they overwrite instead of duplicating.
The inputs are length-prefixed before hashing, so no choice of separator characters in
the ids can make two different tuples collide.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import InvalidInputError
from .trees import (
    MAX_DEPTH,
    MAX_TREE_TEXT,
    RECORD_DEPTH,
    bound,
    bound_depth,
    check_unicode,
    is_valid_unicode,
    plain_tree,
    repair_tree,
    repair_unicode,
    too_deep,
    tree_text,
)

#: Longest app name / user id / session id / event id accepted (characters).
MAX_ID_CHARS = 512
#: Timestamps a record may carry (seconds since the epoch): the years 1 to 9999 that every
#: engine and ``datetime`` can represent. NaN and infinities are refused: an engine cannot
#: index them, so such a memory would be saved and never found.
MIN_TIMESTAMP = datetime(1, 1, 2, tzinfo=timezone.utc).timestamp()
MAX_TIMESTAMP = datetime(9999, 12, 30, tzinfo=timezone.utc).timestamp()


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


def name_id(kind: str, value: Any) -> str:
    """An app, user or session id checked (``check_id``) in NFC, the one form names compare in
    ("José" precomposed or not is one person; case and compatibility forms stay apart). The
    length limit holds in NFC too: a few characters compose into many."""
    named = unicodedata.normalize("NFC", check_id(kind, value))
    if len(named) > MAX_ID_CHARS:
        raise InvalidInputError(f"{kind} is {len(named)} characters long in NFC; the limit is {MAX_ID_CHARS}.")
    return named


class Scope(BaseModel):
    """Who a memory belongs to: one user of one app. Every read and write is scoped."""

    model_config = ConfigDict(frozen=True)

    app_name: str
    user_id: str

    @field_validator("app_name")
    @classmethod
    def _app(cls, v: Any) -> str:
        return name_id("app_name", v)

    @field_validator("user_id")
    @classmethod
    def _user(cls, v: Any) -> str:
        return name_id("user_id", v)

    @classmethod
    def stored(cls, app_name: str, user_id: str) -> Scope:
        """The scope of ids exactly as a store holds them, not put in NFC: a store of an earlier
        release may hold ids in another form, reached (moved, erased, written) only so."""
        return cls.model_construct(app_name=app_name, user_id=user_id)


def record_id(app_name: str, user_id: str, session_id: str, event_id: str) -> str:
    """The deterministic id of the memory made from one event (see module docstring)."""
    # Length-prefixed fields: unambiguous whatever characters the ids contain.
    # One f-string, not a join over a generator: the same bytes, a few us less a record saved.
    a, u, s, e = app_name, user_id, session_id, event_id
    payload = f"{len(a)}:{a}{len(u)}:{u}{len(s)}:{s}{len(e)}:{e}"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


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
    expires_at: float | None = Field(default=None, ge=MIN_TIMESTAMP, le=MAX_TIMESTAMP, allow_inf_nan=False)
    """Seconds since the epoch from which it is never returned (None: it does not expire)."""
    updated_at: float | None = Field(default=None, ge=MIN_TIMESTAMP, le=MAX_TIMESTAMP, allow_inf_nan=False)
    """When its owner last corrected it (``update``; None: never)."""

    @model_validator(mode="after")
    def _content_from_text(self) -> MemoryRecord:
        # Stores may leave out content that is just the text (see text_only_content).
        if not self.content and self.text:
            self.content = {"role": self.role or "user", "parts": [{"text": self.text}]}
        # However a record was made (a save, upsert_records, an old store read back), it
        # nests no deeper than every engine can read back (see bound_depth).
        if too_deep(self.content, RECORD_DEPTH):
            self.content = bound(self.content, RECORD_DEPTH)
        if self.metadata and too_deep(self.metadata, RECORD_DEPTH):
            self.metadata = bound(self.metadata, RECORD_DEPTH)
        return self

    def own_id(self) -> str:
        """The id this record must have: the one derived from where it belongs (see ``record_id``)."""
        return record_id(self.app_name, self.user_id, self.session_id, self.event_id)

    def text_only_content(self) -> bool:
        """True when content is the text as one part: stores may keep the text only."""
        c = self.content
        return len(c) == 2 and c.get("role") == (self.role or "user") and c.get("parts") == [{"text": self.text}]

    def iso_timestamp(self) -> str:
        return datetime.fromtimestamp(self.timestamp, tz=timezone.utc).isoformat()


def parse_record(doc: str | bytes) -> MemoryRecord:
    """A record from the JSON an engine stored; the readers of redis, qdrant and mem0 use it.

    Fast path: pydantic's JSON parser. It stops at 200 levels of nesting, which records written
    before ``bound_depth`` existed can exceed (the serializer allows ~255); those are read with
    the standard library's parser (~1000 levels) and bounded, so such a user's memories can
    still be searched, listed and erased.
    """
    try:
        return MemoryRecord.model_validate_json(doc)
    except ValidationError as exc:
        if not any(e["type"] == "json_invalid" for e in exc.errors()):
            raise
        try:
            data = json.loads(doc)
        except (ValueError, RecursionError):
            raise exc from None
        return MemoryRecord.model_validate(data)


class Hit(BaseModel):
    """A search result: the record, its score (higher is better) and how it was found."""

    record: MemoryRecord
    score: float
    arms: dict[str, float] = Field(default_factory=dict)
    """Per-arm scores or ranks (e.g. ``{"fulltext": 3.2}``), for explanation and fusion."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Backend notes, e.g. that an arm was unavailable and the answer is degraded."""
    context: list[MemoryRecord] = Field(default_factory=list)
    """The hit's neighbouring turns of its session, in order, when a search asked for them."""


class Memory(BaseModel):
    """One memory as the simple API returns it (``search``, ``get``, ``get_all``): typed, flat.

    ``score`` is the core's calibrated score in [0, 1] (``retrieval.calibration``; None outside
    a search), ``raw_score`` the engine's own, ``arms`` what each search arm scored. ``kind`` is
    ``"evidence"`` (what was said) or ``"fact"`` (distilled by the fact layer). ``context``
    holds neighbouring turns of the hit's session when a search asked for them.
    """

    id: str
    text: str
    score: float | None = None
    raw_score: float | None = None
    arms: dict[str, float] = Field(default_factory=dict)
    timestamp: datetime
    session_id: str
    event_id: str
    author: str = ""
    role: str = ""
    kind: Literal["evidence", "fact"] = "evidence"
    metadata: dict[str, Any] = Field(default_factory=dict)
    context: list[Memory] = Field(default_factory=list)
    expires_at: datetime | None = None
    """When it stops being returned (None: it does not expire)."""
    updated_at: datetime | None = None
    """When its owner last corrected it (None: never)."""

    @classmethod
    def of(
        cls, record: MemoryRecord, *, kind: Literal["evidence", "fact"] = "evidence", hit: Hit | None = None
    ) -> Memory:
        """The memory of ``record`` (and of the search hit that found it, when given)."""
        raw = None if hit is None else hit.extra.get("raw_score", hit.score)
        return cls(
            id=record.id,
            text=record.text,
            score=None if hit is None else hit.score,
            raw_score=None if raw is None else float(raw),
            arms={} if hit is None else dict(hit.arms),
            timestamp=datetime.fromtimestamp(record.timestamp, tz=timezone.utc),
            session_id=record.session_id,
            event_id=record.event_id,
            author=record.author,
            role=record.role,
            kind=kind,
            metadata=dict(record.metadata),
            context=[] if hit is None else [cls.of(r) for r in hit.context],
            expires_at=None
            if record.expires_at is None
            else datetime.fromtimestamp(record.expires_at, tz=timezone.utc),
            updated_at=None
            if record.updated_at is None
            else datetime.fromtimestamp(record.updated_at, tz=timezone.utc),
        )


class SaveResult(BaseModel):
    """What one save did. ADK ignores it; scripts and the CLI print it."""

    session_id: str
    new_events: int
    """Events the ledger had not seen before this save."""
    saved: int
    """Records written (new events the policy kept)."""
    memory_ids: list[str] = Field(default_factory=list)
    """The ids of the memories written (``get(id)``, ``delete(id)``)."""
    refused: int = 0
    """Events left out, unmarked, because they are in no known shape (automatic saves only:
    a direct save raises instead); fixed, the same ids save later."""


class MemoryPage(BaseModel):
    """One page of ``get_all``: memories oldest first, and the cursor of the next page (None: last)."""

    memories: list[Memory]
    next_cursor: str | None = None


#: The data model, and the tree helpers it kept before ``trees`` (importable from here still).
__all__ = [
    "Hit",
    "MAX_DEPTH",
    "MAX_ID_CHARS",
    "MAX_TIMESTAMP",
    "MAX_TREE_TEXT",
    "MIN_TIMESTAMP",
    "Memory",
    "MemoryPage",
    "MemoryRecord",
    "RECORD_DEPTH",
    "SaveResult",
    "Scope",
    "bound",
    "bound_depth",
    "check_id",
    "check_unicode",
    "is_valid_unicode",
    "name_id",
    "parse_record",
    "plain_tree",
    "record_id",
    "repair_tree",
    "repair_unicode",
    "too_deep",
    "tree_text",
]
