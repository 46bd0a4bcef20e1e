"""The contract's memory life: expiry measured by an injected clock, and correction.

The seam: ``Expiry`` and ``Updating``, mixins of test methods over ``Fixtures``' ``open_memory``.
Each memory they open is given a clock the test moves (``LongTermMemory(clock=...)``): no test
sleeps. What a user would notice is checked on every read path: search (and a hit's context),
get, get_all, count, export (``iter_records``); after the sweep the words are gone from the store,
and neither a replay nor ``reconsider=True`` brings an expired or corrected memory back.

Why a clock and not sleeps: expiry is a promise about a moment, and a test that sleeps past it
is slow and, on a loaded machine, flaky; the engine only ever sees the moment a read is made at.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ... import LongTermMemory
from .. import make_session

APP, USER = "life-app", "life-user"
T0 = 1_900_000_000.0


class Clock:
    """A clock a test moves by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _every_read(memory: LongTermMemory, query: str) -> dict[str, list[str]]:
    """The texts each read path returns for the user (search with context, get, get_all, export)."""
    found = memory.search_sync(query, user_id=USER, top_k=10, context=2)
    listed = memory.get_all_sync(user_id=USER, limit=100).memories
    exported = memory.portal.call(_export(memory))
    return {
        "search": sorted(m.text for m in found),
        "context": sorted(c.text for m in found for c in m.context),
        "get": sorted(m.text for m in (memory.get_sync(x.id, user_id=USER) for x in listed) if m is not None),
        "get_all": sorted(m.text for m in listed),
        "export": sorted(exported),
        "count": [str(memory.portal.call(memory.count(app_name=APP, user_id=USER)))],
        "listed users": [str(n) for a, u, n in memory.portal.call(memory.scopes()) if (a, u) == (APP, USER)],
    }


async def _export(memory: LongTermMemory) -> list[str]:
    return [r.text async for r in memory.iter_records(app_name=APP, user_id=USER)]


class Expiry:
    """Expiry on every engine (module docstring)."""

    def test_a_memory_with_a_ttl_is_gone_from_every_read_the_moment_it_expires(
        self, open_memory: Callable[..., LongTermMemory]
    ) -> None:
        clock = Clock()
        memory = open_memory(app_name=APP, clock=clock)
        session = make_session(
            "trip",
            APP,
            USER,
            [("user", "my gate code is 5521 for the lighthouse"), ("user", "lighthouse tour at noon")],
        )
        memory.portal.call(memory.add_session_to_memory(session, ttl=60))
        memory.add_sync("the lighthouse keeper is called Ada", user_id=USER, session_id="kept")
        seen = _every_read(memory, "lighthouse")
        assert len(seen["search"]) == 3 and seen["count"] == ["3"]
        clock.now += 59.0
        assert _every_read(memory, "lighthouse")["count"] == ["3"], "alive until the moment"
        clock.now += 1.0
        after = _every_read(memory, "lighthouse")
        kept = ["the lighthouse keeper is called Ada"]
        assert {k: v for k, v in after.items() if k != "context"} == {
            "search": kept,
            "get": kept,
            "get_all": kept,
            "export": kept,
            "count": ["1"],
            "listed users": ["1"],  # stats, the UI's overview
        }
        assert after["context"] == [], "an expired turn is never a hit's context"
        memory.portal.call(memory.add_session_to_memory(session))  # a replay: still handled
        assert _every_read(memory, "lighthouse")["get_all"] == kept
        assert memory.sweep_expired_sync(user_id=USER) == 2
        memory.portal.call(memory.add_session_to_memory(session, reconsider=True))
        assert _every_read(memory, "lighthouse")["get_all"] == kept, "reconsider does not bring back what expired"

    def test_a_reconsidered_save_leaves_what_expired_unswept_expired(
        self, open_memory: Callable[..., LongTermMemory]
    ) -> None:
        """A process restarted without the ttl reconsiders a session whose memories expired before
        any sweep: they stay expired (the reconsidered save sweeps first)."""
        clock = Clock()
        memory = open_memory(app_name=APP, clock=clock)
        session = make_session("code", APP, USER, [("user", "the door code is 4417"), ("user", "door opens at 9")])
        memory.portal.call(memory.add_session_to_memory(session, ttl=60))
        clock.now += 61.0
        memory.portal.call(memory.add_session_to_memory(session, reconsider=True))  # no ttl this time
        clock.now += 1.0
        reads = _every_read(memory, "door")
        assert (reads["get_all"], reads["listed users"]) == ([], []), "reconsider brought back what had expired"
        assert memory.sweep_expired_sync(user_id=USER) == 0, "nothing expired was left in the store"

    def test_expiry_can_be_moved_and_a_default_ttl_applies_to_every_save(
        self, open_memory: Callable[..., LongTermMemory]
    ) -> None:
        clock = Clock()
        memory = open_memory(app_name=APP, clock=clock, ttl=100)
        saved = memory.add_sync("a one-time code 662810", user_id=USER)
        forever = memory.add_sync("my name is Ines", user_id=USER, ttl=None, expires_at=T0 + 10_000)
        (mid,) = saved.memory_ids
        moved = memory.extend_sync(mid, user_id=USER, ttl=1_000)
        assert moved is not None and moved.expires_at is not None
        assert moved.expires_at.timestamp() == T0 + 1_000
        clock.now += 500
        assert sorted(m.text for m in memory.get_all_sync(user_id=USER).memories) == [
            "a one-time code 662810",
            "my name is Ines",
        ]
        clock.now += 600
        assert [m.text for m in memory.get_all_sync(user_id=USER).memories] == ["my name is Ines"]
        assert memory.extend_sync(mid, user_id=USER, ttl=1_000) is None, "what expired cannot be brought back"
        assert forever.saved == 1


class Updating:
    """Correction on every engine (module docstring)."""

    def test_an_update_replaces_the_words_keeps_the_id_and_a_replay_keeps_the_new_words(
        self, open_memory: Callable[..., LongTermMemory]
    ) -> None:
        clock = Clock()
        memory = open_memory(app_name=APP, clock=clock)
        session = make_session("s", APP, USER, [("user", "my locker code is 4417"), ("user", "I like tea")])
        memory.portal.call(memory.add_session_to_memory(session))
        (old,) = [m for m in memory.get_all_sync(user_id=USER).memories if "locker" in m.text]
        clock.now += 5
        new = memory.update_sync(old.id, user_id=USER, text="my locker code is 9902", metadata={"topic": "gym"})
        assert new is not None and new.id == old.id and new.metadata == {"topic": "gym"}
        assert new.updated_at is not None and new.updated_at.timestamp() == T0 + 5
        assert [m.text for m in memory.search_sync("locker code", user_id=USER)][:1] == ["my locker code is 9902"]
        assert not any("4417" in m.text for m in memory.search_sync("4417", user_id=USER))
        assert memory.search_sync("9902", user_id=USER)[0].id == old.id
        merged = memory.update_sync(old.id, user_id=USER, metadata={"n": 1}, merge=True)
        assert merged is not None and {"topic": "gym", "n": 1}.items() <= merged.metadata.items()  # mem0 adds its id
        assert merged.text == "my locker code is 9902"
        for again in (False, True):
            memory.portal.call(memory.add_session_to_memory(session, reconsider=again))
            texts = sorted(m.text for m in memory.get_all_sync(user_id=USER).memories)
            assert texts == ["I like tea", "my locker code is 9902"], f"reconsider={again}"
        assert memory.update_sync("no-such-id", user_id=USER, text="x") is None

    def test_an_update_refuses_what_it_cannot_do_by_name(self, open_memory: Callable[..., LongTermMemory]) -> None:
        from ... import InvalidInputError

        memory = open_memory(app_name=APP)
        (mid,) = memory.add_sync("a note", user_id=USER).memory_ids
        for kwargs, named in (({}, "text="), ({"text": "  "}, "text"), ({"metadata": {"x": float("nan")}}, "NaN")):
            try:
                memory.update_sync(mid, user_id=USER, **kwargs)
            except InvalidInputError as exc:
                assert named in str(exc), (kwargs, str(exc))
            else:
                raise AssertionError(f"update({kwargs}) was not refused")

    def test_a_change_of_a_memory_erased_since_it_was_read_leaves_it_erased(
        self, open_memory: Callable[..., LongTermMemory]
    ) -> None:
        """An ``update`` or ``extend`` reads the memory, then writes it; an erase in between (another
        worker's ``delete``, ``delete_all``, an erase by date) wins: the change returns None and no
        read path finds the memory or its words."""
        memory = open_memory(app_name=APP)
        erases: dict[str, Callable[[str], Awaitable[object]]] = {
            "delete": lambda mid: memory.delete(mid, user_id=USER),
            "delete_all": lambda mid: memory.delete_all(user_id=USER),
            "by date": lambda mid: memory.delete_memories(app_name=APP, user_id=USER, before=T0 + 1e8),
        }
        for (name, erase), change in itertools.product(erases.items(), ("update", "extend")):
            (mid,) = memory.add_sync("my locker code is 4417", user_id=USER).memory_ids
            with _erased_after_its_read(erase):
                if change == "update":
                    got = memory.update_sync(mid, user_id=USER, text="my locker code is 9921")
                else:
                    got = memory.extend_sync(mid, user_id=USER, ttl=3_600)
            assert got is None, f"{change} after {name}: the erase lost"
            assert memory.get_sync(mid, user_id=USER) is None, f"{change} after {name} brought the memory back"
            assert not memory.search_sync("locker code 9921 4417", user_id=USER), f"{change} after {name}"
            assert memory.portal.call(memory.count(app_name=APP, user_id=USER)) == 0, f"{change} after {name}"


@contextmanager
def _erased_after_its_read(erase: Callable[[str], Awaitable[object]]) -> Iterator[None]:
    """Within it, a change's read of a memory is followed by ``erase(memory_id)`` before its write
    (what another worker's erase does when it comes in between)."""
    from ...memory.correcting import Corrector

    real = Corrector._found

    async def read_then_erased(self: Corrector, scope: Any, memory_id: str, at: float) -> Any:
        record = await real(self, scope, memory_id, at)
        await erase(memory_id)
        return record

    Corrector._found = read_then_erased  # type: ignore[method-assign]
    try:
        yield
    finally:
        Corrector._found = real  # type: ignore[method-assign]
