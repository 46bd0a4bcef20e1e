"""``_ledger_sessions``: the sessions a store's ledger holds for a user, what moving a user
(``memory.moving``) carries, on the engines that keep their own ledger.

A session whose every memory was erased is listed too: its events are what keeps them erased.
A Redis store made before the per-user sessions set (its ledger keys are digests) lists its
sessions from its records: such a session of it cannot be listed, and only that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory, Scope
from longterm.backends.redis.upgrade import LISTED_KEY
from longterm.core.ledger import store_ledger
from tests.conftest import make_session

ALICE = Scope(app_name="travel", user_id="alice")


def listed(memory: LongTermMemory) -> list[str] | None:
    ledger = store_ledger(memory.backend_instance)
    assert ledger is not None
    return memory.portal.call(ledger.sessions(ALICE))


def saved(backend_name: str, config: dict[str, Any]) -> LongTermMemory:
    memory = LongTermMemory(backend=backend_name, backend_config=config, app_name="travel")
    for sid in ("s1", "s2", "gone"):
        memory.add_session_to_memory_sync(make_session(sid, app="travel", user="alice", turns=[("user", sid)]))
    assert memory.delete_memory_sync(app_name="travel", user_id="alice", session_id="gone") == 1
    return memory


@pytest.mark.parametrize("provider_id", ["local", "redis", "opensearch", "qdrant-local", "qdrant-edge", "mem0"])
def test_every_session_of_the_ledger_is_listed_an_erased_one_too(backend_name: str, backend_config: dict) -> None:
    with saved(backend_name, backend_config) as memory:
        assert listed(memory) == ["gone", "s1", "s2"]
        other = memory.portal.call(
            store_ledger(memory.backend_instance).sessions(Scope(app_name="travel", user_id="bob"))
        )  # type: ignore[union-attr]
        assert other == []


@pytest.mark.parametrize("provider_id", ["redis"])
def test_a_redis_store_made_before_the_sessions_set_lists_its_records_sessions(
    backend_config: dict, tmp_path: Path
) -> None:
    with saved("redis", backend_config) as memory:
        engine: Any = memory.backend_instance
        engine._r.hdel(engine.ns + "meta", LISTED_KEY)  # as a store of the previous release: no sets
        for key in engine._r.scan_iter(match=engine.ns + "ls:*"):
            engine._r.delete(key)
        assert listed(memory) == ["s1", "s2"]  # "gone" left no record: its key is a digest


@pytest.mark.parametrize("provider_id", ["opensearch"])
def test_opensearch_lists_sessions_over_several_pages(backend_config: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("longterm.backends.opensearch.engine.LEDGER_PAGE", 2)  # a composite aggregation's pages
    with saved("opensearch", backend_config) as memory:
        for sid in ("s3", "s4"):
            memory.add_session_to_memory_sync(make_session(sid, app="travel", user="alice", turns=[("user", sid)]))
        assert listed(memory) == ["gone", "s1", "s2", "s3", "s4"]
