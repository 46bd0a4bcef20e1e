"""A store of the previous release keeps answering: a user split over two indices is joined once,
on the first use of a memory not told its index (issue 41, item 2), on every engine.

The store is made as the previous release made it, by memories told their index that do not mark
it joined (``tests.earlier``): README's first
block (``LongTermMemory(app_name="travel")``, index ``travel``) and its second
(``LongTermMemory()`` saving with ``app_name="travel"``, index ``default_app``) both saved alice,
and ``default_app`` holds a user of a second app (shop). One of alice's memories was erased
(its event stays in the ledger). A plain ``LongTermMemory()`` then finds alice in one index with
everything, the erased event still erased, nothing saved twice, and the store marked joined;
opening it again moves nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from longterm import LongTermMemory
from longterm.core.ledger import store_ledger
from longterm.memory.joining import MARKER
from longterm.testing import make_session
from tests.earlier import earlier_release

ALICE_S1 = make_session("s1", app="travel", user="alice", turns=[("user", "My passport expires in August")])
ALICE_S2 = make_session(
    "s2", app="travel", user="alice", turns=[("user", "I fly to Oslo on Friday"), ("user", "my PIN is 4471")]
)
ALICE_S3 = make_session("s3", app="travel", user="alice", turns=[("user", "I prefer aisle seats")])
BOB = make_session("b1", app="travel", user="bob", turns=[("user", "I collect stamps")])
CAROL = make_session("c1", app="shop", user="carol", turns=[("user", "I buy green tea")])
JOINED = "joined the store once"


def opened(backend_name: str, backend_config: dict[str, Any], **where: Any) -> LongTermMemory:
    return LongTermMemory(backend=backend_name, backend_config=backend_config, **where)


def old_store(backend_name: str, backend_config: dict[str, Any]) -> None:
    """The store the previous release left: alice in ``travel`` and ``default_app`` (s1 in both, as
    both README blocks saved it), her PIN erased in ``travel``; bob and carol in ``default_app``."""
    with earlier_release():
        _old_store(backend_name, backend_config)


def _old_store(backend_name: str, backend_config: dict[str, Any]) -> None:
    with opened(backend_name, backend_config, index="travel") as first:
        for session in (ALICE_S1, ALICE_S2):
            assert first.add_session_to_memory_sync(session).saved == len(session["events"])
        found = first.search_memory_sync(app_name="travel", user_id="alice", query="PIN 4471").memories
        [pin] = [m for m in found if "PIN" in m.content.parts[0].text]  # mem0's one arm finds every memory
        assert first.delete_memory_sync(app_name="travel", user_id="alice", memory_id=pin.id) == 1
    with opened(backend_name, backend_config, index="default_app") as second:
        for session in (ALICE_S1, ALICE_S3, BOB, CAROL):
            assert second.add_session_to_memory_sync(session).saved == 1
        assert second.indices_sync() == ["default_app", "travel"]


def rows(memory: LongTermMemory) -> dict[tuple[str, str, str], int]:
    """(index, app, user) -> memories, over every index of the store."""
    return {(i, a, u): n for i in memory.indices_sync() for a, u, n in memory.scopes_sync(index=i)}


def marked(memory: LongTermMemory, index: str) -> bool:
    async def read() -> bool:
        ledger = (await memory.located("travel", "alice")).ledger if index == "travel" else memory.event_ledger
        meta = store_ledger(ledger)
        assert meta is not None
        return await meta.meta(MARKER) == "1"

    return memory.portal.call(read())


def test_a_user_split_over_two_indices_is_joined_once_with_the_ledger(
    backend_name: str, backend_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    old_store(backend_name, backend_config)
    caplog.set_level(logging.INFO, logger="longterm.memory.joining")
    with opened(backend_name, backend_config) as memory:
        assert rows(memory) == {
            ("travel", "travel", "alice"): 3,  # s1 once, s2 without the erased PIN, s3
            ("default_app", "travel", "bob"): 1,  # in one index already: left where it lives
            ("default_app", "shop", "carol"): 1,
        }
        assert memory.located_sync("travel", "alice").index == "travel"
        for word in ("passport", "Oslo", "aisle"):
            found = memory.search_memory_sync(app_name="travel", user_id="alice", query=word).memories
            assert [m.content.parts[0].text for m in found if word in m.content.parts[0].text], word
        found = memory.search_memory_sync(app_name="travel", user_id="alice", query="PIN 4471").memories
        assert not [m for m in found if "PIN" in m.content.parts[0].text]
        for session in (ALICE_S1, ALICE_S2, ALICE_S3):  # a replay saves nothing twice, brings back nothing erased
            assert memory.add_session_to_memory_sync(session).saved == 0
        assert memory.count_sync(app_name="travel", user_id="alice") == 3
        assert marked(memory, "default_app") and marked(memory, "travel")
    [line] = [r.getMessage() for r in caplog.records if JOINED in r.getMessage()]
    assert "users split over indices joined: 1, users re-keyed to NFC: 0, memories moved: 2" in line

    caplog.clear()
    with opened(backend_name, backend_config, app_name="travel") as again:  # another memory, another own index
        assert rows(again)[("travel", "travel", "alice")] == 3
        assert again.add_session_to_memory_sync(ALICE_S2).saved == 0
    with opened(backend_name, backend_config) as again:
        assert len(rows(again)) == 3
    assert not [r for r in caplog.records if JOINED in r.getMessage()]


def test_a_memory_told_its_index_joins_nothing(backend_name: str, backend_config: dict[str, Any]) -> None:
    old_store(backend_name, backend_config)
    with opened(backend_name, backend_config, index="default_app") as pinned:
        assert pinned.count_sync(app_name="travel", user_id="alice") == 2  # s1 and s3, as the old store holds them
        assert sorted(pinned.indices_sync()) == ["default_app", "travel"]
        assert not marked(pinned, "default_app")
