"""A SQLite connection owned by one worker thread, driven from asyncio.

The seam: ``SQLiteWorker(path, schema).run(fn, *args)`` runs ``fn(conn, *args)`` on the
worker's thread and awaits it, so the event loop never blocks on disk or locks.

Why one thread per file: a sqlite3 connection must not be used from two threads at
once, and SQLite serialises writers anyway. Several processes share the file safely
through WAL mode and the busy timeout below; writes take ``BEGIN IMMEDIATE`` so two
writers queue instead of failing half-way through a transaction.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from .errors import BackendError, BackendUnavailableError, ConfigurationError

T = TypeVar("T")

#: How long a writer waits for another process's transaction before giving up.
BUSY_TIMEOUT_MS = 30_000

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
    "PRAGMA foreign_keys=ON",
    "PRAGMA temp_store=MEMORY",
)


def ensure_private_dir(path: Path) -> None:
    """Create ``path``'s parent directory readable by its owner only (memories are personal)."""
    parent = path.parent
    if not parent.exists():
        parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        os.chmod(parent, 0o700)


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


class SQLiteWorker:
    def __init__(self, path: str | Path, schema: str) -> None:
        self.path = Path(path).expanduser()
        self._schema = schema
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="longterm-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            if str(self.path) != ":memory:":
                try:
                    ensure_private_dir(self.path)
                except OSError as exc:
                    raise ConfigurationError(
                        f"cannot create the directory for {self.path}: {exc.strerror}; "
                        "choose a writable path (backend_config={'path': ...} or LONGTERM_HOME)."
                    ) from exc
            try:
                conn = sqlite3.connect(
                    str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
                )
                for pragma in PRAGMAS:
                    conn.execute(pragma)
                conn.executescript(f"BEGIN IMMEDIATE;\n{self._schema}\nCOMMIT;")
            except sqlite3.DatabaseError as exc:
                raise BackendUnavailableError(
                    f"cannot open the SQLite store {self.path}: {exc}. Check that the path is a "
                    "longterm database on a local disk and that no other program holds it locked."
                ) from exc
            self._conn = conn
        return self._conn

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise BackendError(f"the SQLite store {self.path} is closed.")
        conn = self._connect()
        try:
            return fn(conn, *args)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise BackendUnavailableError(
                    f"the SQLite store {self.path} stayed locked by another process for "
                    f"{BUSY_TIMEOUT_MS // 1000} s; retry, or check for a stuck writer."
                ) from exc
            raise BackendError(f"SQLite error on {self.path}: {exc}") from exc

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, partial(self._call, fn, *args))

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        return self._executor.submit(self._call, fn, *args).result()

    async def close(self) -> None:
        if self._closed:
            return

        def _close(_conn: Any = None) -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, _close)
        self._closed = True
        self._executor.shutdown(wait=False)
