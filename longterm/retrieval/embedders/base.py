"""What an embedder is: the ``Embedder`` protocol, the two kinds of text, normalisation.

The seam: an ``Embedder`` has ``id`` (model and settings, stable: stores remember it and
refuse vectors of another id), ``dim``, and a blocking, thread-safe ``embed(texts, kind=)``
returning a float32 array of shape (len(texts), dim), L2-normalised. ``kind`` is
"passage" for what is stored and "query" for what is asked: some models (E5) encode the
two differently. The engine core runs ``embed`` off the event loop in batches, so no
embedder knows about loops; one with connections to release has ``close()``.

Why numpy is imported where vectors are made: it is no dependency of the text engine
(``pip install longterm`` leaves it out), so a memory without an embedder never loads it,
and every embedder calls ``need_numpy`` when it is made: without numpy, configuring one is a
``MissingDependencyError`` naming the extra to install, never an ``ImportError`` at the first
vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ...errors import require

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


def need_numpy(purpose: str, extra: str = "vectors") -> None:
    """Raise ``MissingDependencyError`` (naming ``extra``) unless numpy can be imported: every
    embedder's vectors are numpy arrays, and numpy comes only with the extras that use them."""
    require("numpy", package="numpy", extra=extra, purpose=purpose)


def normalize(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as float32 rows of length 1 (a zero row stays zero)."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: np.ndarray = vectors / np.maximum(norms, 1e-12)
    return unit
