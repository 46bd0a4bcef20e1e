"""longterm: long-term memory for AI agents. The public API, re-exported.

Names that ADK also defines for its own classes (``Session``, ``Event``, ``Content``,
``Part``) are not exported here, so ``from longterm import *`` next to ADK's imports
shadows nothing; our input models stay in ``longterm.sessions``.
"""

from .autosave import AutoSaver
from .core.ledger import Ledger, MemoryLedger
from .entries import HAVE_ADK, MemoryEntry, SearchMemoryResponse
from .errors import (
    BackendError,
    BackendUnavailableError,
    ConfigurationError,
    InvalidInputError,
    LongTermMemoryError,
    MissingDependencyError,
)
from .memory import LongTermMemory, SaveResult
from .policies import MemoryAutoSavePolicy, MemoryEventType
from .records import Hit, MemoryRecord, Scope, record_id
from .retrieval.rescoring import Rescoring
from .tools import MemoryTool

__version__ = "0.2.0"

__all__ = [
    "HAVE_ADK",
    "AutoSaver",
    "BackendError",
    "BackendUnavailableError",
    "ConfigurationError",
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
    "MemoryTool",
    "MissingDependencyError",
    "Rescoring",
    "SaveResult",
    "Scope",
    "SearchMemoryResponse",
    "record_id",
]
