"""The embedded default backend: one SQLite file, FTS5 BM25, no service, no API key.

The seam: ``LocalBackend(path)`` implements the backend contract (``base.py``) over a
single SQLite file that also holds the ledger, so one file is the whole memory.

Why it is shaped so:
- Schema as named constants; the scope is in every statement's WHERE clause, and also an
  FTS5 column (a per-scope digest token), so a search intersects the query's posting
  lists with the user's own instead of ranking every user's matches first. (Hybrid search
  drops the token when one user holds over a quarter of the file: intersecting with such
  a long list costs more than it saves; the WHERE clause still keeps the scope.)
- With an embedder, vectors live in the same file (``local_vectors.py``) and the two
  arms are fused on ids before any record is parsed.
- Text goes through ``retrieval.text.segment`` (CJK bigrams) and FTS5's own C tokenizer
  (``porter unicode61``: stemming, case and accent folding), several times faster than
  stemming in Python. ``terms`` is stored only where segmenting changed the text. The
  FTS5 query is built only from ``query_terms`` (letters and digits), each quoted, so no
  user text is ever FTS5 syntax.
- A record whose content is just its text is stored once (``content`` NULL), which
  halves the file for the default policy.
- Upserts skip rows whose digest did not change, so replays cost a lookup, not a rewrite
  of the full-text index.
- WAL plus ``BEGIN IMMEDIATE`` and a 30 s busy timeout make several processes safe.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Optional

from pydantic import ConfigDict

from .._sqlite import SQLiteWorker, write_transaction
from ..config import env, parse_backend_config
from ..errors import InvalidInputError
from ..ledger import LEDGER_SCHEMA, SQLiteLedger
from ..records import Hit, MemoryRecord, Scope, content_digest
from ..retrieval.embedders import Embedder
from ..retrieval.hybrid import Hybrid, HybridSettings
from ..retrieval.text import query_terms, segment
from .local_vectors import BUMP_VERSION, VECTOR_SCHEMA, VectorStore

log = logging.getLogger("longterm.local")

#: Largest record accepted (text plus content, UTF-8 bytes); bigger ones are refused whole.
MAX_RECORD_BYTES = 16 * 1024 * 1024

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    rowid       INTEGER PRIMARY KEY,
    index_name  TEXT NOT NULL,
    id          TEXT NOT NULL,
    app_name    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    author      TEXT NOT NULL,
    role        TEXT NOT NULL,
    event_types TEXT NOT NULL,
    text        TEXT NOT NULL,
    content     TEXT,
    timestamp   REAL NOT NULL,
    metadata    TEXT NOT NULL,
    digest      TEXT NOT NULL,
    scope_key   TEXT NOT NULL,
    terms       TEXT,
    UNIQUE (index_name, id)
);
CREATE INDEX IF NOT EXISTS memories_scope ON memories (index_name, app_name, user_id, timestamp);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5 (
    scope_key, terms, content='memories', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, scope_key, terms) VALUES (new.rowid, new.scope_key, coalesce(new.terms, new.text));
END;
CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, scope_key, terms)
    VALUES ('delete', old.rowid, old.scope_key, coalesce(old.terms, old.text));
END;
CREATE TRIGGER IF NOT EXISTS memories_au AFTER UPDATE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, scope_key, terms)
    VALUES ('delete', old.rowid, old.scope_key, coalesce(old.terms, old.text));
    INSERT INTO memories_fts (rowid, scope_key, terms) VALUES (new.rowid, new.scope_key, coalesce(new.terms, new.text));
END;
"""

COLUMNS = "id, app_name, user_id, session_id, event_id, author, role, event_types, text, content, timestamp, metadata"

UPSERT = f"""
INSERT INTO memories (index_name, {COLUMNS}, digest, scope_key, terms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (index_name, id) DO UPDATE SET
    author = excluded.author, role = excluded.role, event_types = excluded.event_types,
    text = excluded.text, content = excluded.content, timestamp = excluded.timestamp,
    metadata = excluded.metadata, digest = excluded.digest, terms = excluded.terms
WHERE memories.digest != excluded.digest
"""

_M_COLUMNS = ", ".join("m." + c.strip() for c in COLUMNS.split(","))
SEARCH = f"""
SELECT m.rowid, {_M_COLUMNS}, bm25(memories_fts, 0.0, 1.0) AS rank
FROM memories_fts JOIN memories AS m ON m.rowid = memories_fts.rowid
WHERE memories_fts MATCH ? AND m.index_name = ? AND m.app_name = ? AND m.user_id = ?
ORDER BY rank LIMIT ?
"""

SEARCH_IDS = """
SELECT m.rowid, bm25(memories_fts, 0.0, 1.0) AS rank
FROM memories_fts JOIN memories AS m ON m.rowid = memories_fts.rowid
WHERE memories_fts MATCH ? AND m.index_name = ? AND m.app_name = ? AND m.user_id = ?
ORDER BY rank LIMIT ?
"""
BY_ROWID = f"SELECT m.rowid, {_M_COLUMNS} FROM memories AS m WHERE m.rowid = ? AND m.index_name = ? AND m.app_name = ? AND m.user_id = ?"
MAX_ROWID = "SELECT max(rowid) FROM memories"
COUNT = "SELECT count(*) FROM memories WHERE index_name = ? AND app_name = ? AND user_id = ?"
SCAN = f"""
SELECT rowid, {COLUMNS} FROM memories
WHERE index_name = ? AND app_name = ? AND user_id = ? AND rowid > ?
ORDER BY rowid LIMIT ?
"""
DELETE_ALL = "DELETE FROM memories WHERE index_name = ? AND app_name = ? AND user_id = ?"
DELETE_ONE = "DELETE FROM memories WHERE index_name = ? AND app_name = ? AND user_id = ? AND id = ?"
SCOPES = "SELECT app_name, user_id, count(*) FROM memories WHERE index_name = ? GROUP BY app_name, user_id"


class LocalConfig(HybridSettings):
    model_config = ConfigDict(extra="forbid")

    path: Optional[str] = None
    """SQLite file; default ``$LONGTERM_LOCAL_PATH`` or ``<LONGTERM_HOME>/memory.db``."""
    index: str = "default_app"
    max_record_bytes: int = MAX_RECORD_BYTES


@lru_cache(maxsize=4096)
def _scope_key(index: str, app_name: str, user_id: str) -> str:
    """One FTS5 token per (index, app, user): letters and digits only, so never syntax."""
    return "s" + hashlib.sha256(json.dumps([index, app_name, user_id]).encode()).hexdigest()[:32]


def _row_to_record(row: Sequence[Any]) -> MemoryRecord:
    return MemoryRecord(
        id=row[0],
        app_name=row[1],
        user_id=row[2],
        session_id=row[3],
        event_id=row[4],
        author=row[5],
        role=row[6],
        event_types=json.loads(row[7]),
        text=row[8],
        content=json.loads(row[9]) if row[9] is not None else {"role": row[6] or "user", "parts": [{"text": row[8]}]},
        timestamp=row[10],
        metadata=json.loads(row[11]),
    )


def fts_query(query: str) -> str:
    """An FTS5 expression matching any of the query's terms; '' when it has none."""
    terms = query_terms(query, stem=False)
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


class LocalBackend:
    name: ClassVar[str] = "local"

    def __init__(
        self,
        path: str | Path,
        *,
        index: str = "default_app",
        max_record_bytes: int = MAX_RECORD_BYTES,
        **hybrid: Any,
    ):
        self.path = Path(path).expanduser()
        self.index = index
        self.max_record_bytes = max_record_bytes
        self.hybrid = Hybrid(**hybrid)
        self.embedder: Optional[Embedder] = self.hybrid.embedder
        self._vectors = VectorStore(index, self.embedder.id, self.embedder.dim) if self.embedder else None
        self._checked = False
        self._worker = SQLiteWorker(self.path, SCHEMA + VECTOR_SCHEMA + LEDGER_SCHEMA)

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> "LocalBackend":
        cfg = parse_backend_config(LocalConfig, config, cls.name)
        path = cfg.path or env("LONGTERM_LOCAL_PATH") or str(root / "memory.db")
        return cls(path, index=cfg.index, max_record_bytes=cfg.max_record_bytes, **cfg.hybrid_kwargs())

    def _check_vectors(self, conn: sqlite3.Connection) -> None:
        if self._vectors is not None and not self._checked:
            self._vectors.check(conn)
            self._checked = True

    def make_ledger(self) -> SQLiteLedger:
        return SQLiteLedger(worker=self._worker)

    def _row(self, r: MemoryRecord) -> tuple:
        content = None if r.text_only_content() else json.dumps(r.content, ensure_ascii=False)
        metadata = json.dumps(r.metadata, ensure_ascii=False)
        types = json.dumps(r.event_types)
        terms = segment(r.text)
        size = len(r.text.encode("utf-8")) + len((content or "").encode("utf-8"))
        if size > self.max_record_bytes:
            raise InvalidInputError(
                f"event {r.event_id!r} of session {r.session_id!r} is {size} bytes, over the local "
                f"backend's limit of {self.max_record_bytes}; raise backend_config['max_record_bytes'] "
                "or exclude such events with the auto-save policy."
            )
        return (
            self.index, r.id, r.app_name, r.user_id, r.session_id, r.event_id, r.author, r.role,
            types, r.text, content, r.timestamp, metadata,
            content_digest(r.author, r.role, types, r.text, content, r.timestamp, metadata),
            _scope_key(self.index, r.app_name, r.user_id), terms if terms != r.text else None,
        )  # fmt: skip

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        if not records:
            return
        vectors = None
        if self.embedder is not None:
            vectors = await self.embedder.embed([r.text for r in records], kind="passage")
        scopes = {(r.app_name, r.user_id) for r in records}

        def w(conn: sqlite3.Connection) -> None:
            rows = [self._row(r) for r in records]  # here, off the event loop
            with write_transaction(conn):
                conn.executemany(UPSERT, rows)
                if self._vectors is not None and vectors is not None:
                    self._check_vectors(conn)
                    self._vectors.write(conn, [r.id for r in records], vectors)
                conn.executemany(BUMP_VERSION, [(self.index, a, u) for a, u in scopes])

        await self._worker.run(w)

    async def search(
        self,
        scope: Scope,
        query: str,
        top_k: int,
        *,
        query_vector: Optional[Sequence[float]] = None,
    ) -> list[Hit]:
        match = fts_query(query)
        if not match:
            return []
        expr = f'scope_key : "{_scope_key(self.index, scope.app_name, scope.user_id)}" AND terms : ({match})'
        depth = self.hybrid.depth(top_k)
        params = (expr, self.index, scope.app_name, scope.user_id, depth)

        def fulltext(conn: sqlite3.Connection) -> list[tuple[int, MemoryRecord, float]]:
            return [(row[0], _row_to_record(row[1:-1]), -row[-1]) for row in conn.execute(SEARCH, params)]

        if self._vectors is None:
            rows = await self._worker.run(fulltext)
            return [Hit(record=rec, score=s, arms={"fulltext": s}) for _, rec, s in rows]

        qv, degraded = await self.hybrid.query_vector(query, query_vector, f"local {self.path}")
        vectors = self._vectors

        def hybrid(conn: sqlite3.Connection) -> list[Hit]:
            # Fuse on ids and scores first; read and parse only the records that survive.
            # A large scope's int8 scan runs on another thread while SQLite does full text.
            self._check_vectors(conn)
            scoped = vectors.matrix(conn, scope.app_name, scope.user_id)
            pending = vectors.top_soon(scoped, qv, depth) if qv is not None else None
            text_params = params
            if 4 * len(scoped) > (conn.execute(MAX_ROWID).fetchone()[0] or 0):
                # This user holds much of the file: intersecting with their scope token costs
                # more than it saves; the SQL filter alone keeps the search in scope.
                text_params = (f"terms : ({match})", *params[1:])
            text_rows = [(r[0], -r[1]) for r in conn.execute(SEARCH_IDS, text_params)]
            near = pending.result() if pending is not None else []
            fused = self.hybrid.fuse({"fulltext": text_rows, "vector": near})
            hits = []
            for rowid, score, arms in fused:
                row = conn.execute(BY_ROWID, (rowid, self.index, scope.app_name, scope.user_id)).fetchone()
                if row is None:  # deleted since the matrix was cached
                    continue
                extra = {"degraded": degraded} if degraded else {}
                hits.append(Hit(record=_row_to_record(row[1:]), score=score, arms=arms, extra=extra))
                if len(hits) == top_k:
                    break
            return hits

        return await self._worker.run(hybrid)

    async def delete(self, scope: Scope, ids: Optional[Sequence[str]] = None) -> int:
        base = (self.index, scope.app_name, scope.user_id)

        def w(conn: sqlite3.Connection) -> int:
            with write_transaction(conn):
                conn.execute(BUMP_VERSION, base)
                if ids is None:
                    return conn.execute(DELETE_ALL, base).rowcount
                return sum(conn.execute(DELETE_ONE, (*base, i)).rowcount for i in ids)

        return await self._worker.run(w)

    async def count(self, scope: Scope) -> int:
        params = (self.index, scope.app_name, scope.user_id)
        return await self._worker.run(lambda conn: conn.execute(COUNT, params).fetchone()[0])

    async def scan(self, scope: Scope, batch_size: int = 500) -> AsyncIterator[MemoryRecord]:
        last = 0
        while True:
            params = (self.index, scope.app_name, scope.user_id, last, batch_size)
            rows = await self._worker.run(lambda conn, p=params: conn.execute(SCAN, p).fetchall())
            for row in rows:
                yield _row_to_record(row[1:])
            if len(rows) < batch_size:
                return
            last = rows[-1][0]

    async def scopes(self) -> list[tuple[str, str, int]]:
        return await self._worker.run(lambda conn: conn.execute(SCOPES, (self.index,)).fetchall())

    async def close(self) -> None:
        await self._worker.close()
        if self._vectors is not None:
            self._vectors.close()
