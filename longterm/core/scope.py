"""Scope keys and store names: the one digest of a scope's parts, and names an engine accepts.

The seam: ``scope_key(*parts)`` is the only way an engine turns ids into a key, tag or
token; ``safe_name`` the only way it turns an index name into a key segment, index or
collection name. Ids never enter an engine's query syntax: a hex digest does. A name
that had to change ends in a digest of the original, so two names never share a store.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache


@lru_cache(maxsize=8192)
def scope_key(*parts: str) -> str:
    """32 hex characters of SHA-256 over ``parts`` as a JSON list (unambiguous, stable)."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def safe_name(name: str, allowed: str, *, sep: str = "-", limit: int | None = None, lower: bool = False) -> str:
    """``name`` with characters outside the regex class ``allowed`` replaced by ``_`` (lower-cased
    first with ``lower``), cut to ``limit``; a changed name ends in ``sep`` and a digest of ``name``."""
    safe = re.sub(f"[^{allowed}]", "_", name.lower() if lower else name)
    if lower:  # index names (OpenSearch) cannot start with these
        safe = safe.lstrip("_-+") or "longterm"
    if safe == name and (limit is None or len(safe) <= limit):
        return safe
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe[: None if limit is None else limit - len(digest) - len(sep)]}{sep}{digest}"
