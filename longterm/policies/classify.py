"""Event classification: which role an event speaks in and what kind each part is.

The seam: ``classify(event) -> Classified`` (a role and a list of ``Unit``s), and
``classify_text(event)`` the same of an event of text parts read without the models
(``sessions.text_events``). The policy (``policy.py``) only decides which units to keep; it
never looks at raw parts.

Role normalisation (first matching row wins). ``ROLE_ALIASES`` is the one table of role
names: events are read through it here, and policies (``include_roles``/``exclude_roles``)
through ``canonical_role``, so ``assistant`` in a policy means what ``assistant`` means
in an event.

| condition                                                      | role     |
|----------------------------------------------------------------|----------|
| every part is a function_response (ADK sends these as "user") | tool     |
| content.role in user, human                                    | user     |
| content.role in model, assistant, ai, agent, bot               | model    |
| content.role in tool, function                                 | tool     |
| content.role in system, developer                              | system   |
| content.role is any other non-empty string                     | it, lower-cased |
| no role, author is "user"                                      | user     |
| no role, author is "system"                                    | system   |
| no role, any other author                                      | model    |

Part to unit (a part gives one unit; the unit's type names are what include/exclude
``event_types`` match):

| part                                  | unit types                       | stored as |
|---------------------------------------|----------------------------------|-----------|
| ``text`` with ``thought`` true         | thought                          | the part |
| ``text`` non-blank                     | text                             | the part |
| ``text`` blank                         | text (empty)                     | the part |
| ``function_call``                      | function_call, tool_call         | the part |
| ``function_response``                  | function_response, tool_response | the part |
| ``inline_data`` / ``file_data``        | media                            | "[media: mime, size]" (no bytes) |
| ``executable_code``                    | executable_code                  | the part |
| ``code_execution_result``              | code_execution_result            | the part |
| a call or result of ``MEMORY_TOOLS``   | (dropped, under every policy)    | - |
| none of the above                      | (dropped)                        | - |

Event-level units:

| event field                                  | unit types     | stored as |
|----------------------------------------------|----------------|-----------|
| ``input_transcription``/``output_transcription`` with text | transcription | a text part |
| ``error_code`` or ``error_message``           | error          | a text part "error CODE: message" |
| no unit at all from the rows above            | text (empty)   | nothing |
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_jsonable_python

from ..records import bound_depth, repair_tree, repair_unicode, tree_text
from ..sessions import Event, Part
from ..sessions.text_events import TextEvent

#: Every accepted spelling of a role, lower-cased, to its canonical name.
ROLE_ALIASES: dict[str, str] = {
    **dict.fromkeys(("user", "human"), "user"),
    **dict.fromkeys(("model", "assistant", "ai", "agent", "bot"), "model"),
    **dict.fromkeys(("tool", "function"), "tool"),
    **dict.fromkeys(("system", "developer"), "system"),
}


def canonical_role(name: str) -> str:
    """``name`` by the alias table (``Assistant`` -> ``model``); other names lower-cased."""
    role = name.strip().lower()
    return ROLE_ALIASES.get(role, role)


@dataclass(slots=True)
class Unit:
    """One classified piece of an event."""

    types: tuple[str, ...]
    text: str = ""
    part: dict[str, Any] | None = None
    empty: bool = False
    media: dict[str, Any] | None = None


@dataclass(slots=True)
class Classified:
    role: str
    units: list[Unit] = field(default_factory=list)


def normalize_role(event: Event) -> str:
    content = event.content
    parts = content.parts if content else []
    if parts and all(p.function_response is not None for p in parts):
        return "tool"
    return _role_of(content.role if content else None, event.author)


def _role_of(role: str | None, author: str) -> str:
    """The role table's rows after the first: the content's role, else the author's."""
    role = canonical_role(role or "")
    if role:
        return role
    author = author.strip().lower()
    if author == "user":
        return "user"
    if author == "system":
        return "system"
    return "model"


def _json(value: Any) -> str:
    """Tool arguments or a response as JSON text, for search; never raises.

    ``Part`` bounds the nesting it holds, but an object inside it (a model, say) can still
    hide a deep structure, which pydantic's serializer refuses past ~255 levels.
    """
    try:
        return json.dumps(repair_tree(to_jsonable_python(value, fallback=str)), ensure_ascii=False, sort_keys=True)
    except (ValueError, RecursionError):
        return repair_unicode(tree_text(value))


def _part_dict(part: Part) -> dict[str, Any]:
    body = part.model_dump(exclude_none=True)
    body.pop("thought_signature", None)  # opaque bytes, meaningless outside the model call
    try:
        # Bounded twice: the dump as sent (fields other than tool calls nest freely), and
        # what the serializer made of objects in it.
        tree: dict[str, Any] = repair_tree(bound_depth(to_jsonable_python(bound_depth(body), fallback=str)))
        return tree
    except (ValueError, RecursionError):  # a deep structure hidden in an object (see _json)
        return {"text": repair_unicode(tree_text(body))}


def _media_unit(part: Part) -> Unit:
    blob = part.inline_data or {}
    ref = part.file_data or {}
    mime = blob.get("mime_type") or ref.get("mime_type") or "application/octet-stream"
    media: dict[str, Any] = {"mime_type": mime}
    if part.inline_data is not None:
        data = blob.get("data") or b""
        if isinstance(data, str):  # base64 in JSON dumps: 4 characters carry 3 bytes
            size = len(data) * 3 // 4 - data[-2:].count("=")
        else:
            size = len(data)
        media["size_bytes"] = size
        label = f"[media: {mime}, {size} bytes]"
    else:
        media["file_uri"] = ref.get("file_uri")
        label = f"[media: {mime}, {ref.get('file_uri', '')}]"
    name = blob.get("display_name") or ref.get("display_name")
    if name:
        media["display_name"] = name
        label = label[:-1] + f", {name}]"
    label = repair_unicode(label)  # mime types, names and uris are the caller's text
    return Unit(types=("media",), text=label, part={"text": label}, media=media)


def _text_dict(part: Part) -> dict[str, Any]:
    # The common case, built directly: a full model_dump per part was a fifth of a save.
    if part.model_extra:
        return _part_dict(part)
    return {"text": part.text, "thought": True} if part.thought else {"text": part.text}


#: The library's own memory tools (``longterm.tools``, the integrations'): a recall's result copies
#: memories and a save's text is saved by the tool, so saved again from the transcript a copy would
#: outlive the memory's erase, or be a second one.
MEMORY_TOOLS = frozenset({"load_memory", "save_memory"})


def _memory_tool(call: dict[str, Any]) -> bool:
    return call.get("name") in MEMORY_TOOLS


def classify_part(part: Part) -> Unit | None:
    if part.text is not None:
        if part.thought:
            return Unit(types=("thought",), text=part.text, part=_text_dict(part), empty=not part.text.strip())
        return Unit(types=("text",), text=part.text, part=_text_dict(part), empty=not part.text.strip())
    if part.function_call is not None:
        fc = part.function_call
        if _memory_tool(fc):
            return None
        text = f"{fc.get('name', '')}({_json(fc.get('args', {}))})"
        return Unit(types=("function_call", "tool_call"), text=text, part=_part_dict(part))
    if part.function_response is not None:
        fr = part.function_response
        if _memory_tool(fr):
            return None
        text = f"{fr.get('name', '')} -> {_json(fr.get('response', {}))}"
        return Unit(types=("function_response", "tool_response"), text=text, part=_part_dict(part))
    if part.inline_data is not None or part.file_data is not None:
        return _media_unit(part)
    if part.executable_code is not None:
        return Unit(types=("executable_code",), text=str(part.executable_code.get("code", "")), part=_part_dict(part))
    if part.code_execution_result is not None:
        text = str(part.code_execution_result.get("output", ""))
        return Unit(types=("code_execution_result",), text=text, part=_part_dict(part))
    return None


def classify_text(event: TextEvent) -> Classified:
    """``classify`` of the ``Event`` that ``event`` stands for (``sessions.text_events``): text parts
    only, so a role by the table's content and author rows and a text unit a part."""
    units = [Unit(types=("text",), text=t, part={"text": t}, empty=not t.strip()) for t in event.texts]
    return Classified(role=_role_of(event.role, event.author), units=units)


def classify(event: Event) -> Classified:
    """Role and units of ``event`` by the tables in this module's docstring.

    Every unit's ``part`` is stored as it is: it holds no lone surrogate (text parts were
    repaired by ``Part``, other parts by ``_part_dict``, the labels made here are repaired
    here), so a save does not walk the parts again (measured: a sixth of planning a save)."""
    out = Classified(role=normalize_role(event))
    recall = False  # a part of the library's memory tools: an event of only those keeps no unit
    for part in event.content.parts if event.content else []:
        unit = classify_part(part)
        if unit is not None:
            out.units.append(unit)
        else:
            recall = recall or _memory_tool(part.function_call or part.function_response or {})
    for tr in (event.input_transcription, event.output_transcription):
        text = tr.get("text") if isinstance(tr, dict) else None
        if isinstance(text, str) and text.strip():
            text = repair_unicode(text)
            out.units.append(Unit(types=("transcription",), text=text, part={"text": text}))
    if event.error_code or event.error_message:
        text = f"error {event.error_code or ''}: {event.error_message or ''}".replace("error :", "error:")
        text = repair_unicode(text)
        out.units.append(Unit(types=("error",), text=text, part={"text": text}))
    if not out.units and not recall:
        out.units.append(Unit(types=("text",), empty=True))
    return out
