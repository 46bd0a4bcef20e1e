"""Reading sessions and events, whatever shape they arrive in.

The seam: ``read_session(obj)`` accepts an ADK ``Session``, a dict with ADK's field
names, or our own ``Session`` model, and returns a ``SessionView``; ``to_event(raw)``
turns one raw event into our ``Event``. Everything downstream (ledger, policies,
records) sees only these models.

Why two steps: an ADK session can hold thousands of events with media bytes in them.
Saves are incremental, so only events the ledger has not seen are converted; the view
gives every event's id cheaply and converts on demand.

Events without an id (hand-written transcripts) get one derived from their author,
timestamp and content, plus an occurrence counter for identical repeats, so importing
the same transcript twice derives the same ids and writes nothing new.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import to_jsonable_python

from .errors import InvalidInputError
from .records import MAX_TIMESTAMP, MIN_TIMESTAMP, check_unicode, repair_unicode


def _plain(obj: Any) -> Any:
    """A dict/list view of a pydantic object (ADK's included), bytes left as bytes."""
    if obj is None or isinstance(obj, (dict, list, str, int, float, bool)):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    if hasattr(obj, "__dict__"):
        return {k: v for k, v in vars(obj).items() if v is not None and not k.startswith("_")}
    return obj


def _in_range(seconds: float, shown: str) -> float:
    if not MIN_TIMESTAMP <= seconds <= MAX_TIMESTAMP:  # also False for NaN
        raise InvalidInputError(
            f"timestamp {shown} is not a time: give seconds (or milliseconds) since the epoch "
            "within the years 1 to 9999, or an ISO 8601 string."
        )
    return seconds


def _timestamp(value: Any) -> float:
    if value is None or value == "":
        return 0.0
    if isinstance(value, bool):
        raise InvalidInputError("timestamp must be a number or an ISO 8601 string, not a boolean.")
    if isinstance(value, (int, float)):
        seconds = float(value) / 1000.0 if value > 1e11 else float(value)  # accept milliseconds
        return _in_range(seconds, repr(value))
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return _in_range(dt.timestamp(), value.isoformat())
    if isinstance(value, str):
        try:
            return _timestamp(float(value))
        except ValueError:
            pass
        try:
            return _timestamp(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            raise InvalidInputError(
                f"timestamp {value!r} is neither a number of seconds nor an ISO 8601 string."
            ) from None
    raise InvalidInputError(f"timestamp must be a number or an ISO 8601 string, got {type(value).__name__}.")


class Part(BaseModel):
    """One part of a message, with ADK's (google.genai) field names. Unknown fields are kept."""

    model_config = ConfigDict(extra="allow")

    text: Optional[str] = None
    thought: Optional[bool] = None
    function_call: Optional[dict[str, Any]] = None
    function_response: Optional[dict[str, Any]] = None
    inline_data: Optional[dict[str, Any]] = None
    file_data: Optional[dict[str, Any]] = None
    executable_code: Optional[dict[str, Any]] = None
    code_execution_result: Optional[dict[str, Any]] = None

    @field_validator("text")
    @classmethod
    def _text(cls, v: Optional[str]) -> Optional[str]:
        return v if v is None else repair_unicode(v)


class Content(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Optional[str] = None
    parts: list[Part] = Field(default_factory=list)

    @field_validator("parts", mode="before")
    @classmethod
    def _parts(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, (str, dict)):
            v = [v]
        return [{"text": p} if isinstance(p, str) else _plain(p) for p in v]


class Event(BaseModel):
    """One event of a session, with ADK's field names."""

    model_config = ConfigDict(extra="allow")

    id: str = ""
    author: str = ""
    timestamp: float = 0.0
    content: Optional[Content] = None
    partial: Optional[bool] = None
    error_code: Optional[str] = None
    error_message: Optional[str] = None
    input_transcription: Optional[dict[str, Any]] = None
    output_transcription: Optional[dict[str, Any]] = None
    custom_metadata: Optional[dict[str, Any]] = None

    @field_validator("timestamp", mode="before")
    @classmethod
    def _ts(cls, v: Any) -> float:
        return _timestamp(v)

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, v: Any) -> Any:
        if isinstance(v, str):
            return {"parts": [{"text": v}]}
        return _plain(v)

    @field_validator("id", mode="before")
    @classmethod
    def _str(cls, v: Any) -> Any:
        return "" if v is None else str(v)  # ids with lone surrogates are refused by event_ids

    @field_validator("author", mode="before")
    @classmethod
    def _author(cls, v: Any) -> Any:
        return "" if v is None else repair_unicode(str(v))

    @field_validator("error_code", mode="before")
    @classmethod
    def _code(cls, v: Any) -> Any:
        return None if v is None else str(v)


class Session(BaseModel):
    """A conversation: the events of one user with one app."""

    model_config = ConfigDict(extra="allow")

    id: str
    app_name: str
    user_id: str
    events: list[Event] = Field(default_factory=list)
    last_update_time: float = 0.0


@dataclass
class SessionView:
    """What a save needs from a session: its scope, id and events (raw, with ids)."""

    app_name: str
    user_id: str
    session_id: str
    event_ids: list[str]
    raw_events: list[Any]

    def event(self, i: int) -> Event:
        return to_event(self.raw_events[i], self.event_ids[i])


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _derived_event_id(raw: Any) -> str:
    body = {
        "author": _get(raw, "author"),
        "timestamp": _get(raw, "timestamp"),
        "content": to_jsonable_python(_plain(_get(raw, "content")), fallback=str),
    }
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    return "derived-" + hashlib.sha256(text.encode()).hexdigest()[:24]


def event_ids(raw_events: list[Any]) -> list[str]:
    """Each event's id; derived (stable across re-imports) where the event has none."""
    ids: list[str] = []
    seen: dict[str, int] = {}
    for raw in raw_events:
        eid = _get(raw, "id")
        if not eid:
            base = _derived_event_id(raw)
            n = seen.get(base, 0)
            seen[base] = n + 1
            eid = base if n == 0 else f"{base}-{n}"
        ids.append(check_unicode("event id", str(eid)))
    return ids


def read_session(obj: Any) -> SessionView:
    """Accept an ADK Session, a dict or our Session; raise InvalidInputError otherwise."""
    if obj is None:
        raise InvalidInputError("session is None; pass an ADK Session, a dict or longterm.Session.")
    fields = {}
    for name in ("id", "app_name", "user_id"):
        value = _get(obj, name)
        if not isinstance(value, str) or not value.strip():
            raise InvalidInputError(
                f"session.{name} must be a non-empty string (got {value!r}); "
                "a session needs id, app_name and user_id."
            )
        fields[name] = check_unicode(f"session.{name}", value)
    raw_events = _get(obj, "events") or []
    if not isinstance(raw_events, (list, tuple)):
        raise InvalidInputError("session.events must be a list of events.")
    raw_events = [e for e in raw_events if not _get(e, "partial")]
    return SessionView(
        app_name=fields["app_name"],
        user_id=fields["user_id"],
        session_id=fields["id"],
        event_ids=event_ids(raw_events),
        raw_events=raw_events,
    )


def to_event(raw: Any, event_id: str | None = None) -> Event:
    """Convert one raw event (ADK Event, dict, our Event) into our Event."""
    try:
        if isinstance(raw, Event):
            ev = raw
        else:
            ev = Event.model_validate(_plain(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        which = f"event {event_id!r}" if event_id else "event"
        raise InvalidInputError(f"{which} is malformed at '{where}': {first['msg']}") from None
    if event_id and ev.id != event_id:
        ev = ev.model_copy(update={"id": event_id})
    return ev
