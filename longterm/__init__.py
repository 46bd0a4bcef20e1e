"""longterm: long-term memory for AI agents. The public API, re-exported."""

from .entries import HAVE_ADK, MemoryEntry, SearchMemoryResponse
from .errors import (
    BackendError,
    BackendUnavailableError,
    ConfigurationError,
    InvalidInputError,
    LongTermMemoryError,
    MissingDependencyError,
)
from .core.ledger import Ledger, MemoryLedger
from .memory import LongTermMemory, SaveResult
from .policies import MemoryAutoSavePolicy, MemoryEventType
from .records import Hit, MemoryRecord, Scope, record_id
from .sessions import Content, Event, Part, Session

__version__ = "0.1.0"

__all__ = [
    "HAVE_ADK",
    "BackendError",
    "BackendUnavailableError",
    "ConfigurationError",
    "Content",
    "Event",
    "Hit",
    "InvalidInputError",
    "Ledger",
    "LongTermMemory",
    "LongTermMemoryError",
    "MemoryAutoSavePolicy",
    "MemoryEntry",
    "MemoryEventType",
    "MemoryLedger",
    "MemoryRecord",
    "MissingDependencyError",
    "Part",
    "SaveResult",
    "Scope",
    "SearchMemoryResponse",
    "Session",
    "record_id",
]
