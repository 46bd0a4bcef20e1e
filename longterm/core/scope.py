"""Scope keys: one stable digest of a scope's parts, for engines that want one token per scope.

The seam: ``scope_key(*parts)`` is the only way an engine turns ids into a key, tag or
token. Ids never enter an engine's query syntax: a hex digest does.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache


@lru_cache(maxsize=8192)
def scope_key(*parts: str) -> str:
    """32 hex characters of SHA-256 over ``parts`` as a JSON list (unambiguous, stable)."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]
