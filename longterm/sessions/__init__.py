"""Reading sessions and events, whatever shape they arrive in.

The seam: ``read_session(obj)`` accepts an ADK ``Session``, a dict with ADK's field
names, or our own ``Session`` model, and returns a ``SessionView``; ``to_event(raw)``
turns one raw event into our ``Event``. Everything downstream (ledger, policies,
records) sees only these models.

Why two steps: an ADK session can hold thousands of events with media bytes in them.
Saves are incremental, so only events the ledger has not seen are converted; the view
gives every event's id cheaply and converts on demand.

Events without an id (hand-written transcripts) get one derived from their author,
timestamp and content (as repaired, i.e. as stored), plus an occurrence counter for
identical repeats, so importing the same transcript twice derives the same ids and
writes nothing new. An explicit id repeated in one session names one event when the events
are identical, and otherwise the later ones get ids of their own (``event_ids``): one id,
one record, so no event silently overwrites another.

This is the one input gate: session and event ids are checked (``check_id``), text is
repaired (``repair_unicode``), tool calls and responses are bounded in depth (``bound_depth``,
so every engine can read the record back), an event's metadata is JSON every engine keeps as
given (``metadata``), and times are read by ``parse_timestamp`` (``timestamps``: one ISO 8601
reader, the same on every Python).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic_core import to_jsonable_python

from ..errors import InvalidInputError, LongTermMemoryError
from ..records import (
    MAX_ID_CHARS,
    bound_depth,
    check_id,
    name_id,
    repair_tree,
    repair_unicode,
    tree_text,
)
from ..shapes import as_event, plain, session_events
from .metadata import metadata_problem
from .timestamps import parse_timestamp


class Part(BaseModel):
    """One part of a message, with ADK's (google.genai) field names. Unknown fields are kept."""

    model_config = ConfigDict(extra="allow", defer_build=True)  # validated inside Event's validator

    text: str | None = None
    thought: bool | None = None
    function_call: dict[str, Any] | None = None
    function_response: dict[str, Any] | None = None
    inline_data: dict[str, Any] | None = None
    file_data: dict[str, Any] | None = None
    executable_code: dict[str, Any] | None = None
    code_execution_result: dict[str, Any] | None = None

    @field_validator("text")
    @classmethod
    def _text(cls, v: str | None) -> str | None:
        return v if v is None else repair_unicode(v)

    @field_validator(
        "function_call", "function_response", "inline_data", "file_data", "executable_code", "code_execution_result"
    )
    @classmethod
    def _bounded(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        # Tool arguments and responses nest as deep as a caller sends them; what is kept is
        # bounded here, before classification serializes it (see records.bound_depth). Other
        # fields a part may hold are bounded where the part is stored (classify._part_dict).
        return v if v is None else bound_depth(v)


class Content(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str | None = None
    parts: list[Part] = Field(default_factory=list)

    @field_validator("parts", mode="before")
    @classmethod
    def _parts(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, (str, dict)):
            v = [v]
        return [{"text": p} if isinstance(p, str) else plain(p) for p in v]


class Event(BaseModel):
    """One event of a session, with ADK's field names."""

    model_config = ConfigDict(extra="allow")

    id: str = ""
    author: str = ""
    timestamp: float = 0.0
    content: Content | None = None
    partial: bool | None = None
    error_code: str | None = None
    error_message: str | None = None
    input_transcription: dict[str, Any] | None = None
    output_transcription: dict[str, Any] | None = None
    custom_metadata: dict[str, Any] | None = None

    @field_validator("timestamp", mode="before")
    @classmethod
    def _ts(cls, v: Any) -> float:
        return parse_timestamp(v)

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, v: Any) -> Any:
        if isinstance(v, str):
            return {"parts": [{"text": v}]}
        return plain(v)

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

    model_config = ConfigDict(extra="allow", defer_build=True)  # a caller's own; saves read sessions unvalidated

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
    refused: list[Refused] = field(default_factory=list)
    """Events left out because they are in no known shape (lenient reads only)."""

    def event(self, i: int) -> Event:
        return to_event(self.raw_events[i], self.event_ids[i])


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _event_digest(raw: Any) -> str:
    """A hash of an event's author, timestamp and content: derived ids, duplicate checks."""
    # Hashed as repaired (lone surrogates -> U+FFFD), which is how the content is stored;
    # for valid text that is the raw event, so ids derived before repair existed still match.
    # Media bytes are hashed as base64: they need not be UTF-8.
    author, timestamp, content = _get(raw, "author"), _get(raw, "timestamp"), plain(_get(raw, "content"))
    try:
        content = to_jsonable_python(content, fallback=str, bytes_mode="base64")
        body = repair_tree({"author": author, "timestamp": timestamp, "content": content})
        text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        # Nested too deep for the serializer (~255 levels): such events raised before, so no
        # stored id depends on this form; it is deterministic and never raises.
        text = repair_unicode(tree_text({"author": author, "timestamp": timestamp, "content": content}))
    return hashlib.sha256(text.encode()).hexdigest()


#: How an id the library derived begins (an event given without one: ``event_ids``).
DERIVED = "derived-"


def _derived_event_id(raw: Any) -> str:
    return DERIVED + _event_digest(raw)[:24]


def is_derived(event_id: str) -> bool:
    """Whether ``event_id`` was derived from the event's author, time and content (``event_ids``):
    unique within its session only ("thanks" said in two sessions has one derived id)."""
    return event_id.startswith(DERIVED)


def _other_event_id(eid: str, digest: str) -> str:
    """The id of an event that reuses ``eid`` with other content: ``eid#`` and a digest of its
    content, so it does not depend on what else the session holds or will hold."""
    suffix = "#" + digest[:16]
    return eid[: MAX_ID_CHARS - len(suffix)] + suffix


def event_ids(raw_events: list[Any]) -> list[str]:
    """Each event's id, checked; derived (stable across re-imports) where the event has none.

    An explicit id that comes again in the same session: an identical event (same author,
    timestamp and content) is the same event and gets the same id (``plan_save`` counts it
    once); of different ones, the earliest (by time, then content) keeps the id and the others
    are kept under ``_other_event_id``, so no event overwrites another and no order the session
    lists them in gives an event another id. Sessions without repeated ids keep their ids.
    """
    ids: list[str] = []
    seen: dict[str, int] = {}
    digests: dict[int, str] = {}  # index -> content digest, for events whose explicit id comes again
    owner: dict[str, tuple[float, str]] = {}  # repeated explicit id -> (time, digest) of the event keeping it
    given = [_get(raw, "id") for raw in raw_events]
    given = ["" if eid is None else str(eid) for eid in given]
    counts = Counter(eid for eid in given if eid.strip())
    for i, (raw, eid) in enumerate(zip(raw_events, given, strict=True)):
        try:
            if not eid.strip():
                base = _derived_event_id(raw)
                n = seen.get(base, 0)
                seen[base] = n + 1
                given[i] = base if n == 0 else f"{base}-{n}"
            elif counts[eid] > 1:
                digests[i] = digest = _event_digest(raw)
                key = (parse_timestamp(_get(raw, "timestamp")), digest)
                owner[eid] = min(owner.get(eid, key), key)
        except LongTermMemoryError:
            raise
        except Exception as exc:
            which = f"event {eid!r}" if eid.strip() else f"event #{i}"
            raise InvalidInputError(f"{which} of the session cannot be read ({type(exc).__name__}: {exc}).") from exc
    for i, eid in enumerate(given):
        if i in digests and digests[i] != owner[eid][1]:
            eid = _other_event_id(eid, digests[i])
        ids.append(check_id("event id", eid))
    return ids


#: A flag as ADK's pydantic models read it: the strings "false", "0", "no", "off" are false.
FLAG: TypeAdapter[bool] = TypeAdapter(bool)


def _partial(value: Any) -> bool:
    """``partial`` as ADK reads it (``FLAG``); a string that is no flag is not partial."""
    if isinstance(value, str):
        try:
            return FLAG.validate_python(value.strip())
        except ValidationError:
            return False
    return bool(value)


@dataclass
class Refused:
    """An event of a session in no shape the gate reads (``read_session(..., lenient=True)``)."""

    index: int
    event_id: str
    reason: str


def read_events(
    raw_events: Sequence[Any], where: str = "events", *, lenient: bool = False
) -> tuple[list[Any], list[Refused]]:
    """Every event or message of ``raw_events`` as an ADK-shaped event (``shapes.as_event``),
    partial (streaming) events left out. An event in no known shape raises, or with
    ``lenient`` is left out and listed: never saved as nothing and marked handled."""
    events: list[Any] = []
    refused: list[Refused] = []
    for i, raw in enumerate(raw_events):
        try:
            event = _readable(raw, i, where)
        except InvalidInputError as exc:
            if not lenient:
                raise
            eid = _get(raw, "id")
            refused.append(Refused(i, "" if eid is None else str(eid), str(exc)))
            continue
        if not _partial(_get(event, "partial")):
            events.append(event)
    return events, refused


def _readable(raw: Any, i: int, where: str) -> Any:
    """``shapes.as_event`` of the ``i``-th event; anything else it raises is our error, naming it.
    Its metadata must be JSON every engine keeps as given (``metadata.metadata_problem``)."""
    try:
        event = as_event(raw, f"{where}[{i}]")
    except LongTermMemoryError:
        raise
    except Exception as exc:  # an object whose dump fails, say: name the event, not the library
        raise InvalidInputError(f"{_which(raw, i)} cannot be read ({type(exc).__name__}: {exc}).") from exc
    if problem := metadata_problem(_get(event, "custom_metadata")):
        raise InvalidInputError(f"{_which(raw, i)}: {problem}")
    return event


def _which(raw: Any, i: int) -> str:
    eid = _get(raw, "id")
    return f"event {str(eid)!r}" if eid else f"event #{i} of the session"


def read_session(obj: Any, *, lenient: bool = False) -> SessionView:
    """Accept an ADK Session, a dict or our Session; raise InvalidInputError otherwise.

    Its events are ``events`` (or ``messages``), each in any shape ``shapes`` reads; with
    ``lenient`` an event in no known shape is left out of the view (``view.refused``)."""
    if obj is None:
        raise InvalidInputError("session is None; pass an ADK Session, a dict or longterm.Session.")
    fields = {}
    for name in ("id", "app_name", "user_id"):
        value = _get(obj, name)
        if not isinstance(value, str) or not value.strip():
            raise InvalidInputError(
                f"session.{name} must be a non-empty string (got {value!r}); a session needs id, app_name and user_id."
            )
        fields[name] = name_id(f"session.{name}", value)  # NFC: one person, whatever form was typed
    raw_events = session_events(obj) or []
    if not isinstance(raw_events, (list, tuple)):
        raise InvalidInputError("session.events must be a list of events.")
    events, refused = read_events(raw_events, "session.events", lenient=lenient)
    return SessionView(
        app_name=fields["app_name"],
        user_id=fields["user_id"],
        session_id=fields["id"],
        event_ids=event_ids(events),
        raw_events=events,
        refused=refused,
    )


def to_event(raw: Any, event_id: str | None = None) -> Event:
    """Convert one raw event (ADK Event, dict, our Event) into our Event."""
    which = f"event {event_id!r}" if event_id else "event"
    try:
        if isinstance(raw, Event):
            ev = raw
        else:
            ev = Event.model_validate(plain(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInputError(f"{which} is malformed at '{where}': {first['msg']}") from None
    except LongTermMemoryError:
        raise
    except Exception as exc:  # an object whose dump fails, say: name the event, not the library
        raise InvalidInputError(f"{which} cannot be read ({type(exc).__name__}: {exc}).") from exc
    if event_id and ev.id != event_id:
        ev = ev.model_copy(update={"id": event_id})
    return ev


__all__ = [
    "DERIVED",
    "FLAG",
    "Content",
    "Event",
    "Part",
    "Refused",
    "Session",
    "SessionView",
    "event_ids",
    "is_derived",
    "parse_timestamp",
    "read_events",
    "read_session",
    "to_event",
]
