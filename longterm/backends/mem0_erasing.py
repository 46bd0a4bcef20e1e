"""mem0's erases in marked steps: the marks and the store's clock in its side ledger, and reads
that leave out what the marks cover.

The seam: ``Mem0Ledger`` is mem0's ``SideLedger`` with two tables more (``MARKS_SCHEMA``): the
store's clock (``tick``: one write transaction, the counter moved and returned) and its erasure
marks (``begin``, ``end``, ``erasures``). ``Mem0Erasures``, a base of ``Mem0Backend``, implements
``core.erasures``' four primitives over them and ``_remove`` of ids, and ``_visible(scope,
pairs)``, which every read of the engine passes what mem0 returned through. Each memory carries
the clock of the write that made it in its metadata (``SAVED``; none on one written before: older
than any erase, ``Erasure.covers``); ``_erasure_covered`` deletes the memories a mark covers, one
``delete`` each (mem0 has no other). An erase of ids (by date or filter, an expiry sweep, one
memory) is a mark of those record ids (``{"id": {"$in": ids}}``); a mem0 id (an inferred fact of
infer=True, a memory of its own) is one ``delete``, as before.

Why in the side ledger: it is the one place beside the store every process using it opens (the
ledger and meta live there already), and one SQLite transaction moves the clock and writes a mark
together. Why a counter: "saved before the erase" is decided by the store's clock, never by
comparing processes' wall clocks. Why reads filter in our code: mem0's filters are its vector
store's language (and none on the platform); a search that lost hits to a mark asks mem0 again
for more (``deeper``) until ``top_k`` are visible or mem0 has no more.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import override

from ..core.erasures import Erasure, ErasureMarks, covering, hider
from ..core.ledger import SideLedger
from ..core.sqlite import schema_missing, write_transaction
from ..records import MemoryRecord, Scope

if TYPE_CHECKING:
    from ..core.erasures import MarkedErases

#: The metadata key holding the store's clock when a memory was written.
SAVED = "lt_saved"
#: Most memories a search asks mem0 for while marks hide some (``Mem0Erasures._deeper``).
MAX_ASKED = 100_000
MARKS_SCHEMA = """
CREATE TABLE IF NOT EXISTS mem0_clock (
    store TEXT PRIMARY KEY,
    now   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS mem0_erasures (
    store    TEXT NOT NULL,
    app_name TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    key      TEXT NOT NULL,
    spec     TEXT NOT NULL,
    before   INTEGER NOT NULL,
    PRIMARY KEY (store, key)
) WITHOUT ROWID;
"""
TICK = "INSERT INTO mem0_clock (store, now) VALUES (?, 1) ON CONFLICT (store) DO UPDATE SET now = now + 1 RETURNING now"
INSERT_MARK = "INSERT INTO mem0_erasures (store, app_name, user_id, key, spec, before) VALUES (?, ?, ?, ?, ?, ?)"
DELETE_MARK = "DELETE FROM mem0_erasures WHERE store = ? AND key = ?"
SELECT_MARKS = "SELECT spec, before FROM mem0_erasures WHERE store = ? ORDER BY before"
SELECT_SCOPE_MARKS = (
    "SELECT spec, before FROM mem0_erasures WHERE store = ? AND app_name = ? AND user_id = ? ORDER BY before"
)
T = TypeVar("T")
#: mem0 memories (as its replies give them) with the records they hold.
Pairs = list[tuple[dict[str, Any], MemoryRecord]]


class Mem0Ledger(SideLedger):
    """A ``SideLedger`` that keeps mem0's clock and erasure marks too (see the module docstring)."""

    _made = False

    def _book(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` on the ledger's connection, the marks' tables made first if the file lacks them."""

        def run(conn: sqlite3.Connection) -> T:
            if not self._made:
                if schema_missing(conn, MARKS_SCHEMA):
                    conn.executescript(f"BEGIN IMMEDIATE;\n{MARKS_SCHEMA}\nCOMMIT;")
                self._made = True
            return fn(conn)

        return self._with(run)

    def tick(self) -> int:
        """Move the store's clock; where it is now."""

        def w(conn: sqlite3.Connection) -> int:
            with write_transaction(conn):
                return int(conn.execute(TICK, (self.store_id,)).fetchone()[0])

        return self._book(w)

    def begin(self, erasure: Erasure) -> Erasure:
        """Move the clock and write ``erasure``'s mark at it, in one transaction; the stamped erasure."""

        def w(conn: sqlite3.Connection) -> Erasure:
            with write_transaction(conn):
                now = int(conn.execute(TICK, (self.store_id,)).fetchone()[0])
                row = (self.store_id, erasure.app_name, erasure.user_id, erasure.key, erasure.spec(), now)
                conn.execute(INSERT_MARK, row)
            return erasure.stamped(float(now))

        return self._book(w)

    def end(self, erasure: Erasure) -> None:
        def w(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(DELETE_MARK, (self.store_id, erasure.key))

        self._book(w)

    def erasures(self, scope: Scope | None = None) -> list[Erasure]:
        """The pending marks of ``scope`` (None: of the store), oldest first."""
        query, args = SELECT_MARKS, [self.store_id]
        if scope is not None:
            query, args = SELECT_SCOPE_MARKS, [self.store_id, scope.app_name, scope.user_id]
        rows = self._book(lambda conn: conn.execute(query, args).fetchall())
        return [Erasure.of(spec, float(before)) for spec, before in rows]


def stamp(payload: Mapping[str, Any]) -> float | None:
    """The clock a memory was written at, from its metadata (or its point's payload); None: written
    before the store kept one."""
    value = payload.get(SAVED)
    return None if value is None else float(value)


def stamp_of(item: Mapping[str, Any]) -> float | None:
    """``stamp`` of a mem0 memory as its replies give it."""
    return stamp(item.get("metadata") or {})


class Mem0Erasures(ErasureMarks):
    """The marked erases of ``Mem0Backend`` (see the module docstring)."""

    if TYPE_CHECKING:  # ``Mem0Backend``'s
        _mem: Any
        marks_book: Mem0Ledger
        erasing: MarkedErases | None

        def _serial(self) -> Any: ...

        def _items(self, scope: Scope, where: Any = None, hide: bool = True, **filters: Any) -> Any: ...

    def _visible(self, scope: Scope, pairs: Pairs) -> Pairs:
        """``pairs`` (mem0 memories, records) less what the scope's erasure marks cover."""
        marks = self.marks_book.erasures(scope)
        if not marks:
            return pairs
        hidden = hider(marks)
        return [(i, r) for i, r in pairs if not hidden(r, stamp_of(i))]

    def _deeper(self, scope: Scope, k: int, ask: Callable[[int], tuple[int, Pairs]]) -> Pairs:
        """The best ``k`` visible of what ``ask(n)`` returns (how many memories mem0 gave of the ``n``
        asked for, and the pairs of them to keep): asked again for more while marks hid some and
        mem0 may hold more (an erase under way: a search still returns ``k``)."""
        n = k
        while True:
            got, pairs = ask(n)
            kept = self._visible(scope, pairs)
            if len(kept) >= k or len(kept) == len(pairs) or got < n or n >= MAX_ASKED:
                return kept[:k]
            n = min(MAX_ASKED, 2 * n + len(pairs) - len(kept))

    @override
    def _erasure_begin(self, erasure: Erasure) -> Erasure:
        return self.marks_book.begin(erasure)

    @override
    def _erasure_covered(self, erasure: Erasure) -> int:
        """Delete the memories ``erasure`` covers, one at a time (the lock held for each only); how many
        records went."""
        test = covering(erasure)
        with self._serial():
            items = [(i, r) for i, r in self._items(erasure.scope, hide=False) if test(r, stamp_of(i))]
        for item, _ in items:
            self._drop(item["id"])
        return len({r.id for _, r in items})

    def _drop(self, memory_id: str) -> None:
        """mem0's ``delete`` of one memory; one already gone (another process finished the same erase) is fine."""
        with self._serial():
            try:
                self._mem.delete(memory_id)
            except ValueError as exc:
                if "not found" not in str(exc):
                    raise

    @override
    def _erasure_end(self, erasure: Erasure) -> None:
        self.marks_book.end(erasure)

    @override
    def _erasures_pending(self) -> list[Erasure]:
        return self.marks_book.erasures()

    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        """Record ids as a marked erase; mem0's own ids (an inferred fact's) one ``delete`` each."""
        assert self.erasing is not None
        if ids is None:
            return self.erasing.erase(scope, session_id)
        wanted = set(ids)
        with self._serial():
            items = self._items(scope, hide=False)
        records = sorted({r.id for _, r in items if r.id in wanted})
        own = [(i, r) for i, r in items if i.get("id") in wanted and r.id not in wanted]
        n = self.erasing.erase(scope, session_id, {"id": {"$in": records}}) if records else 0
        for item, _ in own:
            self._drop(item["id"])
        return n + len({r.id for _, r in own})
