"""The contract's bulk erase: by session, by date and by filter, leaving exactly the others.

The seam: ``ErasingBy``, a mixin of test methods over ``Fixtures``' ``open_memory``: each saves
sessions as an agent does, erases some by ``delete_all(session_id=, before=, filters=)``, and
checks what a user would: exactly the others are left, a dry run erases nothing and counts
right, and a replay of the saved sessions brings nothing back (the ledger keeps them handled).

Why through sessions and not records: "nothing comes back on replay" is a promise about the
ledger, which only a save moves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import LongTermMemory
from .. import make_session

APP, USER = "erase-by-app", "erase-by-user"
DAY = 86_400.0
OLD, NEW = 1_700_000_000.0, 1_700_000_000.0 + 30 * DAY


def _texts(memory: LongTermMemory) -> list[str]:
    return sorted(m.text for m in memory.get_all_sync(user_id=USER, limit=1000).memories)


def _sessions() -> list[dict[str, Any]]:
    old = make_session("old", APP, USER, [("user", "my old locker code is 4417"), ("user", "old note two")], OLD)
    new = make_session("new", APP, USER, [("user", "the new flat has a balcony"), ("user", "new note two")], NEW)
    tagged = make_session("tagged", APP, USER, [("user", "a travel plan for Lisbon")], NEW + DAY)
    return [old, new, tagged]


class ErasingBy:
    """Bulk erase on every engine (module docstring)."""

    def _saved(self, open_memory: Callable[..., LongTermMemory]) -> LongTermMemory:
        memory = open_memory(app_name=APP)
        for s in _sessions():
            meta = {"topic": "travel"} if s["id"] == "tagged" else {"topic": "home"}
            memory.add_sync([e["content"] for e in s["events"]], user_id=USER, session_id=s["id"], metadata=meta)
        return memory

    def test_erasing_before_a_date_leaves_exactly_the_later_ones_and_a_replay_adds_nothing(
        self, open_memory: Callable[..., LongTermMemory]
    ) -> None:
        memory = open_memory(app_name=APP)
        for s in _sessions():
            memory.portal.call(memory.add_session_to_memory(s))
        everything = _texts(memory)
        assert memory.delete_all_sync(user_id=USER, before=NEW - DAY, dry_run=True) == 2
        assert _texts(memory) == everything, "a dry run erases nothing"
        assert memory.delete_all_sync(user_id=USER, before=NEW - DAY) == 2
        left = ["a travel plan for Lisbon", "new note two", "the new flat has a balcony"]
        assert _texts(memory) == left
        for s in _sessions():  # the old session replayed: still handled in the ledger
            memory.portal.call(memory.add_session_to_memory(s))
        assert _texts(memory) == left
        hits = memory.search_sync("locker code", user_id=USER, top_k=5)
        assert not any("locker" in m.text for m in hits)

    def test_erasing_by_filter_and_by_session_leaves_exactly_the_others(
        self, open_memory: Callable[..., LongTermMemory]
    ) -> None:
        memory = self._saved(open_memory)
        assert memory.delete_all_sync(user_id=USER, filters={"topic": "travel"}, dry_run=True) == 1
        assert memory.delete_all_sync(user_id=USER, filters={"topic": "travel"}) == 1
        assert "a travel plan for Lisbon" not in _texts(memory)
        assert memory.delete_all_sync(user_id=USER, session_id="old", filters={"topic": "home"}) == 2
        assert _texts(memory) == ["new note two", "the new flat has a balcony"]
        assert memory.delete_all_sync(user_id=USER, filters={"topic": "nothing has this"}) == 0
        assert len(_texts(memory)) == 2
