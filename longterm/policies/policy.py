"""The auto-save policy: which events of a session become memories, and which parts.

The seam: ``resolve_policy(x)`` accepts None, a preset name, a dict or a
``MemoryAutoSavePolicy`` and returns a policy; ``policy.select(event)`` returns the kept
parts of one event (a ``Selected``) or None. Classification lives in ``classify.py``.

Presets, and what an explicitly set field does to them:

| preset    | roles      | types | text_only | include_thought | include_empty_text |
|-----------|------------|-------|-----------|-----------------|--------------------|
| default   | user       | any   | True      | False           | False              |
| all       | any        | any   | False     | True            | True               |
| custom    | any        | any   | True      | False           | False              |

A field given explicitly (``MemoryAutoSavePolicy(preset="default", include_roles=["user",
"model"])``) overrides the preset's value for that field only; the rest stays the preset's.

How a unit (see classify.py) is kept, all conditions together:
1. the event's role passes include_roles/exclude_roles (role names go through the same
   alias table as events, ``classify.ROLE_ALIASES``: ``assistant`` is ``model``, ``human``
   is ``user``) and its author passes include_authors/exclude_authors (exact,
   case-sensitive author names);
2. thought units need include_thought; blank text units need include_empty_text;
3. text_only keeps only text, thought and transcription units, unless include_event_types is
   set (VeADK's rule: the types named there are what is kept);
4. one of the unit's type names is in include_event_types (when set) and none is in
   exclude_event_types.
An event is saved when at least one unit is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ..errors import ConfigurationError
from ..sessions import Event
from .classify import Classified, canonical_role, classify


class MemoryEventType(str, Enum):
    """The kinds of content a policy can include or exclude."""

    TEXT = "text"
    THOUGHT = "thought"
    FUNCTION_CALL = "function_call"
    FUNCTION_RESPONSE = "function_response"
    TOOL_CALL = "tool_call"
    TOOL_RESPONSE = "tool_response"
    MEDIA = "media"
    EXECUTABLE_CODE = "executable_code"
    CODE_EXECUTION_RESULT = "code_execution_result"
    TRANSCRIPTION = "transcription"
    ERROR = "error"


_EVENT_TYPES = {t.value for t in MemoryEventType}
_TEXTUAL = frozenset({"text", "thought", "transcription"})
_NAME_LISTS = (
    "include_roles",
    "exclude_roles",
    "include_authors",
    "exclude_authors",
    "include_event_types",
    "exclude_event_types",
)

PRESETS: dict[str, dict[str, Any]] = {
    "default": dict(include_roles=["user"], text_only=True, include_thought=False, include_empty_text=False),
    "all": dict(include_roles=None, text_only=False, include_thought=True, include_empty_text=True),
    # VeADK: "custom" starts from the default policy (text only, no thought, no empty text) with
    # roles and types unrestricted; include_event_types, when set, replaces text_only.
    "custom": dict(include_roles=None, text_only=True, include_thought=False, include_empty_text=False),
}


@dataclass(slots=True)
class Selected:
    """The kept part of one event."""

    role: str
    event_types: list[str]
    text: str
    parts: list[dict[str, Any]]
    media: list[dict[str, Any]]


class MemoryAutoSavePolicy(BaseModel):
    """What of a session is saved. See the module docstring for the exact rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: Literal["default", "all", "custom"] = "default"
    include_roles: list[str] | None = None
    exclude_roles: list[str] | None = None
    include_authors: list[str] | None = None
    exclude_authors: list[str] | None = None
    include_event_types: list[str] | None = None
    exclude_event_types: list[str] | None = None
    text_only: bool | None = None
    include_thought: bool | None = None
    include_empty_text: bool | None = None

    @field_validator("include_roles", "exclude_roles", mode="before")
    @classmethod
    def _roles(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [v]
        return None if v is None else [canonical_role(str(r)) for r in _listed(v, "roles")]

    @field_validator("include_authors", "exclude_authors", mode="before")
    @classmethod
    def _authors(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("include_event_types", "exclude_event_types", mode="before")
    @classmethod
    def _types(cls, v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, (str, MemoryEventType)):
            v = [v]
        out = []
        for t in _listed(v, "event types"):
            name = t.value if isinstance(t, MemoryEventType) else str(t).strip().lower()
            if name not in _EVENT_TYPES:
                raise ValueError(f"unknown event type {t!r}; known: {', '.join(sorted(_EVENT_TYPES))}")
            out.append(name)
        return out

    def effective(self, name: str) -> Any:
        """The value in force for field ``name``: set explicitly, else the preset's."""
        if name in self.model_fields_set and name != "preset":
            return getattr(self, name)
        return PRESETS[self.preset].get(name, getattr(self, name))

    @cached_property
    def _rules(self) -> dict[str, Any]:
        """The fields in force, with the name lists as frozensets (``None`` = no filter)."""
        rules = {name: self.effective(name) for name in type(self).model_fields if name != "preset"}
        for name in _NAME_LISTS:
            value = rules[name]
            rules[name] = None if value is None else frozenset(value)
        if rules["include_event_types"] is not None:  # the types named are what is kept (VeADK)
            rules["text_only"] = False
        return rules

    def select(self, event: Event) -> Selected | None:
        """The kept part of ``event``, or None when nothing of it is kept."""
        return self.select_classified(classify(event), event.author)

    def select_classified(self, c: Classified, author: str) -> Selected | None:
        """``select`` of an event already classified as ``c``, whose author is ``author``."""
        rules = self._rules
        inc_roles, exc_roles = rules["include_roles"], rules["exclude_roles"]
        if inc_roles is not None and c.role not in inc_roles:
            return None
        if exc_roles and c.role in exc_roles:
            return None
        inc_auth, exc_auth = rules["include_authors"], rules["exclude_authors"]
        if inc_auth is not None and author not in inc_auth:
            return None
        if exc_auth and author in exc_auth:
            return None
        text_only, thought, empty = rules["text_only"], rules["include_thought"], rules["include_empty_text"]
        inc_types, exc_types = rules["include_event_types"], rules["exclude_event_types"]
        kept = []
        for u in c.units:
            if "thought" in u.types and not thought:
                continue
            if u.empty and not empty:
                continue
            if text_only and _TEXTUAL.isdisjoint(u.types):
                continue
            if inc_types is not None and inc_types.isdisjoint(u.types):
                continue
            if exc_types and not exc_types.isdisjoint(u.types):
                continue
            kept.append(u)
        if not kept:
            return None
        if len(kept) == 1:  # the common case, without the merging below
            u = kept[0]
            parts, media = [] if u.part is None else [u.part], [] if u.media is None else [u.media]
            return Selected(role=c.role, event_types=list(u.types), text=u.text, parts=parts, media=media)
        types = list(dict.fromkeys(t for u in kept for t in u.types))
        return Selected(
            role=c.role,
            event_types=types,
            text="\n".join(u.text for u in kept if u.text),
            parts=[u.part for u in kept if u.part is not None],
            media=[u.media for u in kept if u.media is not None],
        )


#: ``MemoryAutoSavePolicy.select`` as defined here: a policy whose ``select`` is another (a
#: subclass's, or one patched onto the class) is given ``Event``s (``saves.plan_save``).
OWN_SELECT = MemoryAutoSavePolicy.select


def resolve_policy(policy: Any) -> MemoryAutoSavePolicy:
    """None, a preset name, a dict or a policy instance -> a policy (or a clear error)."""
    if policy is None:
        return MemoryAutoSavePolicy()
    if isinstance(policy, MemoryAutoSavePolicy):
        return policy
    try:
        if isinstance(policy, str):
            name = policy.strip().lower()
            if name not in PRESETS:
                raise ConfigurationError(
                    f"unknown auto-save policy preset {policy!r}; use one of {', '.join(PRESETS)}."
                )
            return MemoryAutoSavePolicy.model_validate({"preset": name})
        if isinstance(policy, dict):
            return MemoryAutoSavePolicy.model_validate(policy)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "policy"
        raise ConfigurationError(f"invalid auto-save policy at '{where}': {first['msg']}") from None
    raise ConfigurationError(
        f"auto_save_memory_policy must be None, a preset name, a dict or MemoryAutoSavePolicy, "
        f"got {type(policy).__name__}."
    )


def _listed(value: Any, what: str) -> list[Any]:
    """A list of names given as a list, tuple or set (pydantic reports a ValueError, not a TypeError)."""
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ValueError(f"{what} must be a list of names, got {type(value).__name__}")
    return list(value)
