"""Reading conversation files for ``longterm import``: JSON, JSONL, ADK session dumps.

The seam: ``load_sessions(path, app_name=, user_id=)`` yields session dicts that
``read_session`` accepts. Accepted shapes, detected per file (or per JSONL line):

| shape                                              | becomes                          |
|----------------------------------------------------|----------------------------------|
| an ADK session dump ``{"id", "app_name", "user_id", "events": [...]}`` | that session |
| ``{"messages": [...], "id"?, "app_name"?, "user_id"?}``  | one session                 |
| a JSON list of sessions (either shape above)        | each session                     |
| a JSON list of messages                             | one session named after the file |
| JSONL whose lines are sessions                      | each session                     |
| JSONL whose lines are messages                      | one session named after the file |

A message is ``{"role": "user"|"assistant"|..., "content": "text" | [parts]}`` (OpenAI
style) or an ADK event ``{"author", "content": {"role", "parts"}}``; ``timestamp``,
``time`` or ``created_at`` give its time. ``app_name``/``user_id`` missing from a file
come from the command line, so one transcript can be imported for any user.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import InvalidInputError


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


def _parse(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInputError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from None
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:
        pass
    items = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path}:{n}: not JSON ({exc.msg}); expected JSON or JSON Lines.") from None
    return items


def load_sessions(path: str | Path, *, app_name: str | None = None, user_id: str | None = None) -> Iterator[dict[str, Any]]:
    path = Path(path)
    items = _parse(path)
    if not items:
        return
    if all(_is_session(i) for i in items):
        for n, item in enumerate(items):
            yield _session(item, f"{path.stem}-{n}" if len(items) > 1 else path.stem, app_name, user_id)
    elif all(isinstance(i, dict) and not _is_session(i) for i in items):
        yield _session({"messages": items}, path.stem, app_name, user_id)
    else:
        raise InvalidInputError(
            f"{path}: expected sessions (objects with 'events' or 'messages') or messages (objects "
            "with 'role' and 'content'), not a mix or other values."
        )
