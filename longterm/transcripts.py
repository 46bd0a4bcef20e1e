"""Reading files for ``longterm import``: JSON, JSONL, ADK session dumps, ``longterm export`` files.

The seam: ``load_file(path, app_name=, user_id=)`` returns what one file holds: sessions
that ``read_session`` accepts (to save), or the records of an export (to restore with
``LongTermMemory.upsert_records``); ``load_sessions`` yields the sessions of a
conversation file. Accepted shapes, detected per file; a file holds one kind of item:

| shape                                              | becomes                          |
|----------------------------------------------------|----------------------------------|
| an ADK session dump ``{"id", "app_name", "user_id", "events": [...]}`` | that session |
| ``{"messages": [...], "id"?, "app_name"?, "user_id"?}``  | one session                 |
| a JSON list (or JSONL lines) of sessions            | each session                     |
| a JSON list (or JSONL lines) of messages            | a session per ``session_id``     |
| JSONL lines (or a JSON list) of records, as ``longterm export`` writes them | those records, as they are |

A message is ``{"role": "user"|"assistant"|..., "content": ...}`` (OpenAI style) or an ADK
event ``{"author", "content": {"role", "parts"}}``. Its content is text, a list of parts
(text or objects such as ``{"text": ...}``), one part object, or ADK content (an object
with ``parts``); ``timestamp``, ``time`` or ``created_at`` give its time. Messages are
grouped into sessions by their ``session_id``, ``conversation_id`` or ``thread_id`` (and
``app_name``/``user_id`` where they carry them), in file order; messages naming no session
form one named after the file. ``app_name``/``user_id`` missing from a file come from the
command line, so one transcript can be imported for any user. Ids (session, app, user,
message) are strings; integers are read as their digits; an empty one is no id.

A record is an object with exactly a memory record's fields (at least ``id``,
``app_name``, ``user_id``, ``session_id`` and ``event_id``): every line ``longterm export``
writes. It is restored as it is (same id, text, time and metadata), never read as a new
event, so a backup restored into the store it came from duplicates nothing. Its id must be
the one its app, user, session and event give (``MemoryRecord.own_id``): a record edited to
move it to another user is refused, as is an ``app_name``/``user_id`` given for the file
that is not the record's.

Anything else (a list where an object belongs, a message that is a bare string, an id that
is an object) is an ``InvalidInputError`` naming the file, the line or item, the field and
what was expected, raised before anything is written.

Why ids and times are filled in here: an event without a time gets the import time, one
millisecond apart in file order so the conversation keeps its order (not 1970-01-01). Its
id is derived first, from the event as written, so importing the file again derives the
same ids and writes nothing new although the import time has moved on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import InvalidInputError, raise_ours_from
from .records import MemoryRecord
from .sessions import FLAG, read_session, to_event
from .shapes import PART_FIELDS
from .shapes import as_parts as typed_parts

#: Fields of a message that name its session, first found wins.
SESSION_KEYS = ("session_id", "conversation_id", "thread_id")
#: Fields of a message that give its time, first found wins.
TIME_KEYS = ("timestamp", "time", "created_at")
#: Fields every record of ``longterm export`` has; with no field a record lacks, an object is a record.
RECORD_KEYS = frozenset({"id", "app_name", "user_id", "session_id", "event_id"})
RECORD_FIELDS = frozenset(MemoryRecord.model_fields)

_KINDS = {
    "record": "a memory record (as `longterm export` writes them)",
    "session": "a session (an object with 'events' or 'messages')",
    "message": "a message (an object with 'role' and 'content', or an ADK event)",
}


@dataclass
class Loaded:
    """What one file holds: sessions to save, or (an export) records to restore as they are."""

    sessions: list[dict[str, Any]] = field(default_factory=list)
    records: list[MemoryRecord] = field(default_factory=list)


def _json_type(value: Any) -> str:
    """``value``'s JSON type, with an article: how an error names what the file holds."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _id(value: Any, name: str, at: str) -> str | None:
    """An id field as written: ``None`` when absent or blank, integers as their digits."""
    if _blank(value):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InvalidInputError(f"{at}: '{name}' must be a string (or an integer), not {_json_type(value)}.")


def _str_field(value: Any, name: str, at: str, example: str) -> None:
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"{at}: '{name}' must be a string such as {example}, not {_json_type(value)}.")


def _check_event(ev: dict[str, Any], at: str) -> dict[str, Any]:
    """An ADK event as written, its fields checked; ``partial`` read as ADK reads it."""
    _str_field(ev.get("author"), "author", at, '"user"')
    if ev.get("id") is not None:
        _id(ev["id"], "id", at)
    if ev.get("partial") is not None and not isinstance(ev["partial"], bool):
        try:  # "false" is false (pydantic's reading, ADK's too), not a truthy string that drops the event
            ev["partial"] = FLAG.validate_python(ev["partial"])
        except ValidationError:
            raise InvalidInputError(
                f"{at}: 'partial' must be true or false, not {_json_type(ev['partial'])}."
            ) from None
    return ev


#: A message holds at least one of these; an object with none says nothing to remember.
MESSAGE_BODY = ("content", "text", "parts", "tool_calls")


def _message_to_event(msg: dict[str, Any], at: str) -> dict[str, Any]:
    """A message of a file as the ADK event its id is derived from.

    Not ``shapes.as_event``, though both read OpenAI-style messages: the ids of every file
    imported so far are derived from this form, and the gate's differs (it lowercases the
    role, reads typed and bare-string parts, tool calls and tool results, and neither
    ``text``, ``speaker`` nor ``time``), so reading files through it would import them again
    under new ids."""
    if "author" in msg and isinstance(msg.get("content"), (dict, type(None))):
        return _check_event(msg, at)  # already an ADK event
    if not any(k in msg for k in MESSAGE_BODY):
        keys = ", ".join(sorted(map(str, msg))) or "none"
        raise InvalidInputError(
            f"{at}: an object with none of the fields of a message (its fields: {keys}); expected a message "
            '({"role": "user", "content": "..."}), a session (with "events" or "messages") or a record '
            "written by `longterm export`."
        )
    role = msg.get("role") or msg.get("speaker") or "user"
    _str_field(role, "role" if msg.get("role") else "speaker", at, '"user" or "assistant"')
    _str_field(msg.get("name") or None, "name", at, '"alice"')
    content = msg.get("content", msg.get("text", ""))
    event_content: dict[str, Any]
    if isinstance(content, dict) and "parts" in content:
        event_content = {"role": role, **content}  # ADK content: {"role"?, "parts": [...]}
    else:
        if isinstance(content, list):
            for k, part in enumerate(content, start=1):
                if not isinstance(part, (str, dict)):
                    raise InvalidInputError(
                        f"{at}: content part {k} is {_json_type(part)}; expected text or a part object "
                        'such as {"text": "..."}.'
                    )
        elif content is not None and not isinstance(content, (str, dict)):
            raise InvalidInputError(
                f"{at}: 'content' must be text, a list of parts or an object, not {_json_type(content)}."
            )
        if isinstance(content, list) and any(isinstance(p, dict) and PART_FIELDS.isdisjoint(p) for p in content):
            content = typed_parts(content, at)  # OpenAI's image_url, input_audio, file ... parts
        # As before: a part object stays the parts value (read as one part), so ids derived from it hold.
        event_content = {"role": role, "parts": [{"text": content}] if isinstance(content, str) else content}
    ev: dict[str, Any] = {"author": msg.get("name") or role, "content": event_content}
    if msg.get("id"):
        mid = _id(msg["id"], "id", at)
        if mid is not None:
            ev["id"] = mid
    for key in TIME_KEYS:
        if msg.get(key) is not None:
            ev["timestamp"] = msg[key]
            break
    return ev


def _kind(item: Any, at: str) -> str:
    if not isinstance(item, dict):
        raise InvalidInputError(
            f'{at}: {_json_type(item)}; expected an object: a message ({{"role": ..., "content": ...}}), '
            "a session (with 'events' or 'messages') or a record written by `longterm export`."
        )
    if RECORD_KEYS <= item.keys() <= RECORD_FIELDS:
        return "record"
    if "events" in item or "messages" in item:
        return "session"
    return "message"


def _items_of(obj: dict[str, Any], key: str, at: str) -> list[dict[str, Any]]:
    """The session's ``events`` or ``messages``, each an object."""
    items = obj.get(key)
    if items is None:
        return []
    what = "events (ADK event objects)" if key == "events" else "messages (objects with 'role' and 'content')"
    if not isinstance(items, list):
        raise InvalidInputError(f"{at}: '{key}' must be a list of {what}, not {_json_type(items)}.")
    for j, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            example = (
                '{"role": "user", "content": "..."}' if key == "messages" else '{"author": "user", "content": ...}'
            )
            why = " (a bare string does not say who said it)" if isinstance(item, str) else ""
            raise InvalidInputError(
                f"{at}: {key[:-1]} {j} is {_json_type(item)}; each must be an object such as {example}{why}."
            )
    return items


def _scope(
    obj: dict[str, Any], default_id: str, app_name: str | None, user_id: str | None, at: str, path: Path
) -> dict[str, Any]:
    """The id, app and user of a session: as ``obj`` names them, else the defaults."""
    sid = _id(obj.get("id"), "id", at) or default_id
    app = _id(obj.get("app_name"), "app_name", at) or app_name
    user = _id(obj.get("user_id"), "user_id", at) or user_id
    if not app or not user:
        raise InvalidInputError(
            f"{path}: session {sid!r} names no {'app_name' if not app else 'user_id'}; pass --app and --user."
        )
    return {"id": sid, "app_name": app, "user_id": user}


def _session(
    obj: dict[str, Any], default_id: str, app_name: str | None, user_id: str | None, at: str, path: Path
) -> tuple[dict[str, Any], list[tuple[dict[str, Any], str]]]:
    """The session ``obj`` is, and its events with where each was read."""
    if "events" in obj:
        raw = _items_of(obj, "events", at)
        events = [(_check_event(ev, f"{at}: event {j}"), f"{at}: event {j}") for j, ev in enumerate(raw, start=1)]
    else:
        raw = _items_of(obj, "messages", at)
        events = [
            (_message_to_event(m, f"{at}: message {j}"), f"{at}: message {j}") for j, m in enumerate(raw, start=1)
        ]
    session = _scope(obj, default_id, app_name, user_id, at, path)
    session["events"] = [ev for ev, _ in events]
    return session, events


def _conversations(
    messages: list[tuple[dict[str, Any], str]], path: Path, app_name: str | None, user_id: str | None
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """The messages as sessions: grouped by the session (and app and user) each message
    names, in file order; and their events with where each was read."""
    groups: dict[tuple[str, str | None, str | None], list[dict[str, Any]]] = {}
    file_order = []
    for msg, at in messages:
        ev = _message_to_event(msg, at)
        file_order.append((ev, at))
        sid = next((s for k in SESSION_KEYS if (s := _id(msg.get(k), k, at)) is not None), path.stem)
        key = (sid, _id(msg.get("app_name"), "app_name", at), _id(msg.get("user_id"), "user_id", at))
        groups.setdefault(key, []).append(ev)
    sessions = []
    for (sid, app, user), evs in groups.items():
        session = _scope({"id": sid, "app_name": app, "user_id": user}, path.stem, app_name, user_id, str(path), path)
        sessions.append(session | {"events": evs})
    return sessions, file_order


def _fill_ids_and_times(path: Path, sessions: list[dict[str, Any]], file_order: list[tuple[Any, str]]) -> None:
    """Derive missing ids (from the events as written), then stamp timeless events with
    the import time, one millisecond apart in file order (see the module docstring); then
    check every event as a save reads it, so bad input fails here, naming where it is."""
    for s in sessions:
        s["events"] = [e for e in s["events"] if not e.get("partial")]
        try:
            ids = read_session(s).event_ids
        except InvalidInputError as exc:
            shown = s["id"] if len(s["id"]) <= 60 else s["id"][:60] + "..."
            raise InvalidInputError(f"{path}: session {shown!r}: {exc}") from None
        for ev, eid in zip(s["events"], ids, strict=True):
            ev["id"] = eid
    now = time.time()
    for n, (ev, _) in enumerate(file_order):
        if _blank(ev.get("timestamp")):
            ev["timestamp"] = now + n / 1000
    for ev, at in file_order:
        if not ev.get("partial"):
            try:
                to_event(ev)
            except InvalidInputError as exc:
                raise InvalidInputError(f"{at}: {str(exc).replace('Value error, ', '')}") from None


def _record(item: dict[str, Any], at: str, app_name: str | None, user_id: str | None) -> MemoryRecord:
    try:
        rec = MemoryRecord.model_validate(item)
    except ValidationError as exc:
        raise_ours_from(exc)
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInputError(
            f"{at}: a memory record (the shape `longterm export` writes) malformed at '{where}': {first['msg']}."
        ) from None
    if rec.id != rec.own_id():
        raise InvalidInputError(
            f"{at}: record id {rec.id!r} is not the id of a memory of its app, user, session and event "
            f"({rec.own_id()!r}): the record was changed after `longterm export` wrote it, and a memory cannot be "
            "moved to another user or session by editing it; import the file as it was exported."
        )
    for given, have, name in ((app_name, rec.app_name, "app_name"), (user_id, rec.user_id, "user_id")):
        if given is not None and given != have:
            raise InvalidInputError(
                f"{at}: an exported memory record of app {rec.app_name!r} and user {rec.user_id!r}, but {name} "
                f"{given!r} was given (--app/--user): a record is restored where it belongs, never moved; "
                "drop --app and --user to restore it as exported."
            )
    return rec


def _parse(path: Path) -> list[tuple[Any, str]]:
    """The file's items, each with where it was read (``file:line`` for JSON Lines)."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is not text
    except FileNotFoundError:
        raise InvalidInputError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from None
    try:
        doc = json.loads(text)
        if isinstance(doc, list):
            return [(item, f"{path}: item {i}") for i, item in enumerate(doc, start=1)]
        lines = [n for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        return [(doc, f"{path}:{lines[0]}" if len(lines) == 1 else str(path))]  # one JSONL line: say which
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise InvalidInputError(f"{path}: JSON nested too deeply to read; flatten the file.") from None
    items = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append((json.loads(line), f"{path}:{n}"))
        except RecursionError:
            raise InvalidInputError(f"{path}:{n}: JSON nested too deeply to read; flatten the line.") from None
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path}:{n}: not JSON ({exc.msg}); expected JSON or JSON Lines.") from None
    return items


def load_file(path: str | Path, *, app_name: str | None = None, user_id: str | None = None) -> Loaded:
    """What the file at ``path`` holds: its sessions, or (a file ``longterm export`` wrote) its
    records; ``app_name``/``user_id`` for sessions that name none. Raises ``InvalidInputError``
    naming the file, the line or item and the field for anything of another shape."""
    path = Path(path)
    items = _parse(path)  # parsed here, so ours to fill in
    kinds = [_kind(item, at) for item, at in items]
    for (_, at), kind in zip(items, kinds, strict=True):
        if kind != kinds[0]:
            raise InvalidInputError(
                f"{at}: {_KINDS[kind]}, but {items[0][1]} is {_KINDS[kinds[0]]}; a file holds sessions, "
                "messages or exported records, not a mix: split it into one file per kind."
            )
    if kinds and kinds[0] == "record":
        return Loaded(records=[_record(item, at, app_name, user_id) for item, at in items])
    if kinds and kinds[0] == "session":
        sessions, file_order = [], []
        for n, (item, at) in enumerate(items):
            name = f"{path.stem}-{n}" if len(items) > 1 else path.stem
            session, events = _session(item, name, app_name, user_id, at, path)
            sessions.append(session)
            file_order += events
    else:
        sessions, file_order = _conversations(items, path, app_name, user_id)
    _fill_ids_and_times(path, sessions, file_order)
    return Loaded(sessions=sessions)


def load_sessions(
    path: str | Path, *, app_name: str | None = None, user_id: str | None = None
) -> Iterator[dict[str, Any]]:
    """The sessions of a conversation file (see the module docstring); a file of exported
    records is refused (restore it with ``load_file(path).records`` and ``upsert_records``)."""
    loaded = load_file(path, app_name=app_name, user_id=user_id)
    if loaded.records:
        raise InvalidInputError(
            f"{path} holds memory records written by `longterm export`, not conversations: restore them as they "
            "are with LongTermMemory.upsert_records(load_file(path).records) or `longterm import` (read as "
            "events, each memory would be saved again under a new id)."
        )
    yield from loaded.sessions
