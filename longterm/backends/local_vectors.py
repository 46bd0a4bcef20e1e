"""Vectors for the local backend: stored in its SQLite file, searched with numpy.

The seam: ``VectorStore`` writes embeddings next to their records (same transaction as
the record); ``matrix(conn, app, user)`` gives one scope's vectors and ``top(...)`` the
nearest of them.

Why brute force: one user's memories rarely exceed a few hundred thousand; a float32
matrix product over 100k x 384 takes a few milliseconds, needs no index to maintain and
is exact. Each scope's matrix is cached in memory and reloaded only when that scope's
version (bumped in the writing transaction, by any process) has moved, so a second
process's writes are seen at the next search.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
import numpy as np

from ..errors import ConfigurationError

VECTOR_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    rowid     INTEGER PRIMARY KEY REFERENCES memories (rowid) ON DELETE CASCADE,
    embedding BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS scope_versions (
    index_name TEXT NOT NULL,
    app_name   TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    version    INTEGER NOT NULL,
    PRIMARY KEY (index_name, app_name, user_id)
) WITHOUT ROWID;
"""

BUMP_VERSION = """
INSERT INTO scope_versions (index_name, app_name, user_id, version) VALUES (?, ?, ?, 1)
ON CONFLICT (index_name, app_name, user_id) DO UPDATE SET version = version + 1
"""
GET_VERSION = "SELECT version FROM scope_versions WHERE index_name = ? AND app_name = ? AND user_id = ?"
PUT_VECTOR = "INSERT OR REPLACE INTO vectors (rowid, embedding) SELECT rowid, ? FROM memories WHERE index_name = ? AND id = ?"
LOAD_SCOPE = """
SELECT v.rowid, v.embedding FROM vectors AS v JOIN memories AS m ON m.rowid = v.rowid
WHERE m.index_name = ? AND m.app_name = ? AND m.user_id = ?
"""

#: Scopes whose matrices stay in memory (least recently searched are dropped first).
CACHED_SCOPES = 64


class VectorStore:
    def __init__(self, index: str, embedder_id: str, dim: int) -> None:
        self.index = index
        self.embedder_id = embedder_id
        self.dim = dim
        self._cache: OrderedDict[tuple[str, str], tuple[int, np.ndarray, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, conn: sqlite3.Connection) -> None:
        """Remember the embedder on first use; refuse another one later."""
        key = f"embedder:{self.index}"
        row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (key,)).fetchone()
        want = f"{self.embedder_id}|{self.dim}"
        if row is None:
            conn.execute("INSERT OR IGNORE INTO store_meta (key, value) VALUES (?, ?)", (key, want))
        elif row[0] != want:
            raise ConfigurationError(
                f"the local store's index {self.index!r} holds vectors of embedder {row[0].split('|')[0]!r}, "
                f"not of {self.embedder_id!r}. Vectors of different embedders never mix: use another "
                "index or path for this embedder, or keep the embedder the store was built with."
            )

    def write(self, conn: sqlite3.Connection, ids: list[str], vectors: np.ndarray) -> None:
        conn.executemany(PUT_VECTOR, [(vectors[i].astype(np.float32).tobytes(), self.index, rid) for i, rid in enumerate(ids)])

    def bump(self, conn: sqlite3.Connection, scopes: set[tuple[str, str]]) -> None:
        conn.executemany(BUMP_VERSION, [(self.index, a, u) for a, u in scopes])

    def matrix(self, conn: sqlite3.Connection, app: str, user: str) -> tuple[np.ndarray, np.ndarray]:
        """The scope's (rowids, matrix), from the cache while the scope's version holds."""
        row = conn.execute(GET_VERSION, (self.index, app, user)).fetchone()
        version = row[0] if row else 0
        with self._lock:
            hit = self._cache.get((app, user))
            if hit is not None and hit[0] == version:
                self._cache.move_to_end((app, user))
                return hit[1], hit[2]
        rows = conn.execute(LOAD_SCOPE, (self.index, app, user)).fetchall()
        rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), self.dim) if rows else np.zeros((0, self.dim), np.float32)
        with self._lock:
            self._cache[(app, user)] = (version, rowids, matrix)
            while len(self._cache) > CACHED_SCOPES:
                self._cache.popitem(last=False)
        return rowids, matrix

    @staticmethod
    def top(rowids: np.ndarray, matrix: np.ndarray, vector: np.ndarray, n: int) -> list[tuple[int, float]]:
        """The ``n`` best (rowid, cosine) pairs, best first."""
        if not len(rowids):
            return []
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        n = min(n, len(scores))
        top = np.argpartition(scores, len(scores) - n)[len(scores) - n :]
        top = top[np.argsort(-scores[top])]
        return [(int(rowids[i]), float(scores[i])) for i in top]
