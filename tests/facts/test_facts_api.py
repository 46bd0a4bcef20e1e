"""The fact layer's edges, on the local engine: off by default, turned on by the environment,
session ids that cannot collide with a user's, the model's answers parsed or refused, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from longterm import LongTermMemory
from longterm.errors import ConfigurationError, InvalidInputError, LongTermMemoryError
from longterm.facts import FACTS_SESSION, ModelError, distilled_session
from longterm.facts.llm import parse_json
from longterm.testing import make_session
from longterm.testing.scripted_llm import ScriptedChat
from tests.facts.conftest import facts_config


def local(tmp_path: Path, **kwargs: Any) -> LongTermMemory:
    return LongTermMemory(backend="local", backend_config={"path": str(tmp_path / "m.db")}, **kwargs)


async def test_offline_default_runs_nothing_and_changes_nothing(tmp_path: Path):
    m = local(tmp_path)
    await m.add_session_to_memory(make_session(turns=[("user", "I live in Porto")]))
    found = await m.search_memory(app_name="app", user_id="u1", query="Porto")
    assert [e.custom_metadata["event_id"] for e in found.memories] == ["s1-e0"]
    assert await m.get_user_profile("u1", app_name="app") == ""
    assert await m.list_facts(app_name="app", user_id="u1") == [] and await m.flush_facts() == 0
    with pytest.raises(ConfigurationError, match="LONGTERM_FACTS_BASE_URL"):
        await m.rebuild_facts(app_name="app", user_id="u1")
    await m.close()


async def test_the_environment_turns_facts_on(tmp_path: Path, chat: ScriptedChat, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LONGTERM_FACTS_BASE_URL", chat.base_url)
    monkeypatch.setenv("LONGTERM_FACTS_MODEL", "scripted")
    m = local(tmp_path, app_name="app")
    await m.add_session_to_memory(make_session(turns=[("user", "I live in Porto")]))
    await m.flush()
    assert await m.get_user_profile("u1") == "- The user lives in Porto"  # VeADK's call shape
    assert m.get_user_profile_sync("u1") == "- The user lives in Porto"
    m.close_sync()


async def test_no_user_session_id_reaches_the_facts_records_or_their_ledger(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, facts=facts_config(chat))
    for sid in (FACTS_SESSION, distilled_session("s1")):
        with pytest.raises(InvalidInputError):
            await m.add_session_to_memory(make_session(sid))
    await m.add_session_to_memory(make_session("s1", turns=[("user", "I live in Porto")]))
    await m.flush_facts()
    # A session a user named like a naive fact ledger ("facts:s1"), with the very same event id:
    # its event is new to the store and to the fact layer.
    lookalike = make_session("facts:s1", turns=[("user", "I moved to Lisbon")])
    lookalike["events"][0]["id"] = "s1-e0"
    assert (await m.add_session_to_memory(lookalike)).saved == 1
    await m.flush_facts()
    assert await m.get_user_profile("u1", app_name="app") == "- The user lives in Lisbon"
    assert await m.delete_memory(app_name="app", user_id="u1", session_id="facts:s1") == 2
    assert await m.get_user_profile("u1", app_name="app") == "- The user lives in Porto"
    await m.close()


async def test_erasing_one_memory_erases_the_facts_it_produced(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, facts=facts_config(chat))
    await m.add_session_to_memory(make_session(turns=[("user", "I live in Porto"), ("user", "I'm vegan")]))
    await m.flush_facts()
    porto = (await m.search_memory(app_name="app", user_id="u1", query="Porto", kind="evidence")).memories[0]
    assert await m.delete_memory(app_name="app", user_id="u1", memory_id=porto.id) == 2  # the event and its fact
    assert await m.get_user_profile("u1", app_name="app") == "- The user is vegan"
    await m.close()


async def test_facts_move_to_another_store_with_their_evidence(tmp_path: Path, chat: ScriptedChat):
    """A migration (``upsert_records`` of every record read) carries facts too: a fact's id is
    derived from where it belongs like every record's, so the copy is accepted as it is."""
    m = local(tmp_path, facts=facts_config(chat))
    await m.add_session_to_memory(make_session(turns=[("user", "I live in Porto"), ("user", "I'm vegan")]))
    await m.flush_facts()
    records = [r async for r in m.iter_records(app_name="app", user_id="u1")]
    copy = LongTermMemory(backend="local", backend_config={"path": str(tmp_path / "copy.db")}, facts=facts_config(chat))
    await copy.upsert_records(records)
    assert await copy.list_facts(app_name="app", user_id="u1") == await m.list_facts(app_name="app", user_id="u1")
    assert await copy.get_user_profile("u1", app_name="app") == "- The user lives in Porto\n- The user is vegan"
    await m.close()
    await copy.close()


async def test_search_kinds(tmp_path: Path, chat: ScriptedChat):
    m = local(tmp_path, facts=facts_config(chat))
    await m.add_session_to_memory(make_session(turns=[("user", "I live in Porto")]))
    await m.flush_facts()
    kinds = {}
    for kind in ("all", "facts", "evidence"):
        res = await m.search_memory(app_name="app", user_id="u1", query="live Porto", kind=kind)
        kinds[kind] = [e.author for e in res.memories]
    assert kinds == {"all": ["longterm-facts", "user"], "facts": ["longterm-facts"], "evidence": ["user"]}
    with pytest.raises(InvalidInputError, match="kind"):
        await m.search_memory(app_name="app", user_id="u1", query="Porto", kind="superseded")  # type: ignore[arg-type]
    await m.close()


def test_model_answers_are_read_in_fences_and_prose_and_refused_otherwise():
    assert parse_json('```json\n{"facts": []}\n```') == {"facts": []}
    assert parse_json('Sure! {"decision": "ADD"} Hope that helps.') == {"decision": "ADD"}
    for bad in ("", "no json here", '{"facts": [', "[1, 2]"):
        with pytest.raises(ModelError) as err:
            parse_json(bad)
        assert isinstance(err.value, LongTermMemoryError)


def test_bad_settings_are_configuration_errors(tmp_path: Path):
    with pytest.raises(ConfigurationError, match="LONGTERM_FACTS_MODEL"):
        local(tmp_path, facts=True)
    with pytest.raises(ConfigurationError, match="facts setting .batch_events."):
        local(tmp_path, facts={"base_url": "http://127.0.0.1:9", "model": "m", "batch_events": 0})


def test_cli_profile_history_consolidate_rebuild(tmp_path: Path, chat: ScriptedChat):
    from longterm.cli import cli
    from longterm.cli.facts import facts

    cli.add_command(facts)
    m = local(tmp_path, facts=facts_config(chat))
    m.add_session_to_memory_sync(make_session("s1", turns=[("user", "I live in Porto")]))
    m.add_session_to_memory_sync(make_session("s2", turns=[("user", "I moved to Lisbon")], start=1_800_000_000))
    m.portal.call(m.flush_facts())
    m.close_sync()
    base = ["--backend", "local", "--config", json.dumps({"path": str(tmp_path / "m.db")}), "facts"]
    base += ["--base-url", chat.base_url, "--model", "scripted"]
    user = ["--app", "app", "--user", "u1"]
    run = CliRunner().invoke
    assert run(cli, [*base, "profile", *user]).output == "- The user lives in Lisbon\n"
    listed = json.loads(run(cli, [*base, "list", "--all", *user]).output)
    assert [f["text"] for f in listed] == ["The user lives in Porto", "The user lives in Lisbon"]
    trail = json.loads(run(cli, [*base, "history", listed[0]["id"], *user]).output)
    assert [f["id"] for f in trail] == [f["id"] for f in listed]
    assert "1 before, 1 after" in run(cli, [*base, "consolidate", *user]).output
    assert "2 events read" in run(cli, [*base, "rebuild", "--yes", *user]).output
    assert "all evidence distilled" in run(cli, [*base, "distill", *user]).output
    result = run(cli, ["--backend", "local", "facts", "profile", *user], env={"LONGTERM_FACTS_BASE_URL": ""})
    assert result.exit_code == 1 and "--base-url" in result.output


def test_the_example_runs_offline(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_FACTS")}
    env["LONGTERM_HOME"] = str(tmp_path / "home")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, str(root / "examples" / "facts.py")], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert (
        "The user lives in Porto (until 2023-11-15T22:13:20+00:00) -> The user lives in Lisbon (until now)"
        in out.stdout
    )
    assert "search: ['The user lives in Lisbon'" in out.stdout
