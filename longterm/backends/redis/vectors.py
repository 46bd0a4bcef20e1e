"""The Redis engine's vectors kept whole: records saved without one listed, embedded later, counted.

The seam: ``RedisVectors``, a base of ``RedisBackend``, implements the four primitives of
``core.upkeep`` that ``embeds_later`` names, over a sorted set per namespace, ``ns unembedded``
(``scripts.UNEMBEDDED``: record keys, scored by the store's clock when listed, so oldest first):

- ``SAVE`` lists what it writes without a vector, in the same script call, while this memory
  saves so (``_pends``: ``embed_later``, or ``_embed_pending`` for a memory without the store's
  embedder), dropping the vector a record had for its old words; a record written with its vector
  leaves the list there too. A record is never written without a vector and not listed;
- ``_unembedded`` reads the oldest listed records' texts (a key whose record is gone leaves);
- ``_write_vectors`` is one script call (``WRITE_VECTORS``): each vector written where its
  record still holds the doc it was made from, and taken off the list; a record changed since
  stays listed, a record gone leaves;
- ``_list_unembedded`` lists every record of the index (of a scope) without a vector, from the
  scope sets (``record_keys``), a script call a batch (``LIST_UNEMBEDDED``: ``longterm reembed``);
- ``_count_unembedded`` counts them, and how many are listed (``longterm doctor``).

Meanwhile a record without ``embedding`` is indexed by RediSearch all the same: full text finds it.

Why a sorted set beside the records: the background embedder needs "the next batch of records
without vectors" in one read, and RediSearch cannot query for a missing vector field; scores keep
the order a store's saves came in, and the set lives under the namespace (one Cluster slot).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from typing_extensions import override

from ...core.upkeep import VectorUpkeep
from ...records import Scope
from .scripts import NO_VECTORS, PENDING, UNEMBEDDED, WITH_VECTORS

if TYPE_CHECKING:
    import numpy as np

    from ...core.embedding import Embedding

#: Record keys a listing or a count reads per round trip (and per script call).
KEYS_BATCH = 500
#: KEYS: ``ns unembedded``, then record keys. ARGV: per key, the doc its vector was made from and the
#: vector. Each vector written where the record still holds that doc, and the key taken off the list;
#: a key whose record is gone taken off too; one changed since is left listed. How many were written.
WRITE_VECTORS = """
local n = 0
for i = 2, #KEYS do
  local doc = redis.call('HGET', KEYS[i], 'doc')
  if not doc then redis.call('ZREM', KEYS[1], KEYS[i])
  elseif doc == ARGV[2 * i - 3] then
    redis.call('HSET', KEYS[i], 'embedding', ARGV[2 * i - 2]); redis.call('ZREM', KEYS[1], KEYS[i]); n = n + 1
  end
end
return n
"""
#: KEYS: ``ns unembedded``, then record keys. Lists those of them that exist without a vector (scored by
#: their ``saved`` clock; one listed already keeps its place); how many were listed anew.
LIST_UNEMBEDDED = """
local n = 0
for i = 2, #KEYS do
  if redis.call('HEXISTS', KEYS[i], 'doc') == 1 and redis.call('HEXISTS', KEYS[i], 'embedding') == 0 then
    n = n + redis.call('ZADD', KEYS[1], 'NX', tonumber(redis.call('HGET', KEYS[i], 'saved')) or 0, KEYS[i])
  end
end
return n
"""


def scope_sets(r: Any, ns: str) -> Iterator[bytes]:
    """Every scope set of namespace ``ns`` (``ns s:<tag>``; a tag is a hex digest, so a key whose tail
    starts with a brace is another store's, under a prefix ``ns s:``: ``scripts.namespace``)."""
    start = len(ns) + 2
    for key in r.scan_iter(match=re.sub(r"([\\*?[\]])", r"\\\1", ns) + "s:*", count=1000):
        if key[start : start + 1] != b"{":
            yield key


def record_keys(r: Any, ns: str, sets: Sequence[str | bytes] | None = None) -> Iterator[list[bytes]]:
    """The record keys of the scope sets ``sets`` (None: every one of ``ns``), ``KEYS_BATCH`` at a time:
    exactly this store's records, each in its scope's set (``SAVE`` adds it, an erase removes it)."""
    for members in scope_sets(r, ns) if sets is None else sets:
        keys = list(r.sscan_iter(members, count=1000))
        for i in range(0, len(keys), KEYS_BATCH):
            yield keys[i : i + KEYS_BATCH]


class RedisVectors(VectorUpkeep):
    """The ``embeds_later`` primitives of ``RedisBackend`` (see the module docstring)."""

    if TYPE_CHECKING:  # ``RedisBackend``'s
        _r: Any
        ns: str
        _fill: Any
        _listing: Any
        embedding: Embedding

        def _set(self, scope: Scope) -> str: ...

    _pending = False
    """This memory saves without vectors on a store with an embedder (``_embed_pending``)."""

    @property
    def _unembedded_key(self) -> str:
        return self.ns + UNEMBEDDED

    def _vectors_mode(self, vectors: np.ndarray | None) -> int:
        """``SAVE``'s first argument for a write with ``vectors``: with them; without, listed while this
        memory saves so (``embed_later`` on a store with vectors, or a memory without its embedder)."""
        if vectors is not None:
            return WITH_VECTORS
        later = self.embedding.later and not self.embedding.vectors_off
        return PENDING if self._pending or later else NO_VECTORS

    @override
    def _unembedded(self, limit: int) -> list[tuple[object, str]]:
        """The oldest ``limit`` listed records: ((key, doc), text); keys whose record is gone leave the list."""
        out: list[tuple[object, str]] = []
        start = 0
        while len(out) < limit:
            keys = self._r.zrange(self._unembedded_key, start, start + limit - len(out) - 1)
            if not keys:
                break
            with self._r.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hget(key, "doc")
                docs = pipe.execute()
            gone = [key for key, doc in zip(keys, docs, strict=True) if doc is None]
            if gone:
                self._r.zrem(self._unembedded_key, *gone)
            out += [((key, doc), json.loads(doc)["text"]) for key, doc in zip(keys, docs, strict=True) if doc]
            start += len(keys) - len(gone)
        return out

    @override
    def _write_vectors(self, keys: Sequence[object], vectors: np.ndarray) -> None:
        pairs = cast("list[tuple[bytes, bytes]]", list(keys))  # ``_unembedded``'s (key, doc)
        blobs = vectors.astype("float32", copy=False)
        args = [x for (_, doc), vector in zip(pairs, blobs, strict=True) for x in (doc, vector.tobytes())]
        self._fill(keys=[self._unembedded_key, *(key for key, _ in pairs)], args=args)

    @override
    def _embed_pending(self) -> None:
        self._pending = True

    @override
    def _list_unembedded(self, scope: Scope | None) -> int:
        n = 0
        for batch in record_keys(self._r, self.ns, None if scope is None else [self._set(scope)]):
            n += int(self._listing(keys=[self._unembedded_key, *batch]))
        return n

    @override
    def _count_unembedded(self) -> tuple[int, int]:
        missing = listed = 0
        for batch in record_keys(self._r, self.ns):
            with self._r.pipeline(transaction=False) as pipe:
                for key in batch:
                    pipe.hexists(key, "doc")
                    pipe.hexists(key, "embedding")
                    pipe.zscore(self._unembedded_key, key)
                replies = pipe.execute()
            for doc, vector, score in zip(replies[::3], replies[1::3], replies[2::3], strict=True):
                if doc and not vector:
                    missing += 1
                    listed += score is not None
        return missing, listed
