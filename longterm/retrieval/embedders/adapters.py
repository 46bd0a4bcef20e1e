"""Our embedders in the shapes other libraries expect of an embedding model.

The seam: ``Mem0Embedding(embedder)`` is what mem0's ``Memory`` takes as its
``embedding_model``: the mem0 engine plugs it in, so mem0's vectors are ours (the store
remembers which embedder wrote them, as on every engine).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .base import Embedder, Kind


class Mem0Embedding:
    """A longterm Embedder as mem0's embedding model (``embed(text, memory_action)``). The mem0
    engine calls it on its own thread and it embeds right there: embedders are blocking."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.config = type("Cfg", (), {"embedding_dims": embedder.dim})()
        self._ready: dict[str, list[float]] = {}

    @contextmanager
    def ahead(self, texts: list[str]) -> Iterator[None]:
        """Embed ``texts`` in one batch now (several times faster); mem0 asks for them one by one."""
        self._ready = dict(zip(texts, self.embed_batch(texts), strict=True)) if texts else {}
        try:
            yield
        finally:
            self._ready = {}

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        if memory_action != "search" and text in self._ready:
            return self._ready[text]
        return self.embed_batch([text], memory_action)[0]

    def embed_batch(self, texts: list[str], memory_action: str | None = None) -> list[list[float]]:
        kind: Kind = "query" if memory_action == "search" else "passage"
        return self.embedder.embed(list(texts), kind=kind).tolist()
