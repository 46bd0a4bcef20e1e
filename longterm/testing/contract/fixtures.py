"""The contract's fixtures: a fresh home, the recipe of a store, memories opened and closed on it.

The seam: ``Fixtures``, the mixin every behaviour mixin's tests draw on (``memory``,
``open_memory``, ``home_config`` and the autouse ``longterm_home``), given ``backend_name``
and ``backend_config`` by the engine's test class; ``memories(name, config)`` (the same
opener as a context manager, for a suite's own conftest); ``in_threads`` (jobs at once, a hang
failing the test within ``HANG_LIMIT``); ``search_texts`` and ``hit_parts`` (what a search found).

Why the recipe and not an instance: every test opens the store as a user does, by name and
config, and several times where a promise needs it (another index, another home, another
process).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from ... import LongTermMemory
from ...entries import entry_text

T = TypeVar("T")

#: Longest any concurrent part of a test may run before it counts as a hang and fails.
#: A bound against hangs, far above the time the work takes; speed is measured in bench/.
HANG_LIMIT = 180.0


@contextmanager
def memories(backend_name: str, backend_config: dict[str, Any]) -> Iterator[Callable[..., LongTermMemory]]:
    """A function opening a ``LongTermMemory`` on the test's store (each call a fresh
    'process'; keyword arguments go to ``LongTermMemory``, ``backend_config`` included);
    every memory it opened is closed afterwards, within ``HANG_LIMIT``."""
    opened: list[LongTermMemory] = []

    def _open(**kwargs: Any) -> LongTermMemory:
        m = LongTermMemory(**{"backend": backend_name, "backend_config": dict(backend_config), **kwargs})
        opened.append(m)
        return m

    yield _open
    in_threads({f"closing memory {i}": m.close_sync for i, m in enumerate(opened)})


def in_threads(jobs: Mapping[str, Callable[[], T]]) -> dict[str, T]:
    """Run each job in its own daemon thread, all at once; their results by name. A job
    still running after ``HANG_LIMIT`` seconds fails the test (a hang fails it, and does not
    block the run); the first job that raised fails it with its error."""
    results: dict[str, T] = {}
    errors: dict[str, BaseException] = {}

    def run(name: str, job: Callable[[], T]) -> None:
        try:
            results[name] = job()
        except BaseException as exc:
            errors[name] = exc

    threads = [threading.Thread(target=run, args=item, name=item[0], daemon=True) for item in jobs.items()]
    for t in threads:
        t.start()
    deadline = time.monotonic() + HANG_LIMIT
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"still running after {HANG_LIMIT:g} s, so hung: {hung}"
    for name, exc in errors.items():
        raise AssertionError(f"{name} failed: {type(exc).__name__}: {exc}") from exc
    return results


def hit_parts(entry: Any) -> list[Any]:
    """A search hit's parts (ADK's ``Content.parts`` may be None)."""
    return list(entry.content.parts or []) if entry.content is not None else []


async def search_texts(memory: LongTermMemory, app: str, user: str, query: str, k: int = 10) -> list[str]:
    """The texts of what ``query`` finds of (app, user), best first."""
    res = await memory.search_memory(app_name=app, user_id=user, query=query, top_k=k)
    return [entry_text(m) for m in res.memories]


class Fixtures:
    """The fixtures of the contract; the engine's test class adds ``backend_name`` and ``backend_config``."""

    @pytest.fixture(autouse=True)
    def longterm_home(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        """This test's own LONGTERM_HOME; no other LONGTERM_* variable is set."""
        for var in [v for v in os.environ if v.startswith("LONGTERM_")]:
            monkeypatch.delenv(var)
        home = tmp_path / "home"
        monkeypatch.setenv("LONGTERM_HOME", str(home))
        return home

    @pytest.fixture
    def home_config(self) -> dict[str, Any] | None:
        """A backend_config whose store's location follows LONGTERM_HOME; None: no such default."""
        return None

    @pytest.fixture
    def open_memory(self, backend_name: str, backend_config: dict[str, Any]) -> Iterator[Callable[..., LongTermMemory]]:
        with memories(backend_name, backend_config) as _open:
            yield _open

    @pytest_asyncio.fixture
    async def memory(self, open_memory: Callable[..., LongTermMemory]) -> AsyncIterator[LongTermMemory]:
        m = open_memory()
        yield m
        await m.close()
