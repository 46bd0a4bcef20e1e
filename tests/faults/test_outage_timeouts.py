"""An embedder that is down holds no call past its timeout: its port closed (connection
refused) or a port that accepts and never answers. A hybrid local store with
``{"name": "openai", ..., "timeout": 2}``: a search answers from full text within 2 + 2 s,
saying so in every hit; a save that embeds on its path fails within that bound with an error
saying the service is unreachable, nothing written (the ledger did not move: the next save
retries it); a save that embeds later (``embed_later``) never waits for the embedder at all."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longterm import BackendUnavailableError, LongTermMemory
from longterm.retrieval.embedders.openai import OpenAIEmbedder
from tests.services.redis_server import RedisServer, free_port

TIMEOUT = 2.0
#: What a call may take on top of the embedder's timeout.
SLACK = 2.0


@pytest.fixture
def closed_port() -> Iterator[str]:
    """A base URL on which nothing listens: every connection is refused."""
    yield f"http://127.0.0.1:{free_port()}/v1"


@pytest.fixture
def silent_port() -> Iterator[str]:
    """A base URL whose server accepts every connection and never answers a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    thread.join(5)
    for s in held:
        s.close()
    listener.close()


def memory(path: Path, base_url: str, **config: Any) -> LongTermMemory:
    embedder = {"name": "openai", "base_url": base_url, "model": "text-embedding-3-small", "timeout": TIMEOUT}
    return LongTermMemory(backend_config={"path": str(path), "embedder": embedder, **config})


def session(sid: str, text: str) -> dict[str, Any]:
    event = {"id": f"{sid}-e1", "author": "user", "content": {"role": "user", "parts": [{"text": text}]}}
    return {"id": sid, "app_name": "app", "user_id": "u", "events": [event]}


async def timed(coro: Any) -> tuple[Any, float]:
    """``coro``'s result (or the error it raised) and its seconds; a hang fails the test."""
    started = time.monotonic()
    try:
        result: Any = await asyncio.wait_for(coro, TIMEOUT + 10)
    except asyncio.TimeoutError:
        raise AssertionError(f"the call did not end within {TIMEOUT + 10} s") from None
    except Exception as exc:
        result = exc
    return result, time.monotonic() - started


@pytest.mark.parametrize("service", ["closed_port", "silent_port"])
async def test_a_search_degrades_to_full_text_within_the_timeout(
    service: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = request.getfixturevalue(service)
    m = memory(tmp_path / "m.db", url, embed_later=True)
    try:
        saved, took = await timed(m.add_session_to_memory(session("s1", "The spare key is under the blue flowerpot")))
        assert not isinstance(saved, Exception), saved
        assert saved.saved == 1 and took < SLACK, f"a save that embeds later waited {took:.1f} s"
        found, took = await timed(m.search_memory(app_name="app", user_id="u", query="where is the spare key"))
        assert not isinstance(found, Exception), found
        assert took < TIMEOUT + SLACK, f"the search took {took:.1f} s"
        [hit] = found.memories
        assert "flowerpot" in hit.content.parts[0].text
        assert "full text only" in hit.custom_metadata["degraded"]
    finally:
        await m.close()


@pytest.mark.parametrize("service", ["closed_port", "silent_port"])
async def test_a_save_that_embeds_fails_within_the_timeout(
    service: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = request.getfixturevalue(service)
    m = memory(tmp_path / "m.db", url)
    try:
        failed, took = await timed(m.add_session_to_memory(session("s1", "My bike lock code is 3141")))
        assert isinstance(failed, BackendUnavailableError), failed
        assert "embedding service" in str(failed) and took < TIMEOUT + SLACK, f"the save took {took:.1f} s"
        assert await m.count(app_name="app", user_id="u") == 0  # nothing half-written: the next save retries
    finally:
        await m.close()


def test_a_refused_connection_fails_at_once(closed_port: str) -> None:
    e = OpenAIEmbedder(base_url=closed_port, timeout=30)
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="cannot reach the embedding service"):
        e.embed(["hello"])
    assert time.monotonic() - started < 1.0


def test_the_timeout_bounds_the_whole_call_retries_included(silent_port: str) -> None:
    e = OpenAIEmbedder(base_url=silent_port, timeout=1.5, batch_size=1)
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="did not answer within 1.5 s"):
        e.embed(["one", "two", "three"])  # three batches: one deadline
    assert time.monotonic() - started < 1.5 + 1.0


# -- closing with the store down ----------------------------------------------------------------


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A private Redis this test may stop."""
    server = RedisServer()
    (tmp_path / "redis").mkdir()
    server.start(tmp_path / "redis")
    yield server
    server.stop()


def redis_memory(server: RedisServer) -> LongTermMemory:
    return LongTermMemory(backend="redis", backend_config={"url": server.url, "prefix": "close:", "socket_timeout": 2})


def chat(sid: str) -> dict[str, Any]:
    turns = [("user", "I moved to Lisbon in May"), ("agent", "Noted"), ("user", "My cat is called Pixel")]
    events = []
    for i, (author, text) in enumerate(turns):
        content = {"role": "user" if author == "user" else "model", "parts": [{"text": text}]}
        events.append({"id": f"{sid}-{i}", "author": author, "content": content})
    return {"id": sid, "app_name": "app", "user_id": "u", "events": events}


def longterm_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("longterm")}


async def released(before: set[str]) -> set[str]:
    """The library's threads still alive a moment after a close, beyond those alive ``before``."""
    for _ in range(50):
        left = longterm_threads() - before
        if not left:
            return left
        await asyncio.sleep(0.1)
    return left


async def test_close_with_the_store_down_releases_everything_then_says_what_is_unsaved(
    redis: RedisServer,
) -> None:
    before = longterm_threads()
    memory = redis_memory(redis)
    assert await memory.count(app_name="app", user_id="u") == 0  # connected: its threads run
    saver = memory.auto_saver(min_messages=100, min_seconds=3600)
    saver.notify(chat("s1"))
    redis.stop()
    failed, took = await timed(memory.close())
    assert isinstance(failed, BackendUnavailableError), failed
    assert "closed with 3 events unsaved" in str(failed) and "recover_sessions" in str(failed)
    assert took < TIMEOUT + SLACK + 2, f"the close took {took:.1f} s"
    assert memory.backend_instance._closed and saver.tracked() == 0
    assert await released(before) == set()
    assert await memory.close() is None  # closed: a second close does nothing

    redis.restart()
    from google.adk.events import Event
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    sessions = InMemorySessionService()
    stored = await sessions.create_session(app_name="app", user_id="u", session_id="s1")
    for e in chat("s1")["events"]:
        content = types.Content(role=e["content"]["role"], parts=[types.Part(text=e["content"]["parts"][0]["text"])])
        await sessions.append_event(stored, Event(id=e["id"], author=e["author"], content=content))
    again = redis_memory(redis)
    try:
        [result] = await again.recover_sessions(sessions, app_name="app", user_id="u")
        assert result.saved == 2 and await again.count(app_name="app", user_id="u") == 2  # the user's two turns
    finally:
        await again.close()


async def test_close_without_flush_saves_nothing_and_raises_nothing(redis: RedisServer) -> None:
    memory = redis_memory(redis)
    saver = memory.auto_saver(min_messages=100, min_seconds=3600)
    saver.notify(chat("s1"))
    redis.stop()
    done, took = await timed(memory.close(flush=False))
    assert done is None and took < SLACK and memory.backend_instance._closed


async def test_close_flushes_what_automatic_saving_holds(redis: RedisServer) -> None:
    memory = redis_memory(redis)
    memory.auto_saver(min_messages=100, min_seconds=3600).notify(chat("s1"))
    await memory.close()
    again = redis_memory(redis)
    try:
        assert await again.count(app_name="app", user_id="u") == 2
    finally:
        await again.close()


async def test_a_runner_closed_with_the_store_down_raises_one_error_with_the_unsaved_count(
    redis: RedisServer,
) -> None:
    from google.adk.sessions import InMemorySessionService

    from longterm.integrations.adk import Agent, Runner
    from longterm.testing.scripted_llm import ScriptedLlm
    from tests.unit.test_adk_agent import APP, say

    memory = redis_memory(redis)
    agent = Agent(name="assistant", model=ScriptedLlm(), long_term_memory=memory, min_messages_threshold=100)
    sessions = InMemorySessionService()
    runner = Runner(agent=agent, app_name=APP, session_service=sessions)
    await say(runner, sessions, "u", "s1", "My cat is called Pixel")
    redis.stop()
    failed, took = await timed(runner.close())
    assert isinstance(failed, BackendUnavailableError), failed
    assert "events unsaved" in str(failed) and "recover_sessions" in str(failed) and took < TIMEOUT + SLACK + 2
    done, _ = await timed(memory.close(flush=False))
    assert done is None


async def test_the_facades_timeout_bounds_the_embedder_and_the_store(tmp_path: Path, silent_port: str) -> None:
    """One ``timeout=`` on the memory: an embedder configured without one (its default is 10 s) and
    a store whose write lock another process holds both answer within it."""
    embedder = {"name": "openai", "base_url": silent_port, "model": "text-embedding-3-small"}
    path = tmp_path / "m.db"
    m = LongTermMemory(backend="local", backend_config={"path": str(path)}, embedder=embedder, timeout=TIMEOUT)
    try:
        res, took = await timed(m.search_memory(app_name="app", user_id="u", query="anything at all"))
        assert not isinstance(res, Exception) and took < TIMEOUT + SLACK, (res, took)
    finally:
        await m.close()
    plain = LongTermMemory(backend="local", backend_config={"path": str(tmp_path / "p.db")}, timeout=TIMEOUT)
    await plain.add("a first memory", user_id="u")

    holder = sqlite3.connect(tmp_path / "p.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock for longer than the timeout
    try:
        res, took = await timed(plain.add("a second memory", user_id="u"))
        assert isinstance(res, BackendUnavailableError) and "within 2 s" in str(res), res
        assert took < TIMEOUT + SLACK, took
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        await plain.close()
