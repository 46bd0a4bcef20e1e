"""The embedded default engine: one SQLite file, FTS5 BM25, no service, no API key.

The seam: ``LocalBackend(path)`` implements the engine primitives (``core.engine``) over one
SQLite file that holds the records, their vectors (``vectors.py``) and the ledger, written
in the same transaction as the records: one file is the whole memory, and a save lands whole.

Why so, in short (at length in docs/backends.md, "local"): the scope's id is in every
statement's WHERE clause and a token in the FTS5 index, so a search intersects the query's
posting lists with the user's own; FTS5 queries are built only from quoted ``query_terms``,
never user syntax; hybrid search fuses on row ids before a record is parsed; WAL, ``BEGIN
IMMEDIATE`` and a 30 s busy timeout make several processes safe.
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ... import upgrades
from ..._sqlite import SQLITE_RULES, connect, write_transaction
from ...config import env, parse_backend_config
from ...config.backends import LOCAL_MAX_RECORD_BYTES, LocalConfig
from ...core.engine import Engine, Query, unsaved
from ...core.errors import Rule
from ...records import Hit, MemoryRecord, Scope
from ...retrieval.text import segment
from . import schema as sql
from .vectors import EMBED_LATER, UNEMBEDDED, VECTOR_SCHEMA, VectorStore

log = logging.getLogger("longterm.local")

#: Distinct query terms searched at most: each costs a walk of its posting list, so a pasted
#: page (up to 256 terms) would cost several times what a long question does.
MAX_QUERY_TERMS = 32
_COMPACT: dict[str, Any] = {"ensure_ascii": False, "separators": (",", ":")}


@functools.cache
def _types(event_types: tuple[str, ...]) -> str:
    return json.dumps(event_types, separators=(",", ":"))


def _row_to_record(row: Sequence[Any], scope: Scope) -> MemoryRecord:
    rid, role, text = row[0], row[4], row[6]
    return MemoryRecord(
        id=rid.hex() if isinstance(rid, bytes) else rid,
        app_name=scope.app_name,
        user_id=scope.user_id,
        session_id=row[1],
        event_id=row[2],
        author=row[3],
        role=role,
        event_types=json.loads(row[5]),
        text=text,
        content=json.loads(row[7]) if row[7] is not None else {"role": role or "user", "parts": [{"text": text}]},
        timestamp=row[8],
        metadata=json.loads(row[9]),
    )


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 expression matching any of the first ``MAX_QUERY_TERMS`` distinct ``terms``, each
    quoted (never FTS5 syntax)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in list(dict.fromkeys(terms))[:MAX_QUERY_TERMS])


class LocalBackend(Engine):
    name: ClassVar[str] = "local"
    unreachable: ClassVar[str] = "Check the path and its permissions."
    rules: ClassVar[Sequence[Rule]] = SQLITE_RULES

    def __init__(
        self,
        path: str | Path,
        *,
        index: str = "default_app",
        max_record_bytes: int = LOCAL_MAX_RECORD_BYTES,
        **hybrid: Any,
    ):
        self.path = Path(path).expanduser()
        self.index = index
        store_id = f"local:{self.path.resolve()}#{index}"
        super().__init__(where=str(self.path), store_id=store_id, max_record_bytes=max_record_bytes, **hybrid)
        self._vectors = VectorStore(self.embedder.dim) if self.embedder else None
        self._conn: sqlite3.Connection | None = None
        self._scope_cache: dict[tuple[str, str], int] = {}

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> LocalBackend:
        cfg = parse_backend_config(LocalConfig, config, cls.name)
        path = cfg.path or env("LONGTERM_LOCAL_PATH") or str(root / "memory.db")
        kwargs = {"max_record_bytes": cfg.max_record_bytes, "embed_later": cfg.embed_later}
        return cls(path, index=cfg.index, **kwargs, **cfg.hybrid_kwargs())

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None, "used before _open"
        return self._conn

    def _open(self) -> None:
        if self._conn is None:
            conn = connect(self.path, sql.SCHEMA + VECTOR_SCHEMA)
            try:
                upgrades.local_v1(conn, self.path)
                if self.embed_later:
                    conn.executescript(EMBED_LATER)
            except BaseException:
                conn.close()
                raise
            self._conn = conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._vectors is not None:
            self._vectors.close()

    def _meta_get(self, key: str) -> str | None:
        row = self.conn.execute(sql.GET_META, (f"{key}:{self.index}",)).fetchone()
        return None if row is None else str(row[0])

    def _meta_set(self, key: str, value: str) -> None:
        self.conn.execute(sql.SET_META, (f"{key}:{self.index}", value))

    def _scope(self, app: str, user: str, *, create: bool = False) -> int | None:
        """The scope's id; with ``create``, made first (committed on its own: ids are never reused)."""
        known = self._scope_cache.get((app, user))
        if known is not None:
            return known
        args = (self.index, app, user)
        row = self.conn.execute(sql.GET_SCOPE, args).fetchone()
        if row is None and create:
            with write_transaction(self.conn) as conn:
                conn.execute(sql.ADD_SCOPE, args)
            row = self.conn.execute(sql.GET_SCOPE, args).fetchone()
        if row is not None:
            self._scope_cache[(app, user)] = row[0]
        return None if row is None else int(row[0])

    def _row(self, scope: int, r: MemoryRecord) -> tuple[Any, ...]:
        content = None if r.text_only_content() else json.dumps(r.content, **_COMPACT)
        metadata, terms = json.dumps(r.metadata, **_COMPACT) if r.metadata else "{}", segment(r.text)
        row = (scope, sql.stored_id(r.id), r.session_id, r.event_id, r.author, r.role, _types(tuple(r.event_types)))
        return (*row, r.text, content, r.timestamp, metadata, None if terms == r.text else terms)

    def _scope_ids(self, records: Sequence[MemoryRecord]) -> dict[tuple[str, str], int]:
        """Outside the write transaction: a scope made there would vanish with a rollback."""
        return {pair: self._scope(*pair, create=True) for pair in {(r.app_name, r.user_id) for r in records}}  # type: ignore[misc]

    def _put(self, records: Sequence[MemoryRecord], vectors: np.ndarray | None, ids: dict[Any, int]) -> None:
        """The records (and vectors) inside the caller's transaction."""
        rows = [self._row(ids[r.app_name, r.user_id], r) for r in records]
        self.conn.executemany(sql.UPSERT, rows)
        if self._vectors is not None and vectors is not None:
            self._vectors.write(self.conn, [row[0:1] + row[2:4] for row in rows], vectors)
            self.conn.executemany(sql.BUMP_VERSION, [(i,) for i in set(ids.values())])

    def _write(self, records: Sequence[MemoryRecord], vectors: np.ndarray | None) -> None:
        ids = self._scope_ids(records)
        with write_transaction(self.conn):
            self._put(records, vectors, ids)

    def _commit(
        self,
        records: Sequence[MemoryRecord],
        vectors: np.ndarray | None,
        scope: Scope,
        session_id: str,
        event_ids: Sequence[str],
        new_only: bool = False,
    ) -> None:
        # Records and ledger in one transaction: a save lands whole or not at all.
        ids = self._scope_ids(records)
        scope_pair = (scope.app_name, scope.user_id)
        scope_id = self._scope(*scope_pair, create=True)
        with write_transaction(self.conn) as conn:
            if new_only:  # read under the write lock: no worker saves and no erase comes in between
                records, vectors = unsaved(records, vectors, self._ledger_saved(scope, session_id))
            if records:
                self._put(records, vectors, ids)
            # A record is its own event's ledger entry: only the events without one go here.
            kept = {r.event_id for r in records if (r.app_name, r.user_id, r.session_id) == (*scope_pair, session_id)}
            conn.executemany(sql.INSERT_SAVED, [(scope_id, session_id, e) for e in event_ids if e not in kept])

    def _commit_new(self, *args: Any) -> None:
        self._commit(*args, new_only=True)  # type: ignore[misc]

    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        scope_id = self._scope(scope.app_name, scope.user_id)
        rows = self.conn.execute(sql.SELECT_SAVED, (scope_id, session_id)) if scope_id is not None else ()
        return {r[0] for r in rows}

    def _unembedded(self, limit: int) -> list[tuple[Any, str]]:
        return [((rowid, text), text) for rowid, text in self.conn.execute(UNEMBEDDED, (self.index, limit))]

    def _write_vectors(self, keys: Sequence[Any], vectors: np.ndarray) -> None:
        assert self._vectors is not None
        with write_transaction(self.conn) as conn:
            self._vectors.write_late(conn, list(keys), vectors)

    def _match(self, scope_id: int, terms: Sequence[str], *, token: bool = True) -> str:
        text = f"terms : ({fts_query(terms)})"
        return f'scope : "s{scope_id}" AND {text}' if token else text

    def _fulltext(self, scope: Scope, query: Query, k: int) -> list[tuple[MemoryRecord, float]]:
        scope_id = self._scope(scope.app_name, scope.user_id)
        if scope_id is None:
            return []
        rows = self.conn.execute(sql.SEARCH, (self._match(scope_id, query.terms), scope_id, k))
        return [(_row_to_record(row[1:-1], scope), -row[-1]) for row in rows]

    def _search(self, scope: Scope, query: Query, vector: np.ndarray | None, k: int, degraded: str | None) -> list[Hit]:
        # Fuse on row ids and scores first; read and parse only the records that survive.
        # A large scope's int8 scan runs on another thread while SQLite does full text.
        assert self._vectors is not None
        scope_id = self._scope(scope.app_name, scope.user_id)
        if scope_id is None:
            return []
        conn, vectors, depth = self.conn, self._vectors, self.hybrid.depth(k)
        scoped = vectors.matrix(conn, scope_id)
        pending = vectors.top_soon(scoped, vector, depth) if vector is not None else None
        # A user holding much of the file: intersecting with their scope token costs more
        # than it saves; the SQL filter alone keeps the search in scope.
        token = 4 * len(scoped) <= (conn.execute(sql.MAX_ROWID).fetchone()[0] or 0)
        match = self._match(scope_id, query.terms, token=token)
        text_rows = [(r[0], -r[1]) for r in conn.execute(sql.SEARCH_IDS, (match, scope_id, depth))]
        near = pending.result() if pending is not None else []
        fused = self.hybrid.fuse({"fulltext": text_rows, "vector": near})
        extra = {"degraded": degraded} if degraded else {}
        hits = []
        for rowid, score, arms in fused:
            row = conn.execute(sql.BY_ROWID, (rowid, scope_id)).fetchone()
            if row is None:  # deleted since the matrix was cached
                continue
            hits.append(Hit(record=_row_to_record(row[1:], scope), score=score, arms=arms, extra=extra))
            if len(hits) == k:
                break
        return hits

    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        scope_id = self._scope(scope.app_name, scope.user_id)
        if scope_id is None:
            return 0
        with write_transaction(self.conn) as conn:
            conn.execute(sql.BUMP_VERSION, (scope_id,))
            if ids is not None:  # each a scan of the scope: ids are not indexed (see schema)
                return sum(conn.execute(sql.DELETE_ONE, (scope_id, sql.stored_id(i))).rowcount for i in set(ids))
            if session_id is not None:
                return int(conn.execute(sql.DELETE_SESSION, (scope_id, session_id)).rowcount)
            return int(conn.execute(sql.DELETE_ALL, (scope_id,)).rowcount)

    def _count(self, scope: Scope) -> int:
        scope_id = self._scope(scope.app_name, scope.user_id)
        return 0 if scope_id is None else int(self.conn.execute(sql.COUNT, (scope_id,)).fetchone()[0])

    def _page(self, scope: Scope, cursor: Any, size: int) -> tuple[list[MemoryRecord], Any]:
        scope_id = self._scope(scope.app_name, scope.user_id)
        if scope_id is None:
            return [], None
        after = cursor or ("", "")
        rows = self.conn.execute(sql.SCAN, (scope_id, *after, size)).fetchall()
        return [_row_to_record(r[1:], scope) for r in rows], (tuple(rows[-1][2:4]) if len(rows) == size else None)

    def _scopes(self) -> list[tuple[str, str, int]]:
        return [tuple(r) for r in self.conn.execute(sql.SCOPES, (self.index,)).fetchall()]

    def _indices(self) -> list[str]:
        return [r[0] for r in self.conn.execute(sql.INDICES).fetchall()]
