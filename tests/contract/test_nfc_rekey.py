"""Ids compared as Unicode NFC in a store written before they were (issue 41, item 3), on every engine.

A store of the previous release holds ids as they were typed: "José" decomposed beside the same
user precomposed, a session id decomposed, an app id decomposed. Such records are written here as
that release wrote them, below today's input gate (the engine's own ``save``, with the ids as
given). The first memory not told its index re-keys them once: records, ledger, the ids a
correction settled, and a fact's evidence, merged with the NFC twin with nothing lost or saved
twice. Only NFC: "ﬁle" and "file", "İ" and "i", "Alice" and "alice" stay different people.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from longterm import LongTermMemory
from longterm.facts import Fact
from longterm.memory.lifetimes import SETTLED
from longterm.records import MemoryRecord, Scope, record_id
from longterm.testing import make_record, make_session

NFD_JOSE, JOSE = "Jose\u0301", "Jos\u00e9"
NFD_I, I_DOT = "I\u0307", "\u0130"  # "İ" decomposed and precomposed; "i" is someone else
NFD_SESSION, SESSION = "ce\u0301", "c\u00e9"
TRAVEL = "travel"
JOSE_S1 = [("s1-e0", "I like figs"), ("s1-e1", "I live in Lyon"), ("s1-e2", "my PIN is 4471")]


def said(app: str, user: str, session: str, turns: list[tuple[str, str]]) -> list[MemoryRecord]:
    return [
        make_record(text, app=app, user=user, session=session, event=eid, author="user", role="user", timestamp=t)
        for t, (eid, text) in enumerate(turns, start=1_700_000_000)
    ]


def old_save(memory: LongTermMemory, records: list[MemoryRecord], handled: list[str]) -> None:
    """Records and ledger marks as the previous release saved them: ids not normalised."""
    first = records[0]
    scope = Scope.stored(first.app_name, first.user_id)
    memory.portal.call(memory.backend_instance.save(records, scope, first.session_id, handled))


def old_store(backend_name: str, backend_config: dict[str, Any]) -> None:
    with LongTermMemory(backend=backend_name, backend_config=backend_config, index=TRAVEL) as old:
        nfd = said(TRAVEL, NFD_JOSE, "s1", JOSE_S1[:2])  # s1-e2 handled, then erased: in the ledger only
        old_save(old, nfd, [eid for eid, _ in JOSE_S1])
        old_save(old, said(TRAVEL, NFD_JOSE, NFD_SESSION, [("m", "my cat is called Miso")]), ["m"])
        scope = Scope.stored(TRAVEL, NFD_JOSE)
        old.portal.call(old.backend_instance.mark_saved(scope, SETTLED, [nfd[1].id]))  # Lyon was corrected
        fact = Fact.new(scope, "user", "lives in Lyon", [nfd[1]])
        old.portal.call(old.backend_instance.upsert([fact.to_record()]))
        old_save(old, said(TRAVEL, NFD_I, "s1", [("s1-e0", "I read Turkish poetry")]), ["s1-e0"])
        old_save(old, said(TRAVEL, "carol", NFD_SESSION, [("e", "I drink mint tea")]), ["e"])
        old_save(old, said("cafe\u0301", "zoe", "z", [("e", "I roast my own beans")]), ["e"])
        for user, text in [(JOSE, "I like figs"), ("i", "i like jazz"), ("\ufb01le", "ligature"), ("file", "plain")]:
            assert old.add_session_to_memory_sync(make_session("s1", app=TRAVEL, user=user, turns=[("user", text)]))
        for user in ("Alice", "alice"):
            assert old.add_session_to_memory_sync(make_session("a", app=TRAVEL, user=user, turns=[("user", user)]))


def rows(memory: LongTermMemory) -> dict[tuple[str, str, str], int]:
    return {(i, a, u): n for i in memory.indices_sync() for a, u, n in memory.scopes_sync(index=i)}


def texts(memory: LongTermMemory, user: str, query: str) -> list[str]:
    found = memory.search_memory_sync(app_name=TRAVEL, user_id=user, query=query).memories
    return [m.content.parts[0].text for m in found]


def records_of(memory: LongTermMemory, app: str, user: str) -> list[MemoryRecord]:
    async def read() -> list[MemoryRecord]:
        return [r async for r in memory.iter_records(app_name=app, user_id=user)]

    return memory.portal.call(read())


def test_ids_in_another_form_than_nfc_are_re_keyed_once_and_merge_with_their_twin(
    backend_name: str, backend_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    old_store(backend_name, backend_config)
    caplog.set_level(logging.INFO, logger="longterm.memory.joining")
    with LongTermMemory(backend=backend_name, backend_config=backend_config) as memory:
        assert rows(memory) == {
            (TRAVEL, TRAVEL, JOSE): 4,  # figs once (the twin), Lyon, Miso, and the fact
            (TRAVEL, TRAVEL, I_DOT): 1,
            (TRAVEL, TRAVEL, "i"): 1,
            (TRAVEL, TRAVEL, "\ufb01le"): 1,
            (TRAVEL, TRAVEL, "file"): 1,
            (TRAVEL, TRAVEL, "Alice"): 1,
            (TRAVEL, TRAVEL, "alice"): 1,
            (TRAVEL, TRAVEL, "carol"): 1,
            (TRAVEL, "caf\u00e9", "zoe"): 1,
        }
        for user in (JOSE, NFD_JOSE):  # either form, one person
            assert any("Miso" in t for t in texts(memory, user, "cat Miso"))
            assert any("Lyon" in t for t in texts(memory, user, "Lyon"))
        turns = [("user", text) for _, text in JOSE_S1]
        replay = memory.add_session_to_memory_sync(make_session("s1", app=TRAVEL, user=NFD_JOSE, turns=turns))
        assert replay.saved == 0  # nothing twice, the erased PIN stays erased
        again = make_session(NFD_SESSION, app=TRAVEL, user="carol", turns=[("user", "I drink mint tea")])
        again["events"][0]["id"] = "e"
        assert memory.add_session_to_memory_sync(again).saved == 0
        assert memory.delete_memory_sync(app_name=TRAVEL, user_id="carol", session_id=SESSION) == 1

        jose = Scope.stored(TRAVEL, JOSE)
        lyon = record_id(TRAVEL, JOSE, "s1", "s1-e1")
        ledger = memory.located_sync(TRAVEL, JOSE).ledger
        assert memory.portal.call(ledger.saved(jose, SETTLED)) == {lyon}
        [fact] = [f for f in map(Fact.of, records_of(memory, TRAVEL, JOSE)) if f is not None]
        assert fact.evidence == [lyon] and fact.sessions == ["s1"]
        assert fact.id == record_id(TRAVEL, JOSE, "\x00facts", fact.key)
        assert memory.count_sync(app_name=TRAVEL, user_id=I_DOT) == memory.count_sync(app_name=TRAVEL, user_id=NFD_I)
    assert any("users re-keyed to NFC: 4," in r.getMessage() for r in caplog.records)  # José, İ, carol, zoe

    caplog.clear()
    with LongTermMemory(backend=backend_name, backend_config=backend_config, app_name=TRAVEL) as reopened:
        assert reopened.count_sync(app_name=TRAVEL, user_id=JOSE) == 4
    assert not [r for r in caplog.records if r.name == "longterm.memory.joining"]
