"""Events given without their session (``memory.deltas``): which of them another session handled."""

from __future__ import annotations

import pytest

from longterm.core.ledger import MemoryLedger
from longterm.memory.deltas import EVENTS, handled, in_sessions, others
from longterm.records import Scope

SCOPE = Scope(app_name="app", user_id="u1")


@pytest.mark.asyncio
async def test_a_delta_is_checked_against_every_session_by_explicit_id_only() -> None:
    ledger = MemoryLedger()
    await ledger.mark_saved(SCOPE, "s1", ["e1", "derived-abc"])
    await ledger.mark_saved(SCOPE, "s2", ["e2"])
    await ledger.mark_saved(Scope(app_name="app", user_id="u2"), "s3", ["e3"])
    found = await in_sessions(ledger, SCOPE, ["e1", "e2", "e3", "derived-abc", "e4"])
    # "derived-abc": an id made of author, time and content, one per session ("thanks" twice is two memories);
    # e3: another user's session
    assert found == {"e1", "e2"}
    assert others(EVENTS) == ()


@pytest.mark.asyncio
async def test_a_session_is_checked_against_the_deltas_only() -> None:
    ledger = MemoryLedger()
    await ledger.mark_saved(SCOPE, EVENTS, ["e1", "derived-x"])
    assert others("s1") == (EVENTS,)
    deltas = set().union(*[await ledger.saved(SCOPE, s) for s in others("s1")])
    assert handled(["e1", "e2", "derived-x"], deltas) == {"e1"}


class _Unlisted:
    """A ledger of a user's that cannot list its sessions."""

    def __init__(self) -> None:
        self.inner = MemoryLedger()

    async def saved(self, scope: Scope, session_id: str) -> set[str]:
        return await self.inner.saved(scope, session_id)

    async def mark_saved(self, scope: Scope, session_id: str, event_ids: list[str]) -> None:
        await self.inner.mark_saved(scope, session_id, event_ids)

    async def close(self) -> None:
        return None


@pytest.mark.asyncio
async def test_a_ledger_that_cannot_list_its_sessions_leaves_a_delta_unchecked() -> None:
    ledger = _Unlisted()
    await ledger.mark_saved(SCOPE, "s1", ["e1"])
    assert await in_sessions(ledger, SCOPE, ["e1"]) == set()


def test_an_event_a_deltas_policy_dropped_is_saved_with_its_session_when_reconsidered(tmp_path) -> None:
    """The deltas' ledger marks what their policy dropped too; a reconsidered save of the session
    under another policy must be able to keep it (it was never saved)."""
    from longterm import LongTermMemory
    from longterm.testing import make_session

    session = make_session("s1", "app", "u1", [("user", "I swim on Mondays"), ("model", "noted: swimming Mondays")])
    with LongTermMemory(app_name="app", backend_config={"path": str(tmp_path / "m.db")}) as memory:
        delta = memory.portal.call(memory.add_events_to_memory(app_name="app", user_id="u1", events=session["events"]))
        assert delta.saved == 1  # the default policy keeps the user's turn only
        again = memory.add_session_to_memory_sync(session, auto_save_memory_policy="all", reconsider=True)
        assert "noted: swimming Mondays" in [m.text for m in memory.get_all_sync(user_id="u1").memories]
        assert again.saved >= 1
