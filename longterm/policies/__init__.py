"""Auto-save policies: which events and parts of a session are worth remembering."""

from .classify import ROLE_ALIASES, Classified, Unit, canonical_role, classify, normalize_role
from .policy import PRESETS, MemoryAutoSavePolicy, MemoryEventType, Selected, resolve_policy

__all__ = [
    "PRESETS",
    "ROLE_ALIASES",
    "Classified",
    "MemoryAutoSavePolicy",
    "MemoryEventType",
    "Selected",
    "Unit",
    "canonical_role",
    "classify",
    "normalize_role",
    "resolve_policy",
]
