"""A forked child changing the store's schema while the parent searches: the parent's search answers.

A forked worker's first save of a user makes that user's full-text table (``schema.BUCKET_DDL``):
the schema changes under the parent's connections, and each builds its FTS5 tables anew (FTS5's
``xConnect``) on its next statement, reading their config in a read of its own. A second change
landing at that moment failed the parent's search with "vtable constructor failed: records_fts_1"
(SQLITE_SCHEMA: SQLite prepares a statement again once, and the change came again); seen once
under load, three parent threads saving, searching and erasing while forked children saved.

Here the changes land at that precise moment: a hook on the parent's reader connections (their
authorizer, which SQLite asks about ``sqlite_master`` as FTS5 builds a table) has a forked
child save a new user, and waits until it did, at each of the first two builds.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from longterm import LongTermMemory
from longterm.backends.local import store as local_store

#: How many times the child's schema change lands while a parent reader builds its FTS5 table:
#: two, as many as SQLite's own attempts at the statement (its first and its one re-prepare).
LANDINGS = 2


def _child(memory: LongTermMemory, go: int, done: int) -> None:
    """In the forked child: a save of a new user (a new full-text table) each time it is asked."""
    signal.alarm(15)  # a hang ends the child, and fails the test
    code = 1
    try:
        k = 0
        while os.read(go, 1) == b"g":
            memory.add_sync(f"the child grows lilacs {k}", user_id=f"kid{k}")
            os.write(done, b"d")
            k += 1
        code = 0
    finally:
        os._exit(code)


def test_a_parent_search_answers_while_a_forked_child_changes_the_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent, armed, landed = os.getpid(), [False], list[str]()
    ask: list[Callable[[], None]] = []

    def hook(action: int, table: str | None, column: str | None, db: str | None, trigger: str | None) -> int:
        # FTS5 building a table: SQLite asks about sqlite_master (its "type" first); the change lands now.
        building = table == "sqlite_master" and column == "type"
        if building and armed[0] and os.getpid() == parent and len(landed) < LANDINGS:
            landed.append("type")
            ask[0]()
        return sqlite3.SQLITE_OK

    def hooked_reader(path: str | Path) -> sqlite3.Connection:
        conn = real_reader(path)
        conn.set_authorizer(hook)
        return conn

    real_reader = local_store.reader
    monkeypatch.setattr(local_store, "reader", hooked_reader)
    memory = LongTermMemory(app_name="app", backend_config={"path": str(tmp_path / "m.db")}, timeout=20)
    memory.add_sync("the parent grows tulips", user_id="u1")
    assert memory.search_sync("tulips", user_id="u1")  # the readers built records_fts_1

    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.close(done_r)
        _child(memory, go_r, done_w)
    os.close(go_r)
    os.close(done_w)

    def child_saves_a_new_user() -> None:
        os.write(go_w, b"g")
        assert os.read(done_r, 1) == b"d", "the child did not save"

    ask.append(child_saves_a_new_user)
    try:
        child_saves_a_new_user()  # the schema changed: the parent's readers build their FTS5 tables anew
        armed[0] = True
        found = memory.search_sync("tulips", user_id="u1")
        armed[0] = False
    finally:
        os.close(go_w)  # the child's loop ends
        status = os.waitpid(pid, 0)[1]
        os.close(done_r)
    assert landed == ["type"] * LANDINGS, f"the child's change landed {len(landed)} times while a reader built"
    assert [m.text for m in found] == ["the parent grows tulips"]
    assert status == 0, f"the child failed: status {status}"
    assert memory.search_sync("lilacs", user_id="kid2")  # the parent sees the child's saves
    memory.close_sync()
