"""The local store's session reads, in two steps: the windows around the anchors, then their records.

The seam: ``LocalSessions``, a base of ``LocalBackend``, implements the two steps of
``core.neighbours`` on the reader's connection. ``_session_positions`` finds each anchor by its
(scope, session, event) (the UNIQUE index; one whose id differs is not the anchor: ([], [])),
then walks ``records_by_session`` (scope, session, time) from its entry to the ``before`` rows
just before it and the ``after`` just after it, in session order (time, then rowid: the order
the store saved them); ``_records_at`` then reads and parses only those rows, by rowid. Every
statement is bound to the scope's id, so nothing of another scope is read.

``_ledger_sessions`` lists the session ids of a scope's ledger: its rows, and the sessions of its
records (a record is its own event's ledger entry, ``store.LocalBackend._commit``), for moving a
scope (``memory.moving``).

Why windows and not a session's every row: a read of all of a session's rows touches a page per
row where sessions were saved a turn at a time among other users' (an agent saving after each
turn): at 100k records, five hits in sessions of 50 turns, 1.0 ms against 0.4 ms for the windows;
of 500 turns, 3.0 ms against the same 0.4 ms (``bench/neighbours.py``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from typing_extensions import override

from ...core.neighbours import Positions, SessionReads
from ...records import MemoryRecord, Scope
from . import schema as sql
from .rows import to_record

#: Rowids read per statement: under SQLite's smallest limit of host parameters (999 before 3.32).
CHUNK = 500
#: A scope's ledger sessions: its ledger rows' and its records' (by ``records_by_session``).
LEDGER_SESSIONS = """
SELECT session_id FROM ledger WHERE scope = ?1 UNION SELECT session_id FROM records WHERE scope = ?1 ORDER BY 1
"""


def _hex(stored: bytes | str) -> str:
    """A stored id as records carry it (``schema.stored_id`` backwards)."""
    return stored.hex() if isinstance(stored, bytes) else stored


class LocalSessions(SessionReads):
    """The two steps of a hit's neighbours on the local store (see the module docstring)."""

    if TYPE_CHECKING:  # ``LocalBackend``'s, which this is a base of

        @property
        def conn(self) -> sqlite3.Connection: ...

        def _reader(self) -> sqlite3.Connection: ...

        def _scope(
            self, app: str, user: str, *, create: bool = False, conn: sqlite3.Connection | None = None
        ) -> int | None: ...

    @override
    def _session_positions(self, scope: Scope, anchors: Sequence[MemoryRecord], before: int, after: int) -> Positions:
        conn = self._reader()
        scope_id = self._scope(scope.app_name, scope.user_id, conn=conn)
        if scope_id is None:
            return {}
        rows: dict[str, dict[int, tuple[float, str]]] = {}  # per session: rowid -> (time, id)
        for a in anchors:
            anchor = conn.execute(sql.ANCHOR, (scope_id, a.session_id, a.event_id)).fetchone()
            if anchor is None or _hex(anchor[1]) != a.id:
                continue
            rowid, at = anchor[0], anchor[2]
            window = [anchor]
            if before:
                window += conn.execute(sql.BEFORE, (scope_id, a.session_id, at, rowid, before)).fetchall()
            if after:
                window += conn.execute(sql.AFTER, (scope_id, a.session_id, at, rowid, after)).fetchall()
            rows.setdefault(a.session_id, {}).update((r[0], (r[2], _hex(r[1]))) for r in window)
        return {  # each session's windows in session order: by time, then rowid
            sid: [(rid, rowid) for rowid, (_, rid) in sorted(by_rowid.items(), key=lambda kv: (kv[1][0], kv[0]))]
            for sid, by_rowid in rows.items()
        }

    @override
    def _records_at(self, scope: Scope, keys: Sequence[object]) -> list[MemoryRecord | None]:
        conn = self._reader()
        scope_id = self._scope(scope.app_name, scope.user_id, conn=conn)
        found: dict[object, MemoryRecord] = {}
        for i in range(0, len(keys) if scope_id is not None else 0, CHUNK):
            part = keys[i : i + CHUNK]
            query = sql.BY_ROWIDS.format(",".join("?" * len(part)))
            found.update((row[0], to_record(row[1:], scope)) for row in conn.execute(query, (*part, scope_id)))
        return [found.get(k) for k in keys]

    def _ledger_sessions(self, scope: Scope) -> list[str]:
        """The scope's ledger sessions, on the writer's connection (as ``_ledger_saved`` reads)."""
        scope_id = self._scope(scope.app_name, scope.user_id)
        return [] if scope_id is None else [str(r[0]) for r in self.conn.execute(LEDGER_SESSIONS, (scope_id,))]
