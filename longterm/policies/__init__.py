"""Auto-save policies: which events and parts of a session are worth remembering."""

from .classify import Classified, Unit, classify, normalize_role
from .policy import PRESETS, MemoryAutoSavePolicy, MemoryEventType, Selected, resolve_policy

__all__ = [
    "PRESETS",
    "Classified",
    "MemoryAutoSavePolicy",
    "MemoryEventType",
    "Selected",
    "Unit",
    "classify",
    "normalize_role",
    "resolve_policy",
]
