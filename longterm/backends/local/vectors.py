"""Vectors for the local backend: stored in its SQLite file, searched by brute force.

The seam: ``VectorStore`` writes embeddings next to their records (same transaction as
the record, or later from the ``unembedded`` queue when the engine embeds in the
background); ``matrix(conn, scope)`` gives one scope's vectors, a cached
``retrieval.vector_scan.ScopeVectors``, reloaded only when the scope's version (bumped in
the writing transaction, by any process) has moved. Its SQL is in ``schema``. The store
imports this module only when it has an embedder: numpy loads with the first vector.

Why brute force, and not an ANN graph: one user's memories rarely exceed a few hundred
thousand; a scan needs no index to maintain, sees every write at once, is exact, and with
int8 codes met the latency target (HNSW costs seconds per scope to build and follow).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor

from ...errors import MissingDependencyError

try:
    import numpy as np
except ImportError as exc:  # only an embedder reaches this module, and it refuses first
    raise MissingDependencyError("numpy", "vectors", "Vector search") from exc

from ...retrieval.vector_scan import ScopeVectors
from .schema import BUMP_ROWS, DONE, GET_VERSION, LOAD_SCOPE, PUT_LATE_VECTOR, PUT_VECTOR

#: Scopes whose matrices stay in memory (least recently searched are dropped first).
CACHED_SCOPES = 64


class VectorStore:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._cache: OrderedDict[int, tuple[int, ScopeVectors]] = OrderedDict()
        self._lock = threading.Lock()
        self._scanner: ThreadPoolExecutor | None = None

    def top_soon(self, scoped: ScopeVectors, vector: np.ndarray, n: int) -> Future[list[tuple[int, float]]]:
        """Start ``scoped.top`` on a thread of its own, for the caller to run full text meanwhile.

        Only the int8 scan gains from this: it is single-threaded SIMD work that releases
        the GIL, so it takes the other core while SQLite answers the full-text arm (the
        float32 product already spreads over the cores through BLAS, and small scopes take
        less time than the hand-off).
        """
        if not scoped.quantized:
            done: Future[list[tuple[int, float]]] = Future()
            done.set_result(scoped.top(vector, n))
            return done
        with self._lock:
            if self._scanner is None:
                self._scanner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="longterm-vectors")
            return self._scanner.submit(scoped.top, vector, n)

    def close(self) -> None:
        with self._lock:
            scanner, self._scanner = self._scanner, None
            self._cache.clear()
        if scanner is not None:
            scanner.shutdown(wait=True)

    def forget_after_fork(self) -> None:
        """In a forked child: a cache, lock and scanner thread of its own (the parent's may be mid-use)."""
        self._cache = OrderedDict()
        self._lock = threading.Lock()
        self._scanner = None

    def write(self, conn: sqlite3.Connection, keys: list[tuple[int, str, str]], vectors: np.ndarray) -> None:
        """Vectors of the records at ``keys`` (scope, session, event), in the caller's transaction."""
        blobs = np.asarray(vectors, dtype=np.float32)
        conn.executemany(PUT_VECTOR, [(blobs[i].tobytes(), *key) for i, key in enumerate(keys)])

    def write_late(self, conn: sqlite3.Connection, keys: list[tuple[int, str]], vectors: np.ndarray) -> None:
        """Vectors embedded in the background for ``keys`` (rowid, text), in the caller's transaction."""
        blobs = np.asarray(vectors, dtype=np.float32)
        conn.executemany(PUT_LATE_VECTOR, [(blobs[i].tobytes(), *key) for i, key in enumerate(keys)])
        conn.executemany(DONE, [(rowid, rowid, text) for rowid, text in keys])
        conn.execute(BUMP_ROWS.format(",".join(str(int(rowid)) for rowid, _ in keys)))

    def matrix(self, conn: sqlite3.Connection, scope: int) -> ScopeVectors:
        """The scope's vectors, from the cache while the scope's version holds."""
        row = conn.execute(GET_VERSION, (scope,)).fetchone()
        version = row[0] if row else 0
        with self._lock:
            hit = self._cache.get(scope)
            if hit is not None and hit[0] == version:
                self._cache.move_to_end(scope)
                return hit[1]
        rows = conn.execute(LOAD_SCOPE, (scope,)).fetchall()
        rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        flat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        matrix = flat.reshape(len(rows), self.dim) if rows else np.zeros((0, self.dim), np.float32)
        scoped = ScopeVectors(rowids, matrix)
        with self._lock:
            self._cache[scope] = (version, scoped)
            while len(self._cache) > CACHED_SCOPES:
                self._cache.popitem(last=False)
        return scoped
