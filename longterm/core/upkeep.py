"""A store's vectors kept whole: the primitives of records without vectors, and ``reembed``.

The seam: ``VectorUpkeep``, a base of ``Engine`` (as ``core.listing.Listing`` is), holds the
defaults of the primitives an engine declaring ``embeds_later`` implements (``_unembedded``,
``_write_vectors``, ``_embed_pending``, ``_list_unembedded``; optionally ``_count_unembedded``) and
the one an engine declaring ``embeds_itself`` does (``_own_embedder``), and turns them into the
contract: ``embed_backlog()`` (embed now what the store lists as saved without vectors),
``reembed(scope)`` (list every record without a vector first: ``longterm reembed``) and
``unembedded_counts()`` (``longterm doctor``); ``embedder`` and ``vectors_off`` say what the
engine's ``Embedding`` (``core.embedding``) holds.

Why apart from ``Engine``: one job (no record of a store with an embedder stays without its
vector), and the engine core stays a size one can read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..records import Scope
from ..retrieval.embedders import Embedder

if TYPE_CHECKING:
    import numpy as np

    from .embedding import Embedding
    from .runner import Runner


class VectorUpkeep:
    """The primitives of records without vectors, ``embed_backlog`` and ``reembed`` (module docstring)."""

    if TYPE_CHECKING:  # ``Engine``'s, which this is a base of
        embedding: Embedding
        runner: Runner

    @property
    def embedder(self) -> Embedder | None:
        """The store's embedder (None: full text only); ``core.embedding`` runs it."""
        return self.embedding.embedder

    @property
    def vectors_off(self) -> str | None:
        """Why this store answers from full text although an embedder is configured."""
        return self.embedding.vectors_off

    # -- primitives: blocking, run on the engine's threads ------------------------------------

    def _unembedded(self, limit: int) -> list[tuple[object, str]]:
        """With ``embeds_later``: at most ``limit`` (key, text) saved without a vector, oldest first."""
        raise NotImplementedError

    def _write_vectors(self, keys: Sequence[object], vectors: np.ndarray) -> None:
        """With ``embeds_later``: ``vectors[i]`` for ``keys[i]``, off the list, in one step (changed ones left)."""
        raise NotImplementedError

    def _embed_pending(self) -> None:
        """With ``embeds_later``: from now on, list what this engine writes as saved without a vector."""
        raise NotImplementedError

    def _list_unembedded(self, scope: Scope | None) -> int:
        """With ``embeds_later``: list every record of this index (of ``scope``) without a vector; how many."""
        raise NotImplementedError

    def _count_unembedded(self) -> tuple[int, int] | None:
        """Optional, with ``embeds_later``: how many records of this index have no vector, and how many
        of them are listed (None: not counted here; the doctor reads a local store's file itself)."""
        return None

    def _own_embedder(self) -> Embedder | None:
        """With ``embeds_itself``: the embedder the engine embeds with, once open (its dimension is checked)."""
        return None

    # -- the contract ------------------------------------------------------------------------

    async def embed_backlog(self) -> int:
        """With ``embeds_later``: embed now whatever is listed as saved without vectors (as the background
        thread does on its own; for scripts and tests that need every vector); how many."""
        return await self.embedding.backlog()

    async def reembed(self, scope: Scope | None = None) -> int:
        """With ``embeds_later``: give every record of this index (of ``scope``) without a vector its
        vector now, with this memory's embedder or the store's built-in one; how many (``core.embedding``)."""
        return await self.embedding.refill(scope)

    async def unembedded_counts(self) -> tuple[int, int] | None:
        """How many records of this index have no vector, and how many of them wait for one (listed);
        None where the engine does not count them. No deadline: it reads every record (an operator's
        command), each round trip within the engine's own timeout."""
        return await self.runner.run_unbounded("counting memories without vectors", self._count_unembedded)
