"""SQLite connections for longterm's files: opened safely by many processes at once.

The seam: ``connect(path, schema)`` returns a connection in WAL mode with the schema in
place; ``reader(path)`` a connection that only reads (a ``Reader``); ``write_transaction(conn)``
wraps a write; ``SQLITE_RULES`` maps SQLite's errors to ours (``core.errors``);
``hold_locks_after_fork(path)`` is for a forked child that keeps its parent's connections.
Callers keep a connection to one thread at a time (an engine's worker, or a lock).

Why the open is retried: switching a new file to WAL takes an exclusive lock that
SQLite's busy handler does not wait for, so several processes opening a store that does
not exist yet failed at once with "database is locked". The whole open (pragmas and
schema) is retried with backoff for up to the busy timeout. Writes take ``BEGIN
IMMEDIATE`` so two writers queue instead of failing half-way through a transaction.

Why the open reads before it writes: in WAL mode a reader needs no lock, but creating the
schema takes the write lock, so a process that only wanted to search waited behind another
one's write (and failed after the busy timeout). The schema is read first and written only
when an object is missing (a new file, or a new version's table), and the log says so.

Why ``secure_delete``: a deleted row's bytes stay in its page and freed pages keep theirs
until reused; memories are personal, so what is deleted is overwritten with zeros.

Why a store's writer may ask for a long log (``connect(..., wal_pages=WAL_PAGES)``, the local
store's; a side ledger keeps SQLite's 1,000 pages): a checkpoint copies
the log's pages into the file and syncs both, on the writer's thread, in the middle of a save;
a log ten times as long is checkpointed a tenth as often, and a page written many times in it
(the full-text segments, the indexes) is copied once. Measured at a million records (100
users, sessions of 50, against raw SQLite FTS5 in one run): saves 0.61x raw with 1,000 pages,
0.65x with 4,000, 0.69x with 16,000; at 100k, 0.67x, 0.71x with 10,000. The price: the log
reaches ~40 MB between checkpoints (more while a reader's snapshot holds a checkpoint back; a
checkpoint then cuts the file back to ``journal_size_limit``, the same 40 MB), the last
connection to close, in any process, folds it in and removes it, and opening a store after a
crash replays up to that much. Durability is ``synchronous=NORMAL``'s either way.

Why a reader runs a statement again when the schema changed under it: a store's schema changes
while it is used (a scope's first save makes its full-text table: ``BUCKET_DDL``; a forked worker
saving a new user does it in another process). Each connection then builds its FTS5 tables anew
on its next statement, FTS5 reading their config in a read of its own, after SQLite read the
schema in another; a change landing in between fails the statement with SQLITE_SCHEMA
("vtable constructor failed: records_fts_1"), and SQLite prepares it again only once. A reader
runs outside any transaction and only reads, so nothing of the failed statement happened: it is
run again, up to ``SCHEMA_TRIES`` times. A writer builds its tables inside ``BEGIN IMMEDIATE``,
whose snapshot the schema cannot change under.

Why 0600: the file is created owner-only before SQLite opens it (SQLite gives ``-wal`` and
``-shm`` the mode of the database file), whatever the umask; a store found readable by
others is used as it is, with one warning saying how to make it private.
"""

from __future__ import annotations

import logging
import os
import random
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..config import private_dir
from ..errors import BackendError, BackendUnavailableError, ConfigurationError, InvalidInputError
from .errors import Rule

log = logging.getLogger(__name__)

#: How long a writer (or an opener) waits for another process before giving up.
BUSY_TIMEOUT_MS = 30_000

#: Pages a long write-ahead log holds before its writer checkpoints it (see the module docstring).
WAL_PAGES = 10_000

PRAGMAS = (
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA temp_store=MEMORY",
    "PRAGMA secure_delete=ON",
)
#: A reader's connection: no journal switch (that is the writer's), never a write.
READER_PRAGMAS = (
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
    "PRAGMA query_only=ON",
    "PRAGMA temp_store=MEMORY",
)
#: Times a reader runs a statement that met a schema change made meanwhile (``Reader``).
SCHEMA_TRIES = 5
#: SQLite's result code for "the schema changed" (``sqlite3.SQLITE_SCHEMA`` from Python 3.11).
_SQLITE_SCHEMA = 17
#: The files of a store: SQLite makes the last two with the first one's mode.
SUFFIXES = ("", "-wal", "-shm")
_OBJECT = re.compile(r"CREATE\s+(?:VIRTUAL\s+)?(?:TABLE|TRIGGER|INDEX)\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I)
_warned: set[str] = set()
_warned_lock = threading.Lock()

SQLITE_RULES = (
    Rule(
        lambda e: isinstance(e, sqlite3.OperationalError) and ("locked" in str(e) or "busy" in str(e)),
        BackendUnavailableError,
        f"Another process held the file locked for {BUSY_TIMEOUT_MS // 1000} s; retry, or look for a stuck writer.",
    ),
    Rule(
        "parser stack overflow",
        InvalidInputError,
        "The filter nests deeper than SQLite's parser takes on this store; nest it less (an $and of an $and "
        "is one $and of all their parts).",
    ),
    Rule(
        "disk is full",
        BackendUnavailableError,
        "Free some disk space; nothing of this operation was saved, and the next save retries it.",
    ),
    Rule(
        lambda e: (
            isinstance(e, sqlite3.DatabaseError)
            and any(s in str(e) for s in ("malformed", "not a database", "encrypted", "corrupt"))
        ),
        BackendError,
        "The file is damaged or is not a longterm store. Restore it from a backup, or move it aside to start "
        "a new store (`longterm export` reads what is still readable).",
    ),
    Rule(
        lambda e: (
            isinstance(e, sqlite3.OperationalError)
            and any(s in str(e) for s in ("unable to open", "readonly", "read-only"))
        ),
        ConfigurationError,
        "Check that this user may read and write the file and its directory (chmod, chown), or choose "
        "another path (backend_config={'path': ...} or LONGTERM_HOME).",
    ),
)


def ensure_private_dir(path: Path) -> None:
    """Create ``path``'s parent directory (and its parents) readable by its owner only."""
    try:
        private_dir(path.parent)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot create the directory for {path}: {exc.strerror}; "
            "choose a writable path (backend_config={'path': ...} or LONGTERM_HOME)."
        ) from exc


def private_file(path: Path) -> None:
    """Create the database file 0600 before SQLite does; warn once about an existing one open to others.

    A file that cannot be made is left for SQLite to report (its error says what to do)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        warn_if_shared(path)
        return
    except OSError:
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def warn_if_shared(path: Path) -> None:
    """One warning per store and process when its files can be read or written by others."""
    wide = []
    for suffix in SUFFIXES:
        try:
            mode = stat.S_IMODE(os.stat(f"{path}{suffix}").st_mode)
        except OSError:
            continue
        if mode & 0o077:
            wide.append(f"{path.name}{suffix} is {mode:04o}")
    if not wide:
        return
    with _warned_lock:
        if str(path) in _warned:
            return
        _warned.add(str(path))
    files = " ".join(f"'{path}{suffix}'" for suffix in SUFFIXES if os.path.exists(f"{path}{suffix}"))
    log.warning(
        "%s can be read by other users (%s); memories are personal: make it owner-only with `chmod 600 %s`",
        path,
        ", ".join(wide),
        files,
    )


def schema_missing(conn: sqlite3.Connection, schema: str) -> list[str]:
    """The objects ``schema`` creates that the file lacks (a read: no lock taken)."""
    names = _OBJECT.findall(schema)
    if not names:
        return []
    marks = ",".join("?" * len(names))
    have = {r[0] for r in conn.execute(f"SELECT name FROM sqlite_master WHERE name IN ({marks})", names)}
    return [n for n in names if n not in have]


def _busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def connect(path: str | Path, schema: str, *, wal_pages: int | None = None) -> sqlite3.Connection:
    """Open ``path`` (created owner-only), switch it to WAL and create what ``schema`` lacks;
    with ``wal_pages``, this connection checkpoints the log at that many pages (see the module
    docstring), and cuts the file back to as many after a checkpoint.

    An existing store with its schema in place is only read: opening it never waits for a
    writer. Creating or completing the schema takes the write lock, and says so in the log."""
    path = Path(path).expanduser()
    if str(path) != ":memory:":
        ensure_private_dir(path)
        private_file(path)
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        conn = _connect(path)
        try:
            for pragma in PRAGMAS:
                conn.execute(pragma)
            if wal_pages is not None:
                conn.execute(f"PRAGMA wal_autocheckpoint={int(wal_pages)}")
                conn.execute(f"PRAGMA journal_size_limit={int(wal_pages) * 4096}")
            if missing := schema_missing(conn, schema):
                log.info("%s: creating %s (takes the write lock)", path, ", ".join(missing))
                conn.executescript(f"BEGIN IMMEDIATE;\n{schema}\nCOMMIT;")
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if not _busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.25)
        except BaseException:
            conn.close()
            raise


def _schema_changed(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+; before, its message says
    if code is not None:
        return bool(code & 0xFF == _SQLITE_SCHEMA)
    return any(s in str(exc) for s in ("vtable constructor failed", "schema has changed"))


class Reader(sqlite3.Connection):
    """A reader's connection: a statement that met a schema change made meanwhile by another
    connection (SQLITE_SCHEMA; see the module docstring) is run again, up to ``SCHEMA_TRIES`` times.

    ``execute`` is where it can fail so: once a statement's first step ran, its snapshot is
    taken and no schema change reaches it."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        for _ in range(SCHEMA_TRIES - 1):
            try:
                return super().execute(sql, parameters)
            except sqlite3.OperationalError as exc:
                if self.in_transaction or not _schema_changed(exc):
                    raise
        return super().execute(sql, parameters)


def reader(path: str | Path) -> sqlite3.Connection:
    """A connection that only reads ``path`` (``query_only``), for an engine's readers.

    Opened after ``connect`` made the store: in WAL mode it sees every committed write and
    never waits for a writer."""
    conn = _connect(Path(path).expanduser(), Reader)
    try:
        for pragma in READER_PRAGMAS:
            conn.execute(pragma)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect(path: Path, factory: type[sqlite3.Connection] = sqlite3.Connection) -> sqlite3.Connection:
    timeout = BUSY_TIMEOUT_MS / 1000
    return sqlite3.connect(str(path), timeout=timeout, isolation_level=None, check_same_thread=False, factory=factory)


#: SQLite's unix locks (os_unix.c): a connection's SHARED lock on the database file (a read
#: lock on this byte range), and the lock on the ``-shm`` file every process using it holds.
_SHARED_LOCK = ("", 0x40000002, 510)
_SHM_LOCK = ("-shm", 128, 1)
#: Descriptors holding a forked child's locks: open for the child's life (closing one would
#: release every lock of the process on that file).
_CHILD_LOCKS: list[int] = []


def hold_locks_after_fork(path: str | Path) -> None:
    """In a forked child that keeps its parent's connections to ``path`` (never closed): take the
    locks they stand for.

    SQLite counts locks per process, and POSIX locks are not inherited: a connection the child
    opens finds the inherited ones "holding" the SHARED lock and takes none, so the child would
    hold none. The parent closing its last connection then checkpoints and deletes the WAL under
    the child, whose later writes are lost (shown by ``tests/faults/test_local_fork.py``)."""
    import fcntl

    for suffix, start, length in (_SHARED_LOCK, _SHM_LOCK):
        try:
            fd = os.open(f"{path}{suffix}", os.O_RDWR)
        except OSError:
            continue
        _CHILD_LOCKS.append(fd)
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, length, start, os.SEEK_SET)
        except OSError as exc:
            log.warning("%s%s: a forked child could not take SQLite's shared lock (%s)", path, suffix, exc)


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")
