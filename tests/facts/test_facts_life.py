"""Facts follow a memory's life: correcting a memory drops the facts of its old words; sweeping
what expired drops the facts only it supported (the local engine, a scripted model)."""

from __future__ import annotations

from pathlib import Path

from longterm import LongTermMemory
from longterm.testing import make_session
from longterm.testing.contract.life import Clock
from longterm.testing.scripted_llm import ScriptedChat
from tests.facts.conftest import facts_config


def local(tmp_path: Path, chat: ScriptedChat, clock: Clock) -> LongTermMemory:
    return LongTermMemory(
        backend="local",
        backend_config={"path": str(tmp_path / "m.db")},
        facts=facts_config(chat),
        app_name="app",
        clock=clock,
    )


async def test_correcting_a_memory_drops_the_facts_of_its_old_words(tmp_path: Path, chat: ScriptedChat):
    clock = Clock()
    m = local(tmp_path, chat, clock)
    await m.add_session_to_memory(make_session(turns=[("user", "I live in Porto"), ("user", "I'm vegan")]))
    await m.flush_facts()
    porto = (await m.search_memory(app_name="app", user_id="u1", query="Porto", kind="evidence")).memories[0]
    assert await m.update(porto.id, user_id="u1", text="I moved away last year") is not None
    assert await m.get_user_profile("u1") == "- The user is vegan"
    await m.add_session_to_memory(make_session(turns=[("user", "I live in Porto"), ("user", "I'm vegan")]))
    await m.flush_facts()
    assert await m.get_user_profile("u1") == "- The user is vegan"  # a replay restores nothing
    await m.close()


async def test_sweeping_what_expired_drops_the_facts_only_it_supported(tmp_path: Path, chat: ScriptedChat):
    clock = Clock()
    m = local(tmp_path, chat, clock)
    await m.add_session_to_memory(make_session("a", turns=[("user", "I live in Porto")]), ttl=60)
    await m.add_session_to_memory(make_session("b", turns=[("user", "I'm vegan")], start=1_700_000_100.0))
    await m.flush_facts()
    assert sorted((await m.get_user_profile("u1")).splitlines()) == ["- The user is vegan", "- The user lives in Porto"]
    clock.now += 61
    assert await m.sweep_expired(user_id="u1") == 2  # the event and its fact
    assert await m.get_user_profile("u1") == "- The user is vegan"
    await m.close()
