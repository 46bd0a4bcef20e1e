"""What an embedder is: the ``Embedder`` protocol, the two kinds of text, normalisation.

The seam: an ``Embedder`` has ``id`` (model and settings, stable: stores remember it and
refuse vectors of another id), ``dim``, and a blocking, thread-safe ``embed(texts, kind=)``
returning a float32 array of shape (len(texts), dim), L2-normalised. ``kind`` is
"passage" for what is stored and "query" for what is asked: some models (E5) encode the
two differently. The engine core runs ``embed`` off the event loop in batches, so no
embedder knows about loops; one with connections to release has ``close()``. numpy is
imported where vectors are made, so a memory without an embedder never loads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

Kind = Literal["passage", "query"]


@runtime_checkable
class Embedder(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> np.ndarray: ...


def normalize(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as float32 rows of length 1 (a zero row stays zero)."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: np.ndarray = vectors / np.maximum(norms, 1e-12)
    return unit
