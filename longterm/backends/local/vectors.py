"""Vectors for the local backend: stored in its SQLite file, searched by brute force.

The seam: ``write`` and ``write_late`` put embeddings next to their records (same transaction
as the record, or later from the ``unembedded`` queue when the engine embeds in the
background); ``VectorStore.matrix(conn, scope)`` gives one scope's vectors, a cached
``retrieval.vector_scan.ScopeVectors``, reloaded only when the scope's version (bumped in
the writing transaction, by any process) has moved; ``nearest`` is the vector arm of a
filtered search, over the cached scope as it is (positions of it, never a matrix of its own).
Its SQL is in ``schema``. The store imports this module only when it has vectors to write or
search: numpy loads with the first vector.

Why a scope's matrix reads only vectors of the store's size: a vector of another dimension
(written before the core refused them, ``core.identity``) must never make a search fail; the
store drops such vectors once on opening and lists their records for new ones (``upgrade``), and
until then, or if one is written by a version that did not refuse them, searches leave it out.

Why brute force, and not an ANN graph: one user's memories rarely exceed a few hundred
thousand; a scan needs no index to maintain, sees every write at once, is exact, and with
int8 codes met the latency target (HNSW costs seconds per scope to build and follow).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from ...errors import MissingDependencyError

try:
    import numpy as np
except ImportError as exc:  # only an embedder reaches this module, and it refuses first
    raise MissingDependencyError("numpy", "vectors", "Vector search") from exc

from ...retrieval.vector_scan import ScopeVectors
from .filtering import Compiled
from .schema import (
    BUMP_ROWS,
    DONE,
    EXPIRED_ROWIDS,
    FILTERED_ROWIDS,
    GET_VERSION,
    LOAD_SCOPE,
    PASSING,
    PASSING_ROWS,
    PUT_LATE_VECTOR,
    PUT_VECTOR,
    row_range,
)

T = TypeVar("T")

#: Scopes whose matrices stay in memory (least recently searched are dropped first).
CACHED_SCOPES = 64


class VectorStore:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._cache: OrderedDict[int, tuple[int, ScopeVectors]] = OrderedDict()
        self._lock = threading.Lock()
        self._scanner: ThreadPoolExecutor | None = None

    def top_soon(
        self, scoped: ScopeVectors, vector: np.ndarray, n: int, without: np.ndarray | None = None
    ) -> Future[list[tuple[int, float]]]:
        """Start ``scoped.top`` (of the rows but those at positions ``without``) on a thread of its
        own, for the caller to run full text meanwhile.

        Only the int8 scan gains from this: it is single-threaded SIMD work that releases
        the GIL, so it takes the other core while SQLite answers the full-text arm (the
        float32 product already spreads over the cores through BLAS, and small scopes take
        less time than the hand-off).
        """
        return self._soon(scoped, scoped.top, vector, n, None, None, without)

    def ranked_soon(self, scoped: ScopeVectors, vector: np.ndarray, n: int) -> Future[Ranked]:
        """``scoped.ranked`` started as ``top_soon`` starts ``top``, as far as ``nearest`` may check
        (``RANKED`` times the rows it needs) for the ``n`` best: a filtered search's candidates, in
        order, checked on the caller's connection."""
        return self._soon(scoped, scoped.ranked, vector, RANKED * scoped.pool(n))

    def _soon(self, scoped: ScopeVectors, fn: Callable[..., T], *args: object) -> Future[T]:
        if not scoped.quantized:
            done: Future[T] = Future()
            done.set_result(fn(*args))
            return done
        with self._lock:
            if self._scanner is None:
                self._scanner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="longterm-vectors")
            return self._scanner.submit(fn, *args)

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

    def expired(
        self, conn: sqlite3.Connection, scoped: ScopeVectors, scope: int, alive_at: float | None
    ) -> np.ndarray | None:
        """The positions in ``scoped`` of the scope's records that expired by ``alive_at`` (None: no
        moment, or none expired: one seek of ``records_expiring``)."""
        if alive_at is None or not len(scoped):
            return None
        base = row_range(scope)[0]
        rowids = _rowids(conn.execute(EXPIRED_ROWIDS, (base, scope, alive_at)), base)
        return scoped.positions(rowids) if len(rowids) else None

    def matrix(self, conn: sqlite3.Connection, scope: int) -> ScopeVectors:
        """The scope's vectors, from the cache while the scope's version holds."""
        row = conn.execute(GET_VERSION, (scope,)).fetchone()
        version = row[0] if row else 0
        with self._lock:
            hit = self._cache.get(scope)
            if hit is not None and hit[0] == version:
                self._cache.move_to_end(scope)
                return hit[1]
        rows = conn.execute(LOAD_SCOPE, (scope, 4 * self.dim)).fetchall()
        rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        flat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        matrix = flat.reshape(len(rows), self.dim) if rows else np.zeros((0, self.dim), np.float32)
        scoped = ScopeVectors(rowids, matrix)
        with self._lock:
            self._cache[scope] = (version, scoped)
            while len(self._cache) > CACHED_SCOPES:
                self._cache.popitem(last=False)
        return scoped


def write(conn: sqlite3.Connection, keys: list[tuple[int, str, str]], vectors: np.ndarray) -> None:
    """Vectors of the records at ``keys`` (scope, session, event), in the caller's transaction."""
    blobs = np.asarray(vectors, dtype=np.float32)
    conn.executemany(PUT_VECTOR, [(blobs[i].tobytes(), *key) for i, key in enumerate(keys)])


def write_late(conn: sqlite3.Connection, keys: list[tuple[int, str]], vectors: np.ndarray) -> None:
    """Vectors embedded in the background for ``keys`` (rowid, text), in the caller's transaction."""
    blobs = np.asarray(vectors, dtype=np.float32)
    conn.executemany(PUT_LATE_VECTOR, [(blobs[i].tobytes(), *key) for i, key in enumerate(keys)])
    conn.executemany(DONE, [(rowid, rowid, text) for rowid, text in keys])
    conn.execute(BUMP_ROWS.format(",".join(str(int(rowid)) for rowid, _ in keys)))


#: How far down the scan's ranking ``nearest`` may check, in multiples of the rows it needs
#: (fewer passing than that: every passing rowid is read instead).
RANKED = 8
#: The scan's scores of every row, and the positions of its best, best first (``ScopeVectors.ranked``).
Ranked = tuple[np.ndarray, np.ndarray]
#: What checking one candidate costs against reading one passing rowid from the filter's index
#: (a random probe against a sequential read, measured at 100k records): by its values alone, and
#: with its record's row. ``nearest`` reads every passing rowid once that is the cheaper way.
CHECK_COST = 10
CHECK_ROW_COST = 30


def _rowids(rows: sqlite3.Cursor, base: int) -> np.ndarray:
    """The rowids of ``FILTERED_ROWIDS``: one text of them, parsed at once (a row at a time through
    Python cost three times as much at 50k rows)."""
    text = rows.fetchone()[0]
    return np.fromstring(text, sep=",", dtype=np.int64) + base if text else np.zeros(0, dtype=np.int64)


def nearest(
    conn: sqlite3.Connection,
    scoped: ScopeVectors,
    vector: np.ndarray,
    ranked: Ranked,
    n: int,
    scope: int,
    passing: Compiled,
    dead: np.ndarray | None = None,
) -> list[tuple[int, float]]:
    """The ``n`` best (rowid, cosine) of ``scoped`` among the records that pass ``passing``: what
    ``scoped.top(vector, n, among=<every passing row>)`` gives (``ranked``: ``ranked_soon``'s);
    ``dead``: positions left out whether they pass or not (``VectorStore.expired``).

    The best by the scan's ranking are checked first, twice as many as must pass, then as many more
    as the rate so far says are needed; once reading every passing rowid from the filter's index
    costs less than checking on (few pass), the scan runs over those alone.
    """
    approx, order = ranked
    size = len(scoped)
    if not size or n <= 0:
        return []
    need = scoped.pool(n)
    alive = None
    if dead is not None and len(dead):
        alive = np.ones(size, dtype=bool)
        alive[dead] = False
    cost = CHECK_ROW_COST if passing.columns else CHECK_COST
    check = PASSING_ROWS if passing.columns else PASSING
    statement, extra = check.format(where=passing.where), ((scope,) if passing.columns else ())
    kept: list[np.ndarray] = []
    done, found, chunk = 0, 0, 2 * need
    while done < len(order):
        at = order[done : done + chunk]
        done += len(at)
        if alive is not None:
            at = at[alive[at]]
        at = at[np.argsort(scoped.rowids[at])]  # in rowid order: the probes walk the index forwards
        rowids = scoped.rowids[at]
        args = (json.dumps(rowids.tolist()), *extra, *passing.where_args)
        ok = np.fromiter((r[0] for r in conn.execute(statement, args)), dtype=np.int64)
        kept.append(at[np.isin(rowids, ok, assume_unique=True)])
        found += len(kept[-1])
        if found >= need or done == size:
            among = np.concatenate(kept)
            if len(among) > need:
                among = among[np.argpartition(approx[among], len(among) - need)[len(among) - need :]]
            return scoped.top(vector, n, among, approx)
        rate = (found + 1) / (done + 2)
        more = (need - found) / rate  # checks still expected
        if cost * more > size * rate:  # more than reading every passing rowid
            break
        chunk = int(1.25 * more) + 16
    base = row_range(scope)[0]
    rows = conn.execute(FILTERED_ROWIDS.format(rows=passing.rows), (base, *passing.rows_args))
    among = scoped.positions(_rowids(rows, base))
    return scoped.top(vector, n, among if alive is None else among[alive[among]], approx)
