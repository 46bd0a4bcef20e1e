"""A Redis store written by longterm 0.1, moved to the current layout when it is opened.

The seam: ``RedisBackend._open`` calls ``redis_v1(client, ns)``: where the namespace still
has the index of 0.1 (``ns idx``, where RediSearch stemmed the text), every record is indexed
again by our terms, then that index is dropped; safe against another process doing the same
(the terms are the same).

Why apart from the engine: an upgrade reads a layout the engine writes no more, and goes
when that version is no longer supported.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from ...retrieval.text import index_terms

if TYPE_CHECKING:
    from redis import Redis

#: KEYS: record keys; ARGV: their terms. Sets them on the records that still exist.
REDIS_RETERM = """
for i, k in ipairs(KEYS) do if redis.call('EXISTS', k) == 1 then redis.call('HSET', k, 'terms', ARGV[i]) end end
"""
#: Records re-indexed per script call.
REDIS_BATCH = 500


def redis_v1(r: Redis, ns: str) -> None:
    """Index every record by our terms, then drop ``ns idx``: the index of 0.1, where RediSearch stemmed the text."""
    if (old := f"{ns}idx".encode()) not in r.execute_command("FT._LIST"):
        return
    reterm = r.register_script(REDIS_RETERM)
    keys = list(r.scan_iter(match=re.sub(r"([\\*?[\]])", r"\\\1", ns) + "m:*", count=1000))
    for i in range(0, len(keys), REDIS_BATCH):
        batch = keys[i : i + REDIS_BATCH]
        with r.pipeline(transaction=False) as pipe:
            for key in batch:
                pipe.hget(key, "doc")
            docs = pipe.execute()
        found = [(key, json.loads(doc)["text"]) for key, doc in zip(batch, docs, strict=True) if doc is not None]
        reterm(keys=[key for key, _ in found], args=[" ".join(index_terms(text)) for _, text in found])
    r.execute_command("FT.DROPINDEX", old)
