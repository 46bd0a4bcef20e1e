"""The local engine's ``backend_config`` (``LocalConfig``): the default store's keys and defaults.

The seam: ``parse_backend_config(LocalConfig, config, "local")`` in the engine's
``from_config``; ``config.backends`` re-exports it with the other engines' models.

Why a module of its own: every ``LongTermMemory()`` without a backend named opens this engine,
and reading its model should not load the models of engines the process never opens.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from .hybrid import HybridSettings

#: Largest record the local store accepts (text plus content, UTF-8 bytes).
LOCAL_MAX_RECORD_BYTES = 16 * 1024 * 1024


class LocalConfig(HybridSettings):
    model_config = ConfigDict(extra="forbid")

    path: str | None = None
    """SQLite file; default ``$LONGTERM_LOCAL_PATH`` or ``<LONGTERM_HOME>/memory.db``."""
    index: str = "default_app"
    max_record_bytes: int = Field(LOCAL_MAX_RECORD_BYTES, ge=1)
    embed_later: bool = False
    """Save text only and embed in the background (see ``core.embedding``)."""
    timeout: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Seconds a call may wait (for another process's write lock, say); None: reads 30 s, writes
    as long as SQLite's busy timeout (30 s)."""


__all__ = ["LOCAL_MAX_RECORD_BYTES", "LocalConfig"]
