"""Incremental-save bookkeeping: which events of each session are already saved.

The seam: a ``Ledger`` answers ``saved(scope, session_id)`` (the event ids already
handled) and records ``mark_saved(...)`` after a backend confirmed a write;
``forget(scope)`` drops a user's bookkeeping on erasure. Three methods, so any engine can
host one.

"Handled" means written, or dropped by the policy in force at that save: each event is
considered once, so a replay reports nothing new and long sessions are not re-filtered
on every automatic save. (To re-import a session under another policy, erase the user
or use a fresh ledger.)

Why a set of event ids and not a position: sessions can be rewound or edited and events
arrive out of order; ids are what the record ids are derived from. The ledger is an optimisation on top of idempotent upserts:
if it is lost, the next save rewrites the same ids and duplicates nothing.

``SQLiteLedger`` is the default. It lives in the local backend's file, or in
``<LONGTERM_HOME>/ledger.db`` next to a remote backend (backends may offer their own,
e.g. Redis, so several hosts share it).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from ._sqlite import SQLiteWorker, write_transaction
from .records import Scope

LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    app_name   TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    event_id   TEXT NOT NULL,
    saved_at   REAL NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, event_id)
) WITHOUT ROWID;
"""

SELECT_SAVED = "SELECT event_id FROM ledger WHERE app_name = ? AND user_id = ? AND session_id = ?"
INSERT_SAVED = "INSERT OR IGNORE INTO ledger (app_name, user_id, session_id, event_id, saved_at) VALUES (?, ?, ?, ?, ?)"
DELETE_SCOPE = "DELETE FROM ledger WHERE app_name = ? AND user_id = ?"


@runtime_checkable
class Ledger(Protocol):
    async def saved(self, scope: Scope, session_id: str) -> set[str]: ...

    async def mark_saved(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None: ...

    async def forget(self, scope: Scope) -> None: ...

    async def close(self) -> None: ...


class SQLiteLedger:
    """The default ledger: one table in a SQLite file (shared safely between processes)."""

    def __init__(self, path: str | Path | None = None, *, worker: SQLiteWorker | None = None) -> None:
        if worker is None:
            if path is None:
                raise ValueError("SQLiteLedger needs a path or a worker")
            worker = SQLiteWorker(path, LEDGER_SCHEMA)
            self._owns_worker = True
        else:
            self._owns_worker = False
        self._worker = worker

    @property
    def path(self) -> Path:
        return self._worker.path

    async def saved(self, scope: Scope, session_id: str) -> set[str]:
        def q(conn: sqlite3.Connection) -> set[str]:
            rows = conn.execute(SELECT_SAVED, (scope.app_name, scope.user_id, session_id))
            return {r[0] for r in rows}

        return await self._worker.run(q)

    async def mark_saved(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        if not event_ids:
            return
        now = time.time()
        rows = [(scope.app_name, scope.user_id, session_id, e, now) for e in event_ids]

        def w(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.executemany(INSERT_SAVED, rows)

        await self._worker.run(w)

    async def forget(self, scope: Scope) -> None:
        def w(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(DELETE_SCOPE, (scope.app_name, scope.user_id))

        await self._worker.run(w)

    async def close(self) -> None:
        if self._owns_worker:
            await self._worker.close()


class MemoryLedger:
    """A ledger in this process's memory: for tests and throw-away scripts."""

    def __init__(self) -> None:
        self._saved: dict[tuple[str, str, str], set[str]] = {}

    async def saved(self, scope: Scope, session_id: str) -> set[str]:
        return set(self._saved.get((scope.app_name, scope.user_id, session_id), ()))

    async def mark_saved(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        self._saved.setdefault((scope.app_name, scope.user_id, session_id), set()).update(event_ids)

    async def forget(self, scope: Scope) -> None:
        for key in [k for k in self._saved if k[:2] == (scope.app_name, scope.user_id)]:
            del self._saved[key]

    async def close(self) -> None:
        return None
