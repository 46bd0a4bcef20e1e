"""The ledger: which events of each session a store has already handled.

The seam: a ``Ledger`` answers ``saved(scope, session_id)`` (event ids already handled)
and records ``mark_saved(...)`` after the store confirmed a write. Every ``Engine`` is its
own ledger (``core.engine``): the ledger lives inside the store it describes wherever the
engine can hold it (the local file, in the same transaction as the records; Redis under
the same prefix and index; an OpenSearch ledger index; ...). Another store, index or home
never inherits it: a store that lacks a record was never told it has it.

"Handled" means written, or dropped by the policy in force at that save: each event is
considered once, so a replay reports nothing new. Erasing memories does not touch the
ledger: what a user erased stays erased, even while the session that said it is still
live and saved again; new events are saved. Re-considering a session's events under
another policy is explicit (``add_session_to_memory(..., reconsider=True)``).

Why a set of event ids and not a position: sessions can be rewound or edited and events
arrive out of order; ids are what the record ids are derived from. The ledger is an
optimisation on top of idempotent upserts: if it is lost, the next save rewrites the same
ids and duplicates nothing.

``SideLedger`` is for engines that cannot hold a ledger themselves (a hosted service):
one SQLite file beside them, every row keyed by the store's identity.

``StoreLedger`` is what moving a scope to another index or to its NFC ids needs beyond ``Ledger``
(``memory.moving``): the sessions the ledger holds for a scope (None: it cannot list them) and the
values it keeps about its store (a one-time move's marker). An ``Engine`` is one (its base
``EngineStoreLedger``: its primitives on its own workers), as are ``HomeLedger`` and ``MemoryLedger``;
``store_ledger(ledger)`` is None for a ledger of the user's that is not (a move then refuses,
never half done).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from ..records import Scope
from .fork import keep
from .sqlite import connect, write_transaction

SIDE_SCHEMA = """
CREATE TABLE IF NOT EXISTS side_ledger (
    store      TEXT NOT NULL,
    app_name   TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    event_id   TEXT NOT NULL,
    saved_at   REAL NOT NULL,
    PRIMARY KEY (store, app_name, user_id, session_id, event_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS side_meta (
    store TEXT NOT NULL,
    key   TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (store, key)
) WITHOUT ROWID;
"""
SELECT_SAVED = "SELECT event_id FROM side_ledger WHERE store = ? AND app_name = ? AND user_id = ? AND session_id = ?"
SELECT_SESSIONS = (
    "SELECT DISTINCT session_id FROM side_ledger WHERE store = ? AND app_name = ? AND user_id = ? ORDER BY session_id"
)
INSERT_SAVED = (
    "INSERT OR IGNORE INTO side_ledger (store, app_name, user_id, session_id, event_id, saved_at) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
SELECT_META_ALL = "SELECT store, value FROM side_meta WHERE key = ?"
ANY_SAVED = "SELECT 1 FROM side_ledger WHERE store = ? LIMIT 1"
SELECT_META = "SELECT value FROM side_meta WHERE store = ? AND key = ?"
T = TypeVar("T")

UPSERT_META = (
    "INSERT INTO side_meta (store, key, value) VALUES (?, ?, ?) "
    "ON CONFLICT (store, key) DO UPDATE SET value = excluded.value"
)


@runtime_checkable
class Ledger(Protocol):
    """What the facade needs of a ledger (``ledger=`` on ``LongTermMemory``)."""

    async def saved(self, scope: Scope, session_id: str) -> set[str]: ...

    async def mark_saved(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class StoreLedger(Protocol):
    """What moving a scope needs of its ledger beyond ``Ledger`` (module docstring)."""

    async def sessions(self, scope: Scope) -> list[str] | None:
        """The session ids the ledger holds for ``scope`` (None: it cannot list them)."""

    async def meta(self, key: str) -> str | None:
        """A value kept about the store (None: never set)."""

    async def set_meta(self, key: str, value: str) -> None: ...


class SideLedger:
    """A blocking ledger (and meta) in a SQLite file beside a store, keyed by the store's
    identity. Engines call it from their own threads (``core.engine``)."""

    def __init__(self, path: str | Path, store_id: str) -> None:
        self.path = Path(path).expanduser()
        self.store_id = store_id
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _with(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._conn is None:
                self._conn = connect(self.path, SIDE_SCHEMA)
            return fn(self._conn)

    def saved(self, scope: Scope, session_id: str) -> set[str]:
        args = (self.store_id, scope.app_name, scope.user_id, session_id)
        return self._with(lambda conn: {r[0] for r in conn.execute(SELECT_SAVED, args)})

    def sessions(self, scope: Scope) -> list[str]:
        """The session ids this ledger holds for ``scope``."""
        args = (self.store_id, scope.app_name, scope.user_id)
        return self._with(lambda conn: [r[0] for r in conn.execute(SELECT_SESSIONS, args)])

    def mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        now = time.time()
        rows = [(self.store_id, scope.app_name, scope.user_id, session_id, e, now) for e in event_ids]

        def w(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.executemany(INSERT_SAVED, rows)

        self._with(w)

    def meta_get(self, key: str) -> str | None:
        row = self._with(lambda conn: conn.execute(SELECT_META, (self.store_id, key)).fetchone())
        return None if row is None else str(row[0])

    def meta_set(self, key: str, value: str) -> None:
        def w(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(UPSERT_META, (self.store_id, key, value))

        self._with(w)

    def meta_everywhere(self, key: str) -> dict[str, str]:
        """``key``'s value for every store this file holds rows of, by store identity."""
        rows = self._with(lambda conn: conn.execute(SELECT_META_ALL, (key,)).fetchall())
        return {str(store): str(value) for store, value in rows}

    def holds(self) -> bool:
        """Whether this store's ledger has any entry."""
        row = self._with(lambda conn: conn.execute(ANY_SAVED, (self.store_id,)).fetchone())
        return row is not None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def forget(self) -> None:
        """In a forked child: drop the parent's connection unclosed (SQLite forbids using one across
        a fork; closing it could touch the parent's locks), and a new lock; the next call connects anew."""
        if self._conn is not None:
            keep(self._conn)
        self._conn, self._lock = None, threading.Lock()


class MemoryLedger:
    """A ledger in this process's memory: for tests and throw-away scripts."""

    def __init__(self) -> None:
        self._saved: dict[tuple[str, str, str], set[str]] = {}
        self._meta: dict[str, str] = {}

    async def sessions(self, scope: Scope) -> list[str] | None:
        return sorted(s for a, u, s in self._saved if (a, u) == (scope.app_name, scope.user_id))

    async def meta(self, key: str) -> str | None:
        return self._meta.get(key)

    async def set_meta(self, key: str, value: str) -> None:
        self._meta[key] = value

    async def saved(self, scope: Scope, session_id: str) -> set[str]:
        return set(self._saved.get((scope.app_name, scope.user_id, session_id), ()))

    async def mark_saved(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        self._saved.setdefault((scope.app_name, scope.user_id, session_id), set()).update(event_ids)

    async def close(self) -> None:
        return None


class HomeLedger:
    """An async ledger for a backend that keeps none (a third-party ``Backend`` that is not an
    ``Engine``): a ``SideLedger`` in ``$LONGTERM_HOME/ledger.db``, keyed by the store's identity."""

    def __init__(self, path: str | Path, store_id: str) -> None:
        self._side = SideLedger(path, store_id)

    async def saved(self, scope: Scope, session_id: str) -> set[str]:
        return await asyncio.to_thread(self._side.saved, scope, session_id)

    async def mark_saved(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        if event_ids:
            await asyncio.to_thread(self._side.mark, scope, session_id, event_ids)

    async def sessions(self, scope: Scope) -> list[str] | None:
        return await asyncio.to_thread(self._side.sessions, scope)

    async def meta(self, key: str) -> str | None:
        return await asyncio.to_thread(self._side.meta_get, key)

    async def set_meta(self, key: str, value: str) -> None:
        await asyncio.to_thread(self._side.meta_set, key, value)

    async def close(self) -> None:
        self._side.close()


class EngineStoreLedger:
    """``StoreLedger`` on an ``Engine`` (a base of it): its ``_ledger_sessions``, ``_meta_get`` and
    ``_meta_set`` primitives on its own workers. An engine that keeps its ledger but implements no
    ``_ledger_sessions`` (the default then raises ``NotImplementedError``) cannot list: None."""

    if TYPE_CHECKING:  # ``Engine``'s

        async def _run(self, what: str, fn: Callable[..., T], *args: object) -> T: ...

        def _ledger_sessions(self, scope: Scope) -> list[str]: ...

        def _meta_get(self, key: str) -> str | None: ...

        def _meta_set(self, key: str, value: str) -> None: ...

    def _listed_sessions(self, scope: Scope) -> list[str] | None:
        try:
            return self._ledger_sessions(scope)
        except NotImplementedError:
            return None

    async def sessions(self, scope: Scope) -> list[str] | None:
        """The session ids this store's ledger holds for ``scope`` (None: it cannot list them)."""
        return await self._run("reading the ledger", self._listed_sessions, scope)

    async def meta(self, key: str) -> str | None:
        """A value the store keeps about itself (None: never set)."""
        return await self._run("reading the store's meta", self._meta_get, key)

    async def set_meta(self, key: str, value: str) -> None:
        await self._run("writing the store's meta", self._meta_set, key, value)


def store_ledger(ledger: object) -> StoreLedger | None:
    """``ledger`` as a ``StoreLedger`` (module docstring); None when it cannot list or keep meta."""
    return ledger if isinstance(ledger, StoreLedger) else None
