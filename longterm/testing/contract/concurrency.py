"""The contract's concurrency and lifetime: two writers at once, one memory from every kind of
caller, a close that leaves every later call failing clearly.

The seam: ``Concurrency``, a mixin of test methods over ``Fixtures``' ``open_memory`` and the
recipe; the class attribute ``processes = False`` runs the two writers as two memories in two
threads, for a store that lives in one process's memory (else they are two processes,
``python -m longterm.testing._writer``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ... import BackendUnavailableError, LongTermMemory, LongTermMemoryError
from ...core import registry
from .. import make_session
from .._writer import REFUSED, write
from .fixtures import HANG_LIMIT, in_threads

#: One word per concurrent session of the concurrency test: its own search term.
FRUITS = ["mango", "kiwi", "papaya", "lychee", "guava", "quince", "durian", "rambutan", "tamarind"]


class Concurrency:
    """Concurrent writers and callers get exact results, never a hang; a closed memory says so."""

    #: False for a store that lives in one process's memory and so cannot be shared with another.
    processes: bool = True

    def test_two_processes_saving_the_same_session(
        self, backend_name: str, backend_config: dict[str, Any], tmp_path: Path
    ):
        """Two writers save the same session at once: processes, or for a store that lives in
        one process's memory (``processes = False``), two memories in two threads."""
        turns = [("user" if i % 2 == 0 else "model", f"event {i} about topic {i % 7}") for i in range(400)]
        session = make_session("shared", turns=turns)
        outcomes = self._two_writers(backend_name, backend_config, session, tmp_path)
        # A store that allows one process at a time (embedded engines) must refuse the
        # second one clearly; every other outcome but success is a failure.
        for out in outcomes:
            assert out == "ok" or "another process" in out, out
        assert "ok" in outcomes
        memory = LongTermMemory(backend=backend_name, backend_config=backend_config)
        try:
            assert memory.count_sync(app_name="app", user_id="u1") == 200
        finally:
            memory.close_sync()

    def _two_writers(self, name: str, config: dict[str, Any], session: dict[str, Any], tmp_path: Path) -> list[str]:
        """Two writers saving ``session`` three times each, at once: each one's outcome."""
        if not self.processes:

            def writer() -> str:
                try:
                    write(name, config, session, 3)
                except BackendUnavailableError as exc:
                    return f"refused: {exc}"
                return "ok"

            return list(in_threads({"writer 1": writer, "writer 2": writer}).values())
        path = tmp_path / "session.json"
        path.write_text(json.dumps(session))
        cls = registry.backend_class(name)
        target = f"{cls.__module__}:{cls.__qualname__}"
        cmd = [sys.executable, "-m", "longterm.testing._writer", name, target, json.dumps(config), str(path), "3"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        procs = [
            subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
        ]
        outcomes = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=HANG_LIMIT)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise
            assert p.returncode in (0, REFUSED), err
            outcomes.append("ok" if p.returncode == 0 else f"refused: {out}")
        return outcomes

    def test_one_memory_from_sync_wrappers_async_code_and_threads(self, open_memory: Callable[..., LongTermMemory]):
        """One memory used at once from its sync wrappers, from several coroutines on one loop
        and from four threads each running its own loop: every call succeeds, exactly."""
        memory = open_memory()
        sessions = {
            f: make_session(f"s-{f}", turns=[("user", f"I like {f}, note {i}") for i in range(5)]) for f in FRUITS
        }

        async def save_and_find(fruit: str) -> tuple[int, int, str]:
            first = await memory.add_session_to_memory(sessions[fruit])
            again = await memory.add_session_to_memory(sessions[fruit])
            res = await memory.search_memory(app_name="app", user_id="u1", query=fruit, top_k=5)
            return first.saved, again.saved, res.memories[0].custom_metadata["session_id"]

        def with_sync_wrappers(fruits: list[str]) -> list[tuple[int, int, str]]:
            out = []
            for f in fruits:
                first = memory.add_session_to_memory_sync(sessions[f])
                again = memory.add_session_to_memory_sync(sessions[f])
                res = memory.search_memory_sync(app_name="app", user_id="u1", query=f, top_k=5)
                out.append((first.saved, again.saved, res.memories[0].custom_metadata["session_id"]))
            return out

        async def together(fruits: list[str]) -> list[tuple[int, int, str]]:
            return list(await asyncio.gather(*(save_and_find(f) for f in fruits)))

        def on_a_new_loop(fruits: list[str]) -> list[tuple[int, int, str]]:
            return asyncio.run(together(fruits))

        jobs = {
            "sync wrappers": partial(with_sync_wrappers, FRUITS[:2]),
            "three coroutines on one loop": partial(on_a_new_loop, FRUITS[2:5]),
        }
        jobs.update({f"thread {i} with its own loop": partial(on_a_new_loop, [f]) for i, f in enumerate(FRUITS[5:])})
        outcomes = sorted(o for results in in_threads(jobs).values() for o in results)
        assert outcomes == sorted((5, 0, f"s-{f}") for f in FRUITS)
        counted = in_threads({"count": lambda: memory.count_sync(app_name="app", user_id="u1")})
        assert counted["count"] == 5 * len(FRUITS)

    @pytest.mark.asyncio
    async def test_close_twice_then_every_call_fails_clearly(self, open_memory: Callable[..., LongTermMemory]):
        m = open_memory()
        await m.add_session_to_memory(make_session())
        await m.close()
        await m.close()
        with pytest.raises(LongTermMemoryError):
            await m.count(app_name="app", user_id="u1")
        with pytest.raises(LongTermMemoryError):
            await m.search_memory(app_name="app", user_id="u1", query="hiking")
        with pytest.raises(LongTermMemoryError):
            await m.add_session_to_memory(make_session("s2"))
        with pytest.raises(LongTermMemoryError):
            await m.delete_memories(app_name="app", user_id="u1")
        s = open_memory()
        assert s.count_sync(app_name="app", user_id="u1") == 1
        s.close_sync()
        s.close_sync()
        with pytest.raises(LongTermMemoryError):
            s.search_memory_sync(app_name="app", user_id="u1", query="hiking")
