"""Redis faults a user meets: a frozen server (SIGSTOP), a server killed and restarted (empty,
or from its AOF or RDB), a reply lost after the server acted, text holding NUL, and one
memory used from several event loops and threads at once.

Servers that are frozen or killed are private (``RedisServer`` on another port), so the
shared one is untouched. Every call under test runs on a thread that must return within
``BOUND`` seconds: a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis

from longterm import BackendUnavailableError, LongTermMemory
from tests.conftest import make_session
from tests.services.redis_server import RedisServer

T = TypeVar("T")

#: socket_timeout of the memories under test, and how long any one call may take here.
TIMEOUT = 1
BOUND = 8


def at_once(*calls: Callable[[], Any], seconds: float = BOUND) -> list[Any]:
    """Each call on a thread of its own, all at once: what each returned or raised. A call
    still running after ``seconds`` fails the test (a hang)."""
    outcomes: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            outcomes[i] = calls[i]()
        except BaseException as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds)
    assert not any(t.is_alive() for t in threads), f"a call hung: no answer and no error within {seconds} s"
    return outcomes


def bounded(fn: Callable[[], T]) -> T:
    """``fn()`` on a thread of its own: its result, or its exception raised; a hang fails the test."""
    [outcome] = at_once(fn)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def in_new_loop(coro_fn: Callable[[], Any]) -> Callable[[], Any]:
    """A call that runs ``coro_fn()`` in an event loop of its own (``asyncio.run``)."""
    return lambda: asyncio.run(coro_fn())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    s = RedisServer()
    s.start(tmp_path)
    yield s
    s.stop()


def open_memory(url: str, **config: Any) -> LongTermMemory:
    return LongTermMemory(backend="redis", backend_config={"url": url, "socket_timeout": TIMEOUT, **config})


def texts(memory: LongTermMemory, query: str, top_k: int = 10) -> list[str]:
    res = bounded(lambda: memory.search_memory_sync(app_name="app", user_id="u1", query=query, top_k=top_k))
    return [m.content.parts[0].text for m in res.memories]


# -- a frozen server -------------------------------------------------------------------------


@pytest.mark.parametrize("first", ["search", "save"])
def test_the_first_call_of_a_new_memory_to_a_frozen_server_fails_within_the_timeout(server: RedisServer, first: str):
    """Preparing the index is part of the first call, inside its deadline: a new process
    facing a frozen server gets a clear error in about ``socket_timeout``, not a hang."""
    memory = open_memory(server.url)
    call = {
        "search": in_new_loop(lambda: memory.search_memory(app_name="app", user_id="u1", query="bees")),
        "save": in_new_loop(lambda: memory.add_session_to_memory(make_session(turns=[("user", "I keep bees")]))),
    }[first]
    with server.frozen(), pytest.raises(BackendUnavailableError, match=rf"did not answer within {TIMEOUT} s"):
        bounded(call)
    bounded(call)  # thawed: the same memory prepares the index and answers
    assert texts(memory, "bees") == (["I keep bees"] if first == "save" else [])
    bounded(memory.close_sync)


def test_a_running_memory_fails_within_the_timeout_from_any_loop_and_works_after_the_freeze(server: RedisServer):
    """A memory already in use, called from the sync wrappers, from a new event loop and
    from its first loop while the server is frozen: each call fails within the timeout;
    once the server answers again, every way of calling works and gets its own answers."""
    memory = open_memory(server.url)
    bounded(lambda: memory.add_session_to_memory_sync(make_session(turns=[("user", "I keep bees")])))
    loop = asyncio.new_event_loop()
    later = make_session("s2", turns=[("user", "My car is blue")])
    calls: list[Callable[[], Any]] = [
        lambda: memory.search_memory_sync(app_name="app", user_id="u1", query="bees"),
        in_new_loop(lambda: memory.search_memory(app_name="app", user_id="u1", query="bees")),
        lambda: loop.run_until_complete(memory.count(app_name="app", user_id="u1")),
        in_new_loop(lambda: memory.add_session_to_memory(later)),
    ]
    try:
        assert bounded(calls[2]) == 1
        with server.frozen():
            frozen = at_once(*calls)
        for outcome in frozen:
            assert isinstance(outcome, BackendUnavailableError), outcome
            assert f"did not answer within {TIMEOUT} s" in str(outcome)
        for call in calls:
            bounded(call)
        assert texts(memory, "bees") == ["I keep bees"]
        assert texts(memory, "car") == ["My car is blue"]
        assert bounded(calls[2]) == 2
    finally:
        bounded(memory.close_sync)
        loop.close()


# -- a server killed and restarted ---------------------------------------------------------------


@pytest.mark.parametrize("embedder", [None, "hashing"])
def test_a_server_restarted_empty_is_prepared_again_and_saves_and_searches_work(server: RedisServer, embedder):
    """Killed and restarted without persistence: the running memory's next save makes the
    index again before writing (so what it writes is found at once), searches answer, and
    saving the old session again writes it all back (its ledger went with the data)."""
    memory = open_memory(server.url, **({"embedder": embedder} if embedder else {}))
    old = make_session("s1", turns=[("user", f"zebra fact {i}") for i in range(5)])
    assert bounded(lambda: memory.add_session_to_memory_sync(old)).saved == 5
    server.kill()
    server.restart()
    new = make_session("s2", turns=[("user", "giraffe sighting")])
    assert bounded(lambda: memory.add_session_to_memory_sync(new)).saved == 1
    assert texts(memory, "giraffe")[0] == "giraffe sighting"
    assert [t for t in texts(memory, "zebra") if "zebra" in t] == []  # (hybrid search finds the giraffe too)
    assert bounded(lambda: memory.add_session_to_memory_sync(old)).saved == 5
    assert sorted(t for t in texts(memory, "zebra") if "zebra" in t) == [f"zebra fact {i}" for i in range(5)]
    assert bounded(lambda: memory.count_sync(app_name="app", user_id="u1")) == 6
    bounded(memory.close_sync)


@pytest.mark.parametrize("persistence", ["aof", "rdb"])
def test_a_server_restarted_from_disk_loses_nothing_and_duplicates_nothing(tmp_path: Path, persistence: str):
    """Killed (SIGKILL) after an AOF write or an RDB SAVE and restarted: the running memory's
    very first call after the restart answers, with every memory, and saving the same
    session again writes nothing."""
    server = RedisServer(persist=persistence == "aof")
    server.start(tmp_path)
    session = make_session(turns=[("user", f"zebra fact {i}") for i in range(40)])

    async def scenario() -> None:
        async with open_memory(server.url) as memory:
            assert (await memory.add_session_to_memory(session)).saved == 40
            if persistence == "rdb":
                with redis.Redis.from_url(server.url) as r:
                    r.save()
            server.kill()
            server.restart()
            res = await memory.search_memory(app_name="app", user_id="u1", query="zebra", top_k=50)
            assert sorted(m.content.parts[0].text for m in res.memories) == sorted(f"zebra fact {i}" for i in range(40))
            assert (await memory.add_session_to_memory(session)).saved == 0
            assert await memory.count(app_name="app", user_id="u1") == 40

    try:
        bounded(in_new_loop(scenario))
    finally:
        server.stop()


# -- a lost reply ------------------------------------------------------------------------------


@contextmanager
def reply_lost(nth: int) -> Iterator[None]:
    """The ``nth`` reply read from Redis (by any client of this process) is lost: the server
    acted, the client sees its connection drop."""
    from redis import connection
    from redis.asyncio import connection as async_connection

    count = itertools.count(1)
    originals = connection.AbstractConnection.read_response, async_connection.AbstractConnection.read_response
    lost = "the connection dropped before the reply arrived"

    def read_response(self: Any, *args: Any, **kwargs: Any) -> Any:
        reply = originals[0](self, *args, **kwargs)
        if next(count) == nth:
            self.disconnect()
            raise redis.ConnectionError(lost)
        return reply

    async def read_response_async(self: Any, *args: Any, **kwargs: Any) -> Any:  # redis.asyncio, used before the core
        reply = await originals[1](self, *args, **kwargs)
        if next(count) == nth:
            await self.disconnect()
            raise redis.ConnectionError(lost)
        return reply

    connection.AbstractConnection.read_response = read_response
    async_connection.AbstractConnection.read_response = read_response_async
    try:
        yield
    finally:
        connection.AbstractConnection.read_response, async_connection.AbstractConnection.read_response = originals


def test_an_erase_whose_reply_is_lost_and_is_repeated_leaves_nothing_searchable(services, tmp_path: Path):
    """The connection drops after Redis acted on an erase: the user sees an error and erases
    again. Every memory is then gone, from search too: the set of a user's memories and the
    memories themselves are never erased apart."""
    memory = open_memory(**services("redis").config(tmp_path))
    session = make_session(turns=[("user", f"zebra fact {i}") for i in range(3)])
    bounded(lambda: memory.add_session_to_memory_sync(session))
    assert bounded(lambda: memory.delete_memory_sync(app_name="app", user_id="u1", memory_id="none")) == 0
    with reply_lost(1), pytest.raises(BackendUnavailableError):
        bounded(lambda: memory.delete_memories_sync(app_name="app", user_id="u1"))
    bounded(lambda: memory.delete_memories_sync(app_name="app", user_id="u1"))
    assert bounded(lambda: memory.count_sync(app_name="app", user_id="u1")) == 0
    assert texts(memory, "zebra") == []
    bounded(memory.close_sync)


def test_a_save_whose_reply_is_lost_landed_whole_with_its_ledger(services, tmp_path: Path):
    """The connection drops after Redis ran a save: its memories and its ledger marks landed
    together, so saving the session again writes nothing, and every memory is found."""
    memory = open_memory(**services("redis").config(tmp_path))
    bounded(lambda: memory.add_session_to_memory_sync(make_session("s0", turns=[("user", "a first note")])))
    session = make_session(turns=[("user", f"zebra fact {i}") for i in range(3)])
    # replies 1, 2: the ledger reads (the session's, the session-less deltas'); 3: the save script's
    # (it reads the ledger again inside)
    with reply_lost(3), pytest.raises(BackendUnavailableError):
        bounded(lambda: memory.add_session_to_memory_sync(session))
    assert bounded(lambda: memory.add_session_to_memory_sync(session)).saved == 0
    assert sorted(texts(memory, "zebra")) == [f"zebra fact {i}" for i in range(3)]
    bounded(memory.close_sync)


# -- text and concurrency -------------------------------------------------------------------------


def test_text_after_a_nul_is_found(services, tmp_path: Path):
    """RediSearch ends indexed text at NUL; the words after it must still be found."""
    memory = open_memory(**services("redis").config(tmp_path))
    bounded(lambda: memory.add_session_to_memory_sync(make_session(turns=[("user", "abc\x00 zebra")])))
    assert texts(memory, "zebra") == ["abc\x00 zebra"]
    bounded(memory.close_sync)


def test_one_memory_from_sync_wrappers_async_calls_and_four_loops_at_once(services, tmp_path: Path):
    """Four threads, each with its own ``asyncio.run``, the sync wrappers and async calls on
    a fifth loop, all on one memory at the same time: none hangs, none fails (no client is
    bound to an event loop), and every save is found."""
    memory = open_memory(**services("redis").config(tmp_path))
    start = threading.Barrier(6)

    async def work(i: int) -> None:
        for j in range(5):
            session = make_session(f"s{i}-{j}", turns=[("user", f"note from thread{i}x{j}")])
            assert (await memory.add_session_to_memory(session)).saved == 1
            res = await memory.search_memory(app_name="app", user_id="u1", query=f"thread{i}x{j}")
            assert [m.content.parts[0].text for m in res.memories] == [f"note from thread{i}x{j}"]

    def sync_work() -> None:
        for j in range(5):
            memory.add_session_to_memory_sync(make_session(f"sync-{j}", turns=[("user", f"note from sync{j}")]))
            res = memory.search_memory_sync(app_name="app", user_id="u1", query=f"sync{j}")
            assert [m.content.parts[0].text for m in res.memories] == [f"note from sync{j}"]

    def together(job: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: (start.wait(BOUND), job())

    jobs = [in_new_loop(lambda i=i: work(i)) for i in range(4)] + [sync_work, in_new_loop(lambda: work(4))]
    outcomes = at_once(*map(together, jobs), seconds=3 * BOUND)
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert bounded(lambda: memory.count_sync(app_name="app", user_id="u1")) == 30
    bounded(memory.close_sync)
