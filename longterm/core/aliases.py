"""The types the engine primitives take, named once: a save's records, their vectors, event ids.

The seam: ``Records``, ``Vectors`` (None: no embedder, or embedding later) and ``Ids``, for
``core.engine``'s primitive signatures, the core objects that call them and the engines
that implement them. numpy is named for type checkers only: no engine without vectors loads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from ..records import MemoryRecord

if TYPE_CHECKING:
    import numpy as np

Records: TypeAlias = Sequence[MemoryRecord]
Vectors: TypeAlias = "np.ndarray | None"
Ids: TypeAlias = Sequence[str]
