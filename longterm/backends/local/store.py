"""The embedded default backend: one SQLite file, FTS5 BM25, no service, no API key.

The seam: ``LocalBackend(path)`` implements the engine primitives (``core.engine``) over a
single SQLite file that also holds the ledger (per index, written in the same
transaction as the records), so one file is the whole memory and a save lands whole.

Why it is shaped so:
- Schema as named constants; the scope is in every statement's WHERE clause, and also an
  FTS5 column (a per-scope digest token), so a search intersects the query's posting
  lists with the user's own instead of ranking every user's matches first. (Hybrid search
  drops the token when one user holds over a quarter of the file: intersecting with such
  a long list costs more than it saves; the WHERE clause still keeps the scope.)
- With an embedder, vectors live in the same file (``vectors.py``) and the two arms are
  fused on row ids before any record is parsed (a native ``_search``).
- Text goes through ``retrieval.text.segment`` (CJK bigrams) and FTS5's own C tokenizer
  (``porter unicode61``: stemming, case and accent folding), several times faster than
  stemming in Python. ``terms`` is stored only where segmenting changed the text. The
  FTS5 query is built only from ``query_terms`` (letters and digits), each quoted, so no
  user text is ever FTS5 syntax.
- A record whose content is just its text is stored once (``content`` NULL), which
  halves the file for the default policy.
- Upserts skip rows whose digest did not change, so replays cost a lookup, not a rewrite
  of the full-text index.
- WAL plus ``BEGIN IMMEDIATE`` and a 30 s busy timeout make several processes safe
  (``_sqlite.connect`` retries the first open, which SQLite's busy handler does not cover).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import ConfigDict

from ..._sqlite import SQLITE_RULES, connect, write_transaction
from ...config import env, parse_backend_config
from ...core.engine import Engine, Query
from ...core.errors import Rule
from ...core.scope import scope_key
from ...errors import InvalidInputError
from ...records import Hit, MemoryRecord, Scope, content_digest
from ...retrieval.hybrid import HybridSettings
from ...retrieval.text import segment
from .schema import (
    BY_ROWID,
    COUNT,
    DELETE_ALL,
    DELETE_ONE,
    DELETE_SESSION,
    GET_META,
    INSERT_SAVED,
    LEDGER_SCHEMA,
    MAX_ROWID,
    SCAN,
    SCHEMA,
    SCOPES,
    SEARCH,
    SEARCH_IDS,
    SELECT_SAVED,
    SET_META,
    UPSERT,
)
from .vectors import BUMP_VERSION, VECTOR_SCHEMA, VectorStore

log = logging.getLogger("longterm.local")

#: Largest record accepted (text plus content, UTF-8 bytes); bigger ones are refused whole.
MAX_RECORD_BYTES = 16 * 1024 * 1024


class LocalConfig(HybridSettings):
    model_config = ConfigDict(extra="forbid")

    path: str | None = None
    """SQLite file; default ``$LONGTERM_LOCAL_PATH`` or ``<LONGTERM_HOME>/memory.db``."""
    index: str = "default_app"
    max_record_bytes: int = MAX_RECORD_BYTES


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


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 expression matching any of ``terms``, each quoted (never FTS5 syntax)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


class LocalBackend(Engine):
    name: ClassVar[str] = "local"
    unreachable: ClassVar[str] = "Check the path and its permissions."

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
        super().__init__(where=str(self.path), store_id=f"local:{self.path.resolve()}#{index}", **hybrid)
        self._vectors = VectorStore(index, self.embedder.dim) if self.embedder else None
        self._conn: sqlite3.Connection | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> LocalBackend:
        cfg = parse_backend_config(LocalConfig, config, cls.name)
        path = cfg.path or env("LONGTERM_LOCAL_PATH") or str(root / "memory.db")
        return cls(path, index=cfg.index, max_record_bytes=cfg.max_record_bytes, **cfg.hybrid_kwargs())

    def _rules(self) -> Sequence[Rule]:
        return SQLITE_RULES

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None, "used before _open"
        return self._conn

    def _open(self) -> None:
        if self._conn is None:
            self._conn = connect(self.path, SCHEMA + VECTOR_SCHEMA + LEDGER_SCHEMA)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._vectors is not None:
            self._vectors.close()

    def _meta_get(self, key: str) -> str | None:
        row = self.conn.execute(GET_META, (f"{key}:{self.index}",)).fetchone()
        return None if row is None else str(row[0])

    def _meta_set(self, key: str, value: str) -> None:
        self.conn.execute(SET_META, (f"{key}:{self.index}", value))

    def _row(self, r: MemoryRecord) -> tuple[Any, ...]:
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
        digest = content_digest(r.author, r.role, types, r.text, content, r.timestamp, metadata)
        skey = "s" + scope_key(self.index, r.app_name, r.user_id)
        return (
            self.index, r.id, r.app_name, r.user_id, r.session_id, r.event_id, r.author, r.role,
            types, r.text, content, r.timestamp, metadata, digest, skey, terms if terms != r.text else None,
        )  # fmt: skip

    def _put(self, records: Sequence[MemoryRecord], vectors: np.ndarray | None) -> None:
        """The records (and vectors) inside the caller's transaction."""
        conn = self.conn
        conn.executemany(UPSERT, [self._row(r) for r in records])
        if self._vectors is not None and vectors is not None:
            self._vectors.write(conn, [r.id for r in records], vectors)
        conn.executemany(BUMP_VERSION, list({(self.index, r.app_name, r.user_id) for r in records}))

    def _write(self, records: Sequence[MemoryRecord], vectors: np.ndarray | None) -> None:
        with write_transaction(self.conn):
            self._put(records, vectors)

    def _commit(
        self,
        records: Sequence[MemoryRecord],
        vectors: np.ndarray | None,
        scope: Scope,
        session_id: str,
        event_ids: Sequence[str],
    ) -> None:
        # Records and ledger in one transaction: a save lands whole or not at all.
        with write_transaction(self.conn):
            if records:
                self._put(records, vectors)
            self._mark(scope, session_id, event_ids)

    def _mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        base = (self.index, scope.app_name, scope.user_id, session_id)
        self.conn.executemany(INSERT_SAVED, [(*base, e) for e in event_ids])

    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        args = (self.index, scope.app_name, scope.user_id, session_id)
        return {r[0] for r in self.conn.execute(SELECT_SAVED, args)}

    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        with write_transaction(self.conn):
            self._mark(scope, session_id, event_ids)

    def _match(self, scope: Scope, query: Query) -> str:
        token = "s" + scope_key(self.index, scope.app_name, scope.user_id)
        return f'scope_key : "{token}" AND terms : ({fts_query(query.terms)})'

    def _fulltext(self, scope: Scope, query: Query, k: int) -> list[tuple[MemoryRecord, float]]:
        params = (self._match(scope, query), self.index, scope.app_name, scope.user_id, k)
        return [(_row_to_record(row[1:-1]), -row[-1]) for row in self.conn.execute(SEARCH, params)]

    def _search(self, scope: Scope, query: Query, vector: np.ndarray | None, k: int, degraded: str | None) -> list[Hit]:
        # Fuse on row ids and scores first; read and parse only the records that survive.
        # A large scope's int8 scan runs on another thread while SQLite does full text.
        assert self._vectors is not None
        conn, vectors, depth = self.conn, self._vectors, self.hybrid.depth(k)
        scoped = vectors.matrix(conn, scope.app_name, scope.user_id)
        pending = vectors.top_soon(scoped, vector, depth) if vector is not None else None
        match = self._match(scope, query)
        if 4 * len(scoped) > (conn.execute(MAX_ROWID).fetchone()[0] or 0):
            # This user holds much of the file: intersecting with their scope token costs
            # more than it saves; the SQL filter alone keeps the search in scope.
            match = f"terms : ({fts_query(query.terms)})"
        text_rows = [
            (r[0], -r[1]) for r in conn.execute(SEARCH_IDS, (match, self.index, scope.app_name, scope.user_id, depth))
        ]
        near = pending.result() if pending is not None else []
        fused = self.hybrid.fuse({"fulltext": text_rows, "vector": near})
        extra = {"degraded": degraded} if degraded else {}
        hits = []
        for rowid, score, arms in fused:
            row = conn.execute(BY_ROWID, (rowid, self.index, scope.app_name, scope.user_id)).fetchone()
            if row is None:  # deleted since the matrix was cached
                continue
            hits.append(Hit(record=_row_to_record(row[1:]), score=score, arms=arms, extra=extra))
            if len(hits) == k:
                break
        return hits

    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        base = (self.index, scope.app_name, scope.user_id)
        with write_transaction(self.conn) as conn:
            conn.execute(BUMP_VERSION, base)
            if ids is not None:
                return sum(conn.execute(DELETE_ONE, (*base, i)).rowcount for i in ids)
            if session_id is not None:
                return int(conn.execute(DELETE_SESSION, (*base, session_id)).rowcount)
            return int(conn.execute(DELETE_ALL, base).rowcount)

    def _count(self, scope: Scope) -> int:
        return int(self.conn.execute(COUNT, (self.index, scope.app_name, scope.user_id)).fetchone()[0])

    def _page(self, scope: Scope, cursor: Any, size: int) -> tuple[list[MemoryRecord], Any]:
        rows = self.conn.execute(SCAN, (self.index, scope.app_name, scope.user_id, cursor or 0, size)).fetchall()
        return [_row_to_record(r[1:]) for r in rows], (rows[-1][0] if len(rows) == size else None)

    async def scopes(self) -> list[tuple[str, str, int]]:
        """(app, user, count) of every scope in this index, for stats."""
        return await self._run("listing users", lambda: self.conn.execute(SCOPES, (self.index,)).fetchall())
