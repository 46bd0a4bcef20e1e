"""ADK's own server by URI: ``adk api_server AGENTS --memory_service_uri longterm:///PATH`` (a
``services.yaml`` naming ``LongTermMemoryService``) serves an agent that saves through
``CallbackContext.add_session_to_memory()``; its next session recalls the first through ADK's own
``load_memory``, and the memory is in the store at PATH (``longterm stats``)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from click.testing import CliRunner
from google.adk.cli.service_registry import ServiceRegistry

from longterm.cli import cli
from longterm.integrations.adk import LongTermMemoryService, register

SERVICES_YAML = """\
services:
  - scheme: longterm
    type: memory
    class: longterm.integrations.adk.LongTermMemoryService
"""
AGENT = """\
from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.tools import load_memory

from longterm.testing.scripted_llm import ScriptedLlm


async def save_to_memory(callback_context: CallbackContext) -> None:
    await callback_context.add_session_to_memory()


root_agent = LlmAgent(name="assistant", model=ScriptedLlm(), tools=[load_memory], after_agent_callback=save_to_memory)
"""
#: Seconds the server may take to start (ADK's imports, on a busy two-core machine).
START = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _call(base: str, path: str, body: object = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def _turn(base: str, session: str, text: str) -> list[dict]:
    _call(base, f"/apps/assistant/users/alice/sessions/{session}", {})
    message = {"role": "user", "parts": [{"text": text}]}
    events = _call(
        base, "/run", {"app_name": "assistant", "user_id": "alice", "session_id": session, "new_message": message}
    )
    assert isinstance(events, list)
    return events


def test_adk_api_server_with_a_longterm_uri_recalls_session_one_in_session_two(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    (agents / "assistant").mkdir(parents=True)
    (agents / "services.yaml").write_text(SERVICES_YAML)
    (agents / "assistant" / "__init__.py").write_text("from . import agent\n")
    (agents / "assistant" / "agent.py").write_text(AGENT)
    store, port = tmp_path / "memory.db", _free_port()
    adk = str(Path(sys.executable).parent / "adk")
    command = [adk, "api_server", str(agents), "--host", "127.0.0.1", "--port", str(port)]
    command += ["--memory_service_uri", f"longterm://{store}", "--no_use_local_storage"]
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(command, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            try:
                assert _call(base, "/list-apps") == ["assistant"]
                break
            except OSError:
                assert time.monotonic() < deadline, (
                    "adk api_server did not start:\n" + (tmp_path / "server.log").read_text()
                )
                time.sleep(0.25)
        said = _turn(base, "s1", "I'm allergic to shellfish")
        assert said[-1]["content"]["parts"][0]["text"] == "ok"
        recalled = _turn(base, "s2", "recall: what am I allergic to?")
        [response] = [p["functionResponse"] for e in recalled for p in e["content"]["parts"] if "functionResponse" in p]
        assert response["name"] == "load_memory"
        texts = [m["content"]["parts"][0]["text"] for m in response["response"]["result"]["memories"]]
        assert texts[0] == "I'm allergic to shellfish"
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
    stats = CliRunner().invoke(cli, ["--uri", f"longterm://{store}", "stats", "--json"])
    assert stats.exit_code == 0, stats.output
    assert {(r["app"], r["user"]) for r in json.loads(stats.output)} == {("assistant", "alice")}


def test_register_gives_adks_registry_every_longterm_scheme(tmp_path: Path) -> None:
    """``services.py``'s way: ``register()`` adds each scheme; ADK's own options are left out."""
    registry = ServiceRegistry()
    register(registry)
    local = registry.create_memory_service(f"longterm://{tmp_path}/m.db?app=travel", agents_dir=str(tmp_path))
    assert isinstance(local, LongTermMemoryService) and local.app_name == "travel"
    assert local.backend_config == {"path": f"{tmp_path}/m.db"}
    redis = registry.create_memory_service("longterm+redis://127.0.0.1:6390/2?prefix=app:", agents_dir=str(tmp_path))
    assert redis.backend == "redis" and redis.backend_config["url"] == "redis://127.0.0.1:6390/2"
    local.close_sync()
    redis.close_sync(flush=False)
