"""SQLite connections for longterm's files: opened safely by many processes at once.

The seam: ``connect(path, schema)`` returns a connection in WAL mode with the schema in
place; ``write_transaction(conn)`` wraps a write; ``SQLITE_RULES`` maps SQLite's errors to
ours (``core.errors``). Callers keep a connection to one thread at a time (an engine's
worker, or a lock).

Why the open is retried: switching a new file to WAL takes an exclusive lock that
SQLite's busy handler does not wait for, so several processes opening a store that does
not exist yet failed at once with "database is locked". The whole open (pragmas and
schema) is retried with backoff for up to the busy timeout. Writes take ``BEGIN
IMMEDIATE`` so two writers queue instead of failing half-way through a transaction.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .core.errors import Rule
from .errors import BackendError, BackendUnavailableError, ConfigurationError

#: How long a writer (or an opener) waits for another process before giving up.
BUSY_TIMEOUT_MS = 30_000

PRAGMAS = (
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA temp_store=MEMORY",
)

SQLITE_RULES = (
    Rule(
        lambda e: isinstance(e, sqlite3.OperationalError) and ("locked" in str(e) or "busy" in str(e)),
        BackendUnavailableError,
        f"Another process held the file locked for {BUSY_TIMEOUT_MS // 1000} s; retry, or look for a stuck writer.",
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
        "Choose a writable path (backend_config={'path': ...} or LONGTERM_HOME).",
    ),
)


def ensure_private_dir(path: Path) -> None:
    """Create ``path``'s parent directory readable by its owner only (memories are personal)."""
    parent = path.parent
    if not parent.exists():
        try:
            parent.mkdir(parents=True, mode=0o700, exist_ok=True)
            os.chmod(parent, 0o700)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot create the directory for {path}: {exc.strerror}; "
                "choose a writable path (backend_config={'path': ...} or LONGTERM_HOME)."
            ) from exc


def _busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def connect(path: str | Path, schema: str) -> sqlite3.Connection:
    """Open ``path`` (created owner-only), switch it to WAL and create ``schema``."""
    path = Path(path).expanduser()
    if str(path) != ":memory:":
        ensure_private_dir(path)
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        try:
            for pragma in PRAGMAS:
                conn.execute(pragma)
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
