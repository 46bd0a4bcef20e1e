"""The embedded default engine: one SQLite file, FTS5 BM25, no service, no API key.

The seam: ``LocalBackend(path)`` implements the engine primitives (``core.engine``; the reads,
filtered or not, in ``reads.py``; a hit's neighbours in ``sessions.py``) over one SQLite file
that holds the records, their vectors (``vectors.py``) and the ledger, written in the same
transaction as the records: one file is the whole memory, and a save lands whole.

Why so, in short (at length in docs/backends.md, "local"): the scope's id is in every
statement's WHERE clause and in its rows' rowids, so a search reads only the user's range of
the query's posting lists, in a full-text table shared with a sixteenth of the users
(``schema``); FTS5 queries are built only from quoted ``query_terms``, never user syntax; a
filter is SQL over an index of the records' metadata values, applied whole before every cut
(``filtering``); hybrid search fuses on row ids before a record is parsed; WAL, ``BEGIN
IMMEDIATE`` and a 30 s busy timeout make several processes safe.

Vectors (``vectors.py``) are written with their records, or listed as waiting for one
(``unembedded``) and written later: by the background embedder (``embed_later``), or for a memory
without an embedder on a store with one (``_embed_pending``: the core leaves their vectors pending,
``core.embedding``); ``_list_unembedded`` lists every record without one (``longterm reembed``).
A store holding a vector of another size than its index's is repaired once on opening
(``upgrade.vector_sizes``), and no search ever reads such a vector.

Why reads have threads and connections of their own: a save waits for SQLite's write lock
(another process may hold it for seconds) on the engine's one worker; a search queued
behind it waited as long. Searches, counts, scans and listings (``READS``) run on reader
threads, each with a ``query_only`` connection (WAL readers take no lock), within a
deadline; writes stay on the one worker and its one connection.

Why an erase purges: FTS5 keeps a deleted row's terms in its segments until they merge,
and the WAL keeps old pages until it is reset. An erase therefore merges the index
(``optimize``: SQLite 3.40 has no FTS5 ``secure-delete``, which needs 3.42), with
``secure_delete`` zeroing every freed byte, then checkpoints and truncates the WAL
(``PURGE``, its cost in ``bench/erase_purge.py``). A record written over by id with other
words (``update``) is purged the same way (``rows.put``).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from typing_extensions import Unpack, override

from ...config import env, parse_backend_config
from ...config.hybrid import HybridOptions
from ...config.local import LOCAL_MAX_RECORD_BYTES, LocalConfig
from ...core.aliases import Ids, Records, Vectors
from ...core.errors import Rule
from ...core.selection import unsaved
from ...core.sqlite import (
    BUSY_TIMEOUT_MS,
    SQLITE_RULES,
    WAL_PAGES,
    connect,
    hold_locks_after_fork,
    reader,
    write_transaction,
)
from ...records import MemoryRecord, Scope
from . import schema as sql
from .reads import LocalReads
from .rows import ALIVE, Held, put, to_row
from .sessions import LocalSessions
from .upgrade import upgrade

if TYPE_CHECKING:
    import numpy as np

    from .vectors import VectorStore

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Reader threads (and connections) per store: searches, counts, scans and listings
#: (``_read``) run side by side, and beside a write.
READERS = 2
#: Seconds a read may take when the engine has no ``timeout`` (a WAL reader waits for no
#: one; only opening a store whose schema must be written can wait for the lock).
READ_TIMEOUT = BUSY_TIMEOUT_MS / 1000
#: What a read past its deadline says.
SLOW_READ = (
    "The store may be moving to the current schema (once, logged; about 30 s a million records) or another "
    "process may hold the file locked while its schema is made; retry, or look for a stuck process."
)
#: Connections inherited by a forked child: referenced for the process's life, so never
#: closed there (closing would run SQLite's close path on files the parent still uses).
_INHERITED: list[sqlite3.Connection] = []


class LocalBackend(LocalSessions, LocalReads):
    name: ClassVar[str] = "local"
    unreachable: ClassVar[str] = "Check the path and its permissions."
    rules: ClassVar[Sequence[Rule]] = SQLITE_RULES
    atomic_save = True  # records and ledger in one transaction
    embeds_later = True
    native_hybrid = True  # fused on row ids before a record is parsed
    filters_exact = True  # the whole filter, in SQL (``filtering``), before every cut (``reads``)
    rewrites_alive = True  # the check and the write in one transaction
    purge_note: ClassVar[str] = (
        "nothing more to compact: every local erase purges at once (secure delete, the full-text index merged, "
        "the WAL truncated)"
    )

    def __init__(
        self,
        path: str | Path,
        *,
        index: str = "default_app",
        max_record_bytes: int = LOCAL_MAX_RECORD_BYTES,
        embed_later: bool = False,
        timeout: float | None = None,
        **hybrid: Unpack[HybridOptions],
    ) -> None:
        self.path = Path(path).expanduser()
        self.index = index
        store_id = f"local:{self.path.resolve()}#{index}"
        super().__init__(
            where=str(self.path),
            store_id=store_id,
            max_record_bytes=max_record_bytes,
            embed_later=embed_later,
            timeout=timeout,
            **hybrid,
        )
        self._vectors: VectorStore | None = None
        if self.embedder is not None:
            from .vectors import VectorStore

            self._vectors = VectorStore(self.embedder.dim)
        self._conn: sqlite3.Connection | None = None
        self._scope_cache: dict[tuple[str, str], int] = {}
        self._fresh_readers()

    def _fresh_readers(self) -> None:
        """No reader threads or connections yet: each is made on first use."""
        self._readers: list[sqlite3.Connection] = []
        self._reader_local = threading.local()
        self._reader_lock = threading.Lock()
        self._reader_pool: ThreadPoolExecutor | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> LocalBackend:
        cfg = parse_backend_config(LocalConfig, config, cls.name)
        path = cfg.path or env("LONGTERM_LOCAL_PATH") or str(root / "memory.db")
        limit, later, hybrid = cfg.max_record_bytes, cfg.embed_later, cfg.hybrid_kwargs()
        return cls(path, index=cfg.index, max_record_bytes=limit, embed_later=later, timeout=cfg.timeout, **hybrid)

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None, "used before _open"
        return self._conn

    @override
    def _open(self) -> None:
        if self._conn is None:
            conn = connect(self.path, sql.SCHEMA + sql.VECTOR_SCHEMA, wal_pages=WAL_PAGES)
            try:
                upgrade(conn, self.path)
                if self.embedding.later or self.embedding.identity.pending_for:  # a connection made anew, too
                    conn.executescript(sql.EMBED_LATER)
            except BaseException:
                conn.close()
                raise
            self._conn = conn

    def _reader(self) -> sqlite3.Connection:
        """This thread's reading connection, opened on first use (after ``_open`` made the store)."""
        conn: sqlite3.Connection | None = getattr(self._reader_local, "conn", None)
        if conn is None:
            conn = reader(self.path)
            self._reader_local.conn = conn
            with self._reader_lock:
                self._readers.append(conn)
        return conn

    def _reading_pool(self) -> ThreadPoolExecutor:
        with self._reader_lock:
            if self._reader_pool is None:
                self._reader_pool = ThreadPoolExecutor(READERS, thread_name_prefix="longterm-local-read")
            return self._reader_pool

    @override
    async def _read(self, what: str, fn: Callable[..., T], *args: object) -> T:
        """On the reader threads, within ``timeout`` (else ``READ_TIMEOUT``), so no search waits
        for a save waiting for the lock (writes stay on the one worker)."""
        limit = READ_TIMEOUT if self.timeout is None else self.timeout
        return await self.runner.run_on(self._reading_pool, what, fn, *args, limit=limit, hint=SLOW_READ)

    @override
    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        with self._reader_lock:
            readers, self._readers = self._readers, []
            pool, self._reader_pool = self._reader_pool, None
        for conn in readers:  # idle: ``_shut`` waited for the running operations
            conn.close()
        if pool is not None:
            pool.shutdown(wait=False)
        if self._vectors is not None:
            self._vectors.close()

    @override
    def _forget_after_fork(self) -> None:
        """In a forked child: drop the parent's connections unclosed (kept in ``_INHERITED``, so
        no collection closes them either), its reader threads, caches and locks; the next call
        opens connections of the child's own, under the locks the kept ones stand for."""
        inherited = [c for c in (self._conn, *self._readers) if c is not None]
        _INHERITED.extend(inherited)
        if inherited:
            hold_locks_after_fork(self.path)
        self._conn = None
        self._scope_cache = {}
        self._fresh_readers()
        if self._vectors is not None:
            self._vectors.forget_after_fork()

    @override
    def _meta_get(self, key: str) -> str | None:
        row = self.conn.execute(sql.GET_META, (sql.meta_key(key, self.index),)).fetchone()
        return None if row is None else str(row[0])

    @override
    def _meta_set(self, key: str, value: str) -> None:
        self.conn.execute(sql.SET_META, (sql.meta_key(key, self.index), value))

    def _scope(
        self, app: str, user: str, *, create: bool = False, conn: sqlite3.Connection | None = None
    ) -> int | None:
        """The scope's id, read on ``conn`` (default: the writer's); with ``create``, made first
        (committed on its own: ids are never reused)."""
        known = self._scope_cache.get((app, user))
        if known is not None:
            return known
        args = (self.index, app, user)
        row = (conn or self.conn).execute(sql.GET_SCOPE, args).fetchone()
        if row is None and create:
            with write_transaction(self.conn) as conn:
                conn.execute(sql.ADD_SCOPE, args)
                row = conn.execute(sql.GET_SCOPE, args).fetchone()
                for statement in sql.BUCKET_DDL[sql.bucket(row[0])]:  # its full-text table, if new
                    conn.execute(statement)
        if row is not None:
            self._scope_cache[(app, user)] = row[0]
        return None if row is None else int(row[0])

    def _scope_ids(self, records: Sequence[MemoryRecord]) -> dict[tuple[str, str], int]:
        """Outside the write transaction: a scope made there would vanish with a rollback."""
        return {pair: self._scope(*pair, create=True) for pair in {(r.app_name, r.user_id) for r in records}}  # type: ignore[misc]

    def _put(self, records: Records, vectors: Vectors, ids: dict[tuple[str, str], int], held: Held | None) -> bool:
        """The records (and vectors) inside the caller's transaction (``held``: ``rows.put``'s);
        whether one was written over (``rows.put``: the WAL is then emptied after the commit)."""
        rows = [to_row(ids[r.app_name, r.user_id], r) for r in records]
        over = put(self.conn, rows, held)
        if vectors is not None:  # the configured embedder's, or the store's loaded for saves (``core.embedding``)
            from .vectors import write

            write(self.conn, [row[0:1] + row[2:4] for row in rows], vectors)
            self.conn.executemany(sql.BUMP_VERSION, [(i,) for i in set(ids.values())])
        return over

    @override
    def _write(self, records: Records, vectors: Vectors) -> None:
        ids = self._scope_ids(records)
        with write_transaction(self.conn):
            over = self._put(records, vectors, ids, None)
        if over:  # the old words are in the WAL's frames until it is emptied
            truncate_wal(self.conn, self.path)

    @override
    def _rewrite(self, records: Records, vectors: Vectors) -> list[str]:
        pairs = {(r.app_name, r.user_id) for r in records}
        scopes = {pair: scope for pair in pairs if (scope := self._scope(*pair)) is not None}  # none: nothing held
        with write_transaction(self.conn) as conn:  # read under the write lock: no erase comes in between
            keep = [
                i
                for i, r in enumerate(records)
                if (scope := scopes.get((r.app_name, r.user_id))) is not None
                and conn.execute(ALIVE, (scope, r.session_id, r.event_id, sql.stored_id(r.id))).fetchone()
            ]
            kept = [records[i] for i in keep]
            over = bool(kept) and self._put(kept, None if vectors is None else vectors[keep], scopes, None)
        if over:
            truncate_wal(self.conn, self.path)
        return [r.id for r in kept]

    @override
    def _commit(
        self, records: Records, vectors: Vectors, scope: Scope, session_id: str, event_ids: Ids, new_only: bool = False
    ) -> None:
        """Records and ledger in one transaction: a save lands whole or not at all."""
        ids = self._scope_ids(records)
        scope_pair = (scope.app_name, scope.user_id)
        scope_id = self._scope(*scope_pair, create=True)
        held: Held | None = None
        over = False
        with write_transaction(self.conn) as conn:
            if new_only:  # read under the write lock: no worker saves and no erase comes in between
                records, vectors = unsaved(records, vectors, self._ledger_saved(scope, session_id))
                if scope_id is not None:  # that read: none of this session's records left has a row
                    held = {(scope_id, session_id): set()}
            if records:
                over = self._put(records, vectors, ids, held)
            # A record is its own event's ledger entry: only the events without one go here.
            kept = {r.event_id for r in records if (r.app_name, r.user_id, r.session_id) == (*scope_pair, session_id)}
            conn.executemany(sql.INSERT_SAVED, [(scope_id, session_id, e) for e in event_ids if e not in kept])
        if over:
            truncate_wal(self.conn, self.path)

    @override
    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        self._commit((), None, scope, session_id, event_ids)

    @override
    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        scope_id = self._scope(scope.app_name, scope.user_id)
        rows = self.conn.execute(sql.SELECT_SAVED, (scope_id, session_id)) if scope_id is not None else ()
        return {r[0] for r in rows}

    @override
    def _unembedded(self, limit: int) -> list[tuple[object, str]]:
        return [((rowid, text), text) for rowid, text in self.conn.execute(sql.UNEMBEDDED, (self.index, limit))]

    @override
    def _write_vectors(self, keys: Sequence[object], vectors: np.ndarray) -> None:
        from .vectors import write_late

        with write_transaction(self.conn) as conn:
            write_late(conn, cast("list[tuple[int, str]]", list(keys)), vectors)  # ``_unembedded``'s

    @override
    def _embed_pending(self) -> None:
        """This memory saves without vectors on a store with an embedder: its writer connection lists
        what it writes as unembedded (the triggers of ``embed_later``)."""
        self.conn.executescript(sql.EMBED_LATER)

    @override
    def _list_unembedded(self, scope: Scope | None) -> int:
        with write_transaction(self.conn) as conn:
            if scope is None:
                return int(conn.execute(sql.LIST_UNEMBEDDED, (self.index,)).rowcount)
            scope_id = self._scope(scope.app_name, scope.user_id)
            if scope_id is None:
                return 0
            return int(conn.execute(sql.LIST_SCOPE_UNEMBEDDED, (self.index, scope_id)).rowcount)

    @override
    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        """Delete, and leave none of the deleted words in the file: the full-text index merged
        in the same transaction (``PURGE``), the WAL truncated after it."""
        scope_id = self._scope(scope.app_name, scope.user_id)
        if scope_id is None:
            return 0
        with write_transaction(self.conn) as conn:
            conn.execute(sql.BUMP_VERSION, (scope_id,))
            if ids is not None:  # a scan of the scope per batch: ids are not indexed (see schema)
                wanted = [sql.stored_id(i) for i in set(ids)]
                gone = 0
                for at in range(0, len(wanted), sql.DELETE_BATCH):
                    batch = wanted[at : at + sql.DELETE_BATCH]
                    statement = sql.DELETE_IDS.format(", ".join("?" * len(batch)))
                    gone += conn.execute(statement, (scope_id, *batch)).rowcount
            elif session_id is not None:
                gone = int(conn.execute(sql.DELETE_SESSION, (scope_id, session_id)).rowcount)
            else:
                gone = int(conn.execute(sql.DELETE_ALL, (scope_id,)).rowcount)
            if gone:  # the scope's full-text table merged in the erase's transaction: the deleted rows'
                conn.execute(sql.PURGE[sql.bucket(scope_id)])  # terms go with their delete markers
        if gone:
            truncate_wal(self.conn, self.path)
        return gone

    @override
    def _scopes(self, at: float | None = None) -> list[tuple[str, str, int]]:
        query, args = (sql.SCOPES, (self.index,)) if at is None else (sql.SCOPES_ALIVE, (self.index, at))
        return [(str(a), str(u), int(n)) for a, u, n in self._reader().execute(query, args)]

    @override
    def _indices(self) -> list[str]:
        return [r[0] for r in self._reader().execute(sql.INDICES).fetchall()]


def truncate_wal(conn: sqlite3.Connection, path: Path) -> None:
    """After an erase (or a record written over): copy the WAL into the file and empty it (its
    frames hold the pages as they were)."""
    busy = conn.execute(sql.TRUNCATE_WAL).fetchone()[0]
    if busy:
        log.warning(
            "local %s: the erase (or correction) is done, but a reader's snapshot kept its pages from being written "
            "back, so the store file (%s) may hold the old words until the next erase or the last connection closes",
            path,
            path.name,
        )
