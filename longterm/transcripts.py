"""Reading conversation files for ``longterm import``: JSON, JSONL, ADK session dumps.

The seam: ``load_sessions(path, app_name=, user_id=)`` yields session dicts that
``read_session`` accepts. Accepted shapes, detected per file (or per JSONL line):

| shape                                              | becomes                          |
|----------------------------------------------------|----------------------------------|
| an ADK session dump ``{"id", "app_name", "user_id", "events": [...]}`` | that session |
| ``{"messages": [...], "id"?, "app_name"?, "user_id"?}``  | one session                 |
| a JSON list (or JSONL lines) of sessions            | each session                     |
| a JSON list (or JSONL lines) of messages            | a session per ``session_id``     |

A message is ``{"role": "user"|"assistant"|..., "content": "text" | [parts]}`` (OpenAI
style) or an ADK event ``{"author", "content": {"role", "parts"}}``; ``timestamp``,
``time`` or ``created_at`` give its time. Messages are grouped into sessions by their
``session_id``, ``conversation_id`` or ``thread_id`` (and ``app_name``/``user_id`` where
they carry them), in file order; messages naming no session form one named after the file.
``app_name``/``user_id`` missing from a file come from the command line, so one transcript
can be imported for any user.

Why ids and times are filled in here: an event without a time gets the import time, one
millisecond apart in file order so the conversation keeps its order (not 1970-01-01). Its
id is derived first, from the event as written, so importing the file again derives the
same ids and writes nothing new although the import time has moved on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import InvalidInputError
from .sessions import event_ids

#: Fields of a message that name its session, first found wins.
SESSION_KEYS = ("session_id", "conversation_id", "thread_id")


def _message_to_event(msg: dict[str, Any]) -> dict[str, Any]:
    if "author" in msg and isinstance(msg.get("content"), (dict, type(None))):
        return msg  # already an ADK event
    role = str(msg.get("role") or msg.get("speaker") or "user")
    content = msg.get("content", msg.get("text", ""))
    parts = [{"text": content}] if isinstance(content, str) else content
    ev: dict[str, Any] = {
        "author": msg.get("name") or role,
        "content": {"role": role, "parts": parts},
    }
    if msg.get("id"):
        ev["id"] = str(msg["id"])
    for key in ("timestamp", "time", "created_at"):
        if msg.get(key) is not None:
            ev["timestamp"] = msg[key]
            break
    return ev


def _is_session(obj: Any) -> bool:
    return isinstance(obj, dict) and ("events" in obj or "messages" in obj)


def _session(obj: dict[str, Any], default_id: str, app_name: str | None, user_id: str | None) -> dict[str, Any]:
    if "events" in obj:
        events = obj.get("events") or []
    else:
        events = [_message_to_event(m) for m in obj.get("messages") or []]
    sid = obj.get("id") or default_id
    app = obj.get("app_name") or app_name
    user = obj.get("user_id") or user_id
    if not app or not user:
        raise InvalidInputError(
            f"session {sid!r} names no {'app_name' if not app else 'user_id'}; pass --app and --user."
        )
    return {"id": str(sid), "app_name": app, "user_id": user, "events": events}


def _conversations(
    messages: list[dict[str, Any]],
    events: list[dict[str, Any]],
    default_id: str,
    app_name: str | None,
    user_id: str | None,
) -> list[dict[str, Any]]:
    """The messages' events as sessions: grouped by the session (and app and user) each
    message names, in file order."""
    groups: dict[tuple[str, Any, Any], list[dict[str, Any]]] = {}
    for msg, ev in zip(messages, events, strict=True):
        sid = next((str(msg[k]) for k in SESSION_KEYS if msg.get(k) not in (None, "")), default_id)
        groups.setdefault((sid, msg.get("app_name"), msg.get("user_id")), []).append(ev)
    return [
        _session({"id": sid, "app_name": app, "user_id": user, "events": evs}, default_id, app_name, user_id)
        for (sid, app, user), evs in groups.items()
    ]


def _fill_ids_and_times(path: Path, sessions: list[dict[str, Any]], file_order: list[Any]) -> None:
    """Derive missing ids (from the events as written), then stamp timeless events with
    the import time, one millisecond apart in file order (see the module docstring)."""
    for s in sessions:
        if not isinstance(s["events"], list):
            continue  # read_session says what is wrong
        s["events"] = [e for e in s["events"] if not (isinstance(e, dict) and e.get("partial"))]
        try:
            ids = event_ids(s["events"])
        except InvalidInputError as exc:
            raise InvalidInputError(f"{path}: session {s['id']!r}: {exc}") from None
        for ev, eid in zip(s["events"], ids, strict=True):
            if isinstance(ev, dict):
                ev["id"] = eid
    now = time.time()
    for n, ev in enumerate(file_order):
        if isinstance(ev, dict) and ev.get("timestamp") in (None, ""):
            ev["timestamp"] = now + n / 1000


def _parse(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is not text
    except FileNotFoundError:
        raise InvalidInputError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from None
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise InvalidInputError(f"{path}: JSON nested too deeply to read; flatten the file.") from None
    items = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except RecursionError:
            raise InvalidInputError(f"{path}:{n}: JSON nested too deeply to read; flatten the line.") from None
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path}:{n}: not JSON ({exc.msg}); expected JSON or JSON Lines.") from None
    return items


def load_sessions(
    path: str | Path, *, app_name: str | None = None, user_id: str | None = None
) -> Iterator[dict[str, Any]]:
    path = Path(path)
    items = _parse(path)  # parsed here, so ours to fill in
    if all(_is_session(i) for i in items):
        names = [f"{path.stem}-{n}" if len(items) > 1 else path.stem for n in range(len(items))]
        sessions = [_session(item, name, app_name, user_id) for item, name in zip(items, names, strict=True)]
        file_order = [ev for s in sessions if isinstance(s["events"], list) for ev in s["events"]]
    elif all(isinstance(i, dict) and not _is_session(i) for i in items):
        file_order = [_message_to_event(m) for m in items]
        sessions = _conversations(items, file_order, path.stem, app_name, user_id)
    else:
        raise InvalidInputError(
            f"{path}: expected sessions (objects with 'events' or 'messages') or messages (objects "
            "with 'role' and 'content'), not a mix or other values."
        )
    _fill_ids_and_times(path, sessions, file_order)
    yield from sessions
