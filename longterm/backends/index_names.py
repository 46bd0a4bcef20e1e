"""Which logical index a store belongs to, and the refusal when another one meets it there.

The seam: each engine that derives a store's name from its index name (``core.scope.safe_name``:
Redis's namespace, a Qdrant collection or directory, an OpenSearch index) keeps the index name as
the caller gave it in the store's meta, written when absent (a store made by an earlier release
without it is claimed by the first index that opens it). On open it calls
``refuse_another(engine, where, held, index)`` with what the meta holds (read with what the open
reads anyway): a store that names another index refuses this one.

Why: a name that had to change is the clean part and an 8-hex-digit digest of the original, so
``"a:b"`` and the clean ``"a_b-6783a31e"`` name one store, and two hostile names of one 32-bit
digest are found in a fraction of a second; the names a store already has are kept (existing
stores must open where they are), so the store itself says whose it is.
"""

from __future__ import annotations

from ..errors import ConfigurationError


def refuse_another(engine: str, where: str, held: str | None, index: str) -> None:
    """A ``ConfigurationError`` when the store at ``where`` belongs to index ``held``, not ``index``
    (None: it names none yet)."""
    if held is None or held == index:
        return
    raise ConfigurationError(
        f"index {index!r} cannot use the {engine} store at {where}: that store belongs to index {held!r} "
        "(an index name the engine cannot use as it is becomes a cleaned name and a digest, and these two "
        "became one). Choose another index name (LongTermMemory(index=...) or backend_config['index'])."
    )


__all__ = ["refuse_another"]
