"""The message shapes of the ecosystem, read as ADK events: the front half of the input gate.

The seam: ``as_event(raw, where)`` takes one event or message as users hold it and returns
an ADK-shaped event (``raw`` itself when it already is one, so ids derived from it stay as
they were) or raises ``InvalidInputError`` naming the field and the shapes accepted.
``messages.as_messages(value)`` reads the argument of ``add()`` with these.
``session_events(obj)`` finds a session's list (``events``, or ``messages``).

Shapes accepted (each becomes ``{"id", "author", "timestamp", "content": {"role", "parts"}}``):

| shape | recognised by | author / role |
|---|---|---|
| ADK ``Event`` object or dict | an ADK field: ``content``, ``author``, ``actions``, ... | as given |
| genai ``Content`` dict | ``role`` + ``parts`` | the role |
| OpenAI chat message (mem0's) | ``role`` + ``content`` (text or typed parts), ``tool_calls`` | ``name`` or role |
| LangChain message (dict, ``dumpd`` form, object) | ``type`` human / ai / system / tool / chat | ``name`` or role |
| a plain string | ``str`` | user |

Typed parts: ``text`` / ``input_text`` / ``output_text``, ``refusal``, ``image_url`` /
``input_image`` / ``image`` (a ``data:`` URL becomes inline bytes, any other a file
reference), ``input_audio``, ``file``, Anthropic's ``tool_use`` / ``tool_result``.
OpenAI ``tool_calls`` become function calls (arguments parsed from their JSON), a ``tool``
message a function response. Anything else is refused: a save never marks handled what it
did not understand, so a caller can fix the input and save the same ids later.

Why a module of its own: the shapes are the ecosystem's, they grow, and each is a table
row; ``sessions`` keeps ids, times and repair.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .errors import InvalidInputError

#: Fields of ADK's ``Event`` (and of ours) that make a dict an ADK-shaped event.
ADK_EVENT_FIELDS = frozenset(
    {
        "content",
        "author",
        "actions",
        "invocation_id",
        "branch",
        "partial",
        "turn_complete",
        "interrupted",
        "error_code",
        "error_message",
        "input_transcription",
        "output_transcription",
        "long_running_tool_ids",
        "grounding_metadata",
        "usage_metadata",
        "citation_metadata",
        "live_session_resumption_update",
        "finish_reason",
    }
)
#: Fields of a genai ``Part``: a part dict with none of them is no part we can read.
PART_FIELDS = frozenset(
    {
        "text",
        "thought",
        "thought_signature",
        "function_call",
        "function_response",
        "inline_data",
        "file_data",
        "executable_code",
        "code_execution_result",
        "video_metadata",
        "media_resolution",
        "part_metadata",
        "tool_call",
        "tool_response",
    }
)
#: LangChain message types and the role each speaks in.
LANGCHAIN_ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    "developer": "system",
}
#: LangChain's class names in its serialized (``dumpd``) form, to their ``type``.
_LANGCHAIN_CLASSES = {
    "HumanMessage": "human",
    "HumanMessageChunk": "human",
    "AIMessage": "ai",
    "AIMessageChunk": "ai",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
}
#: A chat message's roles (OpenAI's, genai's ``model``) and aliases; others are refused (``_role``).
CHAT_ROLES = frozenset({"user", "assistant", "system", "developer", "tool", "function", "model"})
ROLE_ALIASES = {"human": "user", "ai": "assistant"}
#: The fields of a message that names neither role nor author: read as the user's.
BARE_MESSAGE_FIELDS = frozenset({"content", "id", "timestamp", "created_at", "metadata", "custom_metadata", "name"})
ACCEPTED = (
    "an ADK Event (or a dict with its fields: content, author, ...), an OpenAI chat message "
    "({'role': ..., 'content': ...}), a LangChain message ({'type': 'human', 'content': ...}) or a string"
)
_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[^,;]*)*?;base64,(?P<data>.*)", re.DOTALL)


def _refuse(where: str, why: str) -> InvalidInputError:
    return InvalidInputError(f"{where} {why}; accepted: {ACCEPTED}.")


def plain(obj: Any) -> Any:  # a dict view of a pydantic model or a plain object (LangChain's, ADK's)
    if obj is None or isinstance(obj, (dict, list, str, int, float, bool, bytes)):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    if hasattr(obj, "__dict__"):
        return {k: v for k, v in vars(obj).items() if v is not None and not k.startswith("_")}
    return obj


def is_mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, a dict answered without the ABC's check: the gate asks it
    several times an event, and the ABC's ``__instancecheck__`` was a tenth of reading a session."""
    return isinstance(value, (dict, Mapping))  # in order: a dict stops at the first


def is_adk_object(raw: Any) -> bool:
    """An ADK (or genai-based) event object: read as it is, its ids derived as before."""
    return not is_mapping(raw) and hasattr(raw, "author") and hasattr(raw, "content")


def _args(value: Any) -> Any:
    """Tool arguments: OpenAI sends them as a JSON string; a string that is no JSON is kept."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"arguments": value}
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    return value if isinstance(value, dict) else ({} if value is None else {"arguments": value})


def _image(url: Any, detail: str = "") -> dict[str, Any]:
    if isinstance(url, Mapping):
        url = url.get("url")
    url = "" if url is None else str(url)
    m = _DATA_URL.match(url)
    if m:
        return {"inline_data": {"mime_type": m["mime"] or "image/*", "data": m["data"]}}
    return {"file_data": {"file_uri": url, "mime_type": "image/*"}}


def _typed_part(p: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """One typed part of OpenAI, LangChain or Anthropic as a genai part (None: nothing in it)."""
    kind = p.get("type")
    if kind in ("text", "input_text", "output_text") or (kind is None and "text" in p):
        return {"text": "" if p.get("text") is None else str(p.get("text"))}
    if kind == "refusal":
        return {"text": str(p.get("refusal") or "")}
    if kind in ("image_url", "input_image"):
        return _image(p.get("image_url") or p.get("url"))
    if kind == "image":  # LangChain's standard block, Anthropic's
        source = p.get("source")
        src: Mapping[str, Any] = source if isinstance(source, Mapping) else p
        if src.get("data") is not None or src.get("type") == "base64":
            mime = src.get("mime_type") or src.get("media_type") or "image/*"
            return {"inline_data": {"mime_type": mime, "data": src.get("data")}}
        return _image(src.get("url"))
    if kind == "input_audio":
        audio = p.get("input_audio") or {}
        return {"inline_data": {"mime_type": f"audio/{audio.get('format') or 'wav'}", "data": audio.get("data")}}
    if kind in ("file", "input_file"):
        file = p.get("file")
        f: Mapping[str, Any] = file if isinstance(file, Mapping) else p
        name = f.get("filename") or f.get("file_id") or ""
        ref: dict[str, Any] = {"file_uri": str(f.get("file_id") or f.get("file_url") or name)}
        ref["mime_type"] = "application/octet-stream"
        if name:
            ref["display_name"] = str(name)
        return {"file_data": ref}
    if kind == "tool_use":
        return {"function_call": {"id": p.get("id"), "name": p.get("name") or "", "args": _args(p.get("input"))}}
    if kind == "tool_result":
        body = p.get("content")
        return {"function_response": {"id": p.get("tool_use_id"), "name": "", "response": {"content": _flat(body)}}}
    shown = "no type" if kind is None else f"type {kind!r}"
    raise InvalidInputError(
        f"{where} is a content part of {shown} with none of the known fields; known part types: text, "
        "input_text, refusal, image_url, input_image, image, input_audio, file, tool_use, tool_result "
        "(or genai parts: text, function_call, function_response, inline_data, file_data, ...)."
    )


def _flat(body: Any) -> Any:
    """A tool result's content as text where it is text (OpenAI and Anthropic send parts)."""
    if isinstance(body, list):
        texts = [str(p.get("text", "")) for p in body if isinstance(p, Mapping) and "text" in p]
        if len(texts) == len(body):
            return "\n".join(texts)
    return body


def as_parts(content: Any, where: str) -> list[dict[str, Any]]:
    """A message's ``content`` (a string, typed parts or genai parts) as genai parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, (list, tuple)):
        raise _refuse(f"{where}.content", f"is a {type(content).__name__}, not a string or a list of parts")
    out = []
    for i, p in enumerate(content):
        p = plain(p)
        if isinstance(p, str):
            out.append({"text": p})
        elif not isinstance(p, Mapping):
            raise _refuse(f"{where}.content[{i}]", f"is a {type(p).__name__}, not a part")
        elif "type" not in p and not PART_FIELDS.isdisjoint(p):
            out.append(dict(p))  # already a genai part
        else:
            part = _typed_part(p, f"{where}.content[{i}]")
            if part is not None:
                out.append(part)
    return out


def _common(d: Mapping[str, Any], role: str, author: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    event: dict[str, Any] = {"author": author, "content": {"role": role, "parts": parts}}
    for key in ("id", "timestamp"):
        if d.get(key) is not None:
            event[key] = d[key]
    if d.get("created_at") is not None and "timestamp" not in event:
        event["timestamp"] = d["created_at"]
    meta = d.get("metadata") if isinstance(d.get("metadata"), Mapping) else d.get("custom_metadata")
    if isinstance(meta, Mapping) and meta:
        event["custom_metadata"] = dict(meta)
    return event


def _from_chat(d: Mapping[str, Any], role: str, where: str) -> dict[str, Any]:
    """An OpenAI chat message (or a LangChain one, whose role is already read) as an event."""
    parts = as_parts(d.get("content"), where)
    for j, call in enumerate(d.get("tool_calls") or []):
        call = plain(call)
        if not isinstance(call, Mapping):
            raise _refuse(f"{where}.tool_calls[{j}]", "is not a tool call")
        function = call.get("function")
        fn: Mapping[str, Any] = function if isinstance(function, Mapping) else call  # OpenAI / LangChain
        args = fn.get("arguments") if "arguments" in fn else fn.get("args")
        parts.append({"function_call": {"id": call.get("id"), "name": str(fn.get("name") or ""), "args": _args(args)}})
    legacy = d.get("function_call")
    if isinstance(legacy, Mapping):
        parts.append({"function_call": {"name": str(legacy.get("name") or ""), "args": _args(legacy.get("arguments"))}})
    if role in ("tool", "function"):
        body = _flat(d.get("content"))
        name = str(d.get("name") or "")
        call_id = d.get("tool_call_id")
        parts = [{"function_response": {"id": call_id, "name": name, "response": {"content": body}}}]
    if not parts:
        raise _refuse(where, "is a message with no content and no tool calls")
    author = str(d.get("name") or role) if role not in ("tool", "function") else role
    return _common(d, role, author, parts)


def _role(value: Any, where: str) -> str:
    """``role`` as the gate reads it (missing: the user's); one not understood is refused, not saved as the model's."""
    if value is None or value == "":
        return "user"
    if not isinstance(value, str):
        raise _refuse(f"{where}.role", f"is a {type(value).__name__}, not a string")
    role = value.strip().lower()
    role = ROLE_ALIASES.get(role, role)
    if role not in CHAT_ROLES:
        known = ", ".join(sorted(CHAT_ROLES))
        raise _refuse(f"{where}.role", f"is {value!r}, not a role: use one of {known} (a speaker goes in 'name')")
    return role


def _from_langchain(d: Mapping[str, Any], where: str) -> dict[str, Any]:
    if "lc" in d and isinstance(d.get("kwargs"), Mapping):  # langchain_core.load.dumpd
        path = d.get("id")
        cls = path[-1] if isinstance(path, list) and path else ""
        d = {"type": _LANGCHAIN_CLASSES.get(str(cls), ""), **d["kwargs"]}
    kind = str(d.get("type") or "").removesuffix("Chunk").lower()
    role = _role(d.get("role"), where) if kind == "chat" else LANGCHAIN_ROLES.get(kind, "")
    if not role:
        raise _refuse(where, f"is a LangChain message of unknown type {d.get('type')!r}")
    return _from_chat(d, role, where)


#: The fields an event of text parts may have (``text_parts``).
TEXT_EVENT_FIELDS = frozenset({"id", "author", "timestamp", "content"})
#: The fields its content may have (an ADK object's content too: ``sessions.text_events``).
TEXT_CONTENT_FIELDS = frozenset({"role", "parts"})


def text_parts(raw: Any) -> list[str] | None:
    """The texts of ``raw`` when it is the commonest event: a dict of at most
    ``TEXT_EVENT_FIELDS`` whose content is a dict of at most ``role`` (a string) and ``parts``, one
    or more dicts each of ``text`` (a string) alone; else None. ``as_event`` passes such an event as
    it is at once, and ``sessions.text_events`` reads it without the models."""
    if type(raw) is not dict or not TEXT_EVENT_FIELDS.issuperset(raw):
        return None
    content = raw.get("content")
    if type(content) is not dict or not TEXT_CONTENT_FIELDS.issuperset(content):
        return None
    role, parts = content.get("role"), content.get("parts")
    if type(parts) is not list or not parts or (role is not None and type(role) is not str):
        return None
    texts = []
    for part in parts:
        if type(part) is not dict or len(part) != 1 or type(text := part.get("text")) is not str:
            return None
        texts.append(text)
    return texts


def as_event(raw: Any, where: str = "event") -> Any:
    """``raw`` as an ADK-shaped event (``raw`` itself when it is one); see the module docstring."""
    if text_parts(raw) is not None:  # the commonest event, in ADK's shape already
        return raw
    if isinstance(raw, str):
        return {"author": "user", "content": {"role": "user", "parts": [{"text": raw}]}}
    if is_adk_object(raw):
        return raw
    d = plain(raw)
    if not is_mapping(d):
        raise _refuse(where, f"is a {type(raw).__name__}")
    kind = d.get("type")
    if ("lc" in d and "kwargs" in d) or (
        isinstance(kind, str) and kind.removesuffix("Chunk").lower() in (*LANGCHAIN_ROLES, "chat") and "author" not in d
    ):
        return _from_langchain(d, where)
    if "role" in d and "author" not in d and not is_mapping(d.get("content")):
        if "parts" in d:  # a genai Content given as the event
            return {**{k: d[k] for k in ("id", "timestamp") if k in d}, "author": str(d["role"]), "content": d}
        return _from_chat(d, _role(d.get("role"), where), where)
    if "author" not in d and "content" in d and BARE_MESSAGE_FIELDS.issuperset(d) and not is_mapping(d["content"]):
        return _from_chat(d, "user", where)  # {"content": "..."}: a message with no role is the user's
    if ADK_EVENT_FIELDS.isdisjoint(d):
        keys = ", ".join(sorted(map(str, d))) or "none"
        if any(isinstance(d.get(k), (list, tuple)) for k in ("events", "messages")):
            raise _refuse(
                where,
                f"is a session (its fields: {keys}), not a message: save it with add_session_to_memory, "
                "or pass its list of messages",
            )
        raise _refuse(where, f"has no field of a known shape (its fields: {keys})")
    _check_adk_parts(d, where)
    return raw


def _check_adk_parts(d: Mapping[str, Any], where: str) -> None:
    """An ADK-shaped dict whose content holds no readable part is refused, not saved as nothing."""
    content = d.get("content")
    if content is None or isinstance(content, str):
        return
    content = plain(content)
    if not is_mapping(content):
        raise _refuse(f"{where}.content", f"is a {type(content).__name__}, not a string or {{'role', 'parts'}}")
    if "parts" not in content and "role" not in content:
        keys = ", ".join(sorted(map(str, content))) or "none"
        raise _refuse(f"{where}.content", f"has neither role nor parts (its fields: {keys})")
    parts = content.get("parts")
    if isinstance(parts, str) or is_mapping(parts):
        parts = [parts]
    for i, p in enumerate(parts or []):
        p = plain(p)
        if is_mapping(p) and PART_FIELDS.isdisjoint(p):
            keys = ", ".join(sorted(map(str, p))) or "none"
            raise InvalidInputError(
                f"{where}.content.parts[{i}] has none of the fields of a part (its fields: {keys}); "
                f"a part holds one of: {', '.join(sorted(PART_FIELDS))}."
            )


def session_events(obj: Any) -> Any:
    """A session's list of events: ``events``, else ``messages`` (mem0, OpenAI, LangChain users).
    A dict whose only list is under another key is refused: it would save nothing silently."""
    get = obj.get if isinstance(obj, Mapping) else (lambda k, default=None: getattr(obj, k, default))
    events = get("events")
    if events is None:
        events = get("messages")
    if events is None and isinstance(obj, Mapping):
        lists = [str(k) for k, v in obj.items() if isinstance(v, (list, tuple)) and v]
        if lists:
            raise InvalidInputError(
                f"the session has no 'events' (or 'messages') list, only {', '.join(lists)}; "
                "put its events or messages under 'events'."
            )
    return events
