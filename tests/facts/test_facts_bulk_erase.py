"""Facts follow a bulk erase: by date and by filter, the facts distilled only from what went go
with it, the others stay; and a filtered search still shows the user's current facts."""

from __future__ import annotations

from pathlib import Path

from longterm import LongTermMemory
from longterm.testing import make_session
from longterm.testing.scripted_llm import ScriptedChat
from tests.facts.conftest import facts_config


def local(tmp_path: Path, chat: ScriptedChat) -> LongTermMemory:
    return LongTermMemory(
        backend="local", backend_config={"path": str(tmp_path / "m.db")}, facts=facts_config(chat), app_name="app"
    )


async def test_erasing_before_a_date_erases_the_facts_only_the_old_words_said(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, chat)
    await m.add_session_to_memory(make_session("old", turns=[("user", "I live in Porto")], start=1_000.0))
    await m.add_session_to_memory(make_session("new", turns=[("user", "I'm vegan")], start=9_000.0))
    await m.flush_facts()
    assert await m.get_user_profile("u1") == "- The user lives in Porto\n- The user is vegan"
    assert await m.delete_all(user_id="u1", before=5_000.0) == 2  # the event and its fact
    assert await m.get_user_profile("u1") == "- The user is vegan"
    await m.add_session_to_memory(make_session("old", turns=[("user", "I live in Porto")], start=1_000.0))
    await m.flush_facts()
    assert await m.get_user_profile("u1") == "- The user is vegan"  # a replay brings nothing back
    await m.close()


async def test_erasing_by_filter_erases_the_facts_of_what_passed(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, chat)
    await m.add("I live in Porto", user_id="u1", metadata={"topic": "home"})
    await m.add("I'm vegan", user_id="u1", metadata={"topic": "food"})
    await m.flush_facts()
    found = await m.search("vegan Porto", user_id="u1", filters={"topic": "food"})
    assert "The user is vegan" in [x.text for x in found if x.kind == "fact"]
    assert [x.text for x in found if x.kind != "fact"] == ["I'm vegan"]  # facts are not filtered by metadata
    assert await m.delete_all(user_id="u1", filters={"topic": "home"}) == 2
    assert await m.get_user_profile("u1") == "- The user is vegan"
    await m.close()
