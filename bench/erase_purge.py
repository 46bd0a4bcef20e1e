"""Cost of an erase that leaves nothing behind (local): with the purge, and without it.

    python bench/erase_purge.py [--sizes 100000 1000000] [--users 1000]

An erase on the local store deletes the rows (``secure_delete`` zeroes what they held), then
merges the full-text index into one segment (FTS5 ``optimize``: the deleted rows' terms go;
SQLite 3.40 has no FTS5 ``secure-delete``) and checkpoints and truncates the WAL. Both cost
in proportion to the whole index, not to what is erased. Each size builds one store through
the store's own write primitive (records of ``users`` users, sessions of 50), then erases,
alternating, one memory, one session and one user with the purge and without it (the same
store, other users); it prints a table and asserts nothing.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import texts
from rich.console import Console
from rich.table import Table

from longterm.backends.local import LocalBackend
from longterm.records import MemoryRecord, Scope, record_id

APP = "bench"
PER_SESSION = 50
BATCH = 5_000


class NoPurge(LocalBackend):
    """The erase as it was: rows deleted, the index and the WAL left as they are."""

    def _purge(self, conn):  # type: ignore[no-untyped-def]
        pass

    def _truncate_wal(self) -> None:
        pass


def build(path: Path, n: int, users: int) -> None:
    pool = texts(20_000, seed=3)
    store = LocalBackend(path)
    store._open()
    batch: list[MemoryRecord] = []
    for i in range(n):
        user, session = f"u{i % users}", f"s{(i // users) // PER_SESSION}"
        event = f"e{i}"
        batch.append(
            MemoryRecord(
                id=record_id(APP, user, session, event),
                app_name=APP,
                user_id=user,
                session_id=session,
                event_id=event,
                author="user",
                role="user",
                text=f"{pool[i % len(pool)]} w{i}",
                content={"role": "user", "parts": [{"text": pool[i % len(pool)]}]},
                timestamp=1_700_000_000.0 + i,
            )
        )
        if len(batch) == BATCH:
            store._write(batch, None)
            batch = []
    if batch:
        store._write(batch, None)
    store._close()


def erase(path: Path, purge: bool, user: str, **what: object) -> tuple[int, float]:
    store = (LocalBackend if purge else NoPurge)(path)
    store._open()
    try:
        scope = Scope(app_name=APP, user_id=user)
        ids = what.get("ids")
        start = time.perf_counter()
        gone = store._remove(scope, ids, what.get("session_id"))  # type: ignore[arg-type]
        return gone, time.perf_counter() - start
    finally:
        store._close()


def first_id(path: Path, user: str) -> str:
    store = LocalBackend(path)
    store._open()
    try:
        records, _ = store._page(Scope(app_name=APP, user_id=user), None, 1)
        return records[0].id
    finally:
        store._close()


def what(case: str, path: Path, user: str) -> dict[str, object]:
    if case == "one memory":
        return {"ids": [first_id(path, user)]}
    return {"session_id": "s0"} if case == "one session" else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--users", type=int, default=1_000)
    args = parser.parse_args()
    for n in args.sizes:  # a table per size, printed as soon as it is measured
        table = Table(title=f"local erase at {n:,} records: purge (FTS5 optimize + WAL truncate) vs none, same store")
        for col in ("erased", "records erased", "no purge ms", "purge ms", "ratio", "file MB"):
            table.add_column(col, justify="right")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "memory.db"
            start = time.perf_counter()
            build(path, n, args.users)
            built = time.perf_counter() - start
            for k, case in enumerate(("one memory", "one session", "one user")):
                # Users 2k and 2k+1: without the purge first, then with it, on the same index size.
                plain_n, plain = erase(path, False, f"u{2 * k}", **what(case, path, f"u{2 * k}"))
                purged_n, purged = erase(path, True, f"u{2 * k + 1}", **what(case, path, f"u{2 * k + 1}"))
                size = path.stat().st_size / 1e6
                ratio = f"{purged / plain:.0f}x"
                table.add_row(
                    case, f"{plain_n} / {purged_n}", f"{plain * 1000:.1f}", f"{purged * 1000:.0f}", ratio, f"{size:.0f}"
                )
        Console().print(table)
        print(
            f"built in {built:.0f} s through LocalBackend._write; SQLite {sqlite3.sqlite_version}, secure_delete=ON in both"
        )


if __name__ == "__main__":
    main()
