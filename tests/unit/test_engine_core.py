"""The engine core's own promises, on engines built for the purpose: the record size limit
counts what the engine stores (and mem0 the text its one embedding represents), a side
ledger serves the engines that keep none, whenever it is set, and closes with the engine
even when the engine's own close fails; an engine wrapping the default save without a
ledger hears what to implement instead of recursing; a dropped memory's threads end and its
files close."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from longterm import InvalidInputError, LongTermMemory
from longterm.backends.local import LocalBackend
from longterm.backends.mem0 import Mem0Backend
from longterm.core.engine import Engine
from longterm.core.ledger import SideLedger
from longterm.errors import BackendError
from longterm.records import MemoryRecord, Scope, record_id
from longterm.retrieval.embedders import HashingEmbedder
from tests.conftest import make_session
from tests.test_kit_example import dict_backend

S = Scope(app_name="a", user_id="u")


def with_tool_call(text: str, role: str = "user") -> MemoryRecord:
    parts: list[dict[str, Any]] = [{"text": text}, {"function_call": {"name": "f", "args": {}}}]
    ids = {"id": record_id("a", "u", "s", "e"), "app_name": "a", "user_id": "u", "session_id": "s", "event_id": "e"}
    return MemoryRecord(**ids, role=role, text=text, content={"role": role, "parts": parts})


async def test_the_local_limit_counts_content_as_stored_compact_utf8(tmp_path: Path) -> None:
    # Stored: 36,000 bytes of text and 36,051 of content; escaped to ASCII the content would be 108 KB.
    store = LocalBackend(tmp_path / "m.db", max_record_bytes=100_000)
    await store.save([with_tool_call("记" * 12_000)], S, "s", ["e"])
    assert await store.count(S) == 1
    with pytest.raises(InvalidInputError, match="over the local backend's limit of 100000"):
        await store.save([with_tool_call("记" * 20_000)], S, "s2", ["e"])
    await store.close()


def test_the_mem0_limit_counts_the_text_its_embedding_represents(tmp_path: Path) -> None:
    store = Mem0Backend(path=tmp_path / "m", embedder=HashingEmbedder(dim=8), max_record_bytes=65_536)
    store.saving.check_sizes([with_tool_call("x" * 40_000, role="model")])  # the call beside the text does not count
    with pytest.raises(InvalidInputError, match="over the mem0 backend's limit"):
        store.saving.check_sizes([with_tool_call("x" * 70_000)])


class NoLedger(dict_backend.DictBackend):
    _ledger_mark, _ledger_saved = Engine._ledger_mark, Engine._ledger_saved
    _meta_get, _meta_set = Engine._meta_get, Engine._meta_set


class WrapsCommit(NoLedger):
    def _commit(self, records, vectors, scope, session_id, event_ids, **kw) -> None:
        return super()._commit(records, vectors, scope, session_id, event_ids, **kw)


async def test_an_engine_without_a_ledger_hears_what_to_implement() -> None:
    store = WrapsCommit("core-wraps")
    with pytest.raises(BackendError, match="keeps no ledger: implement _ledger_saved/_ledger_mark") as info:
        await store.mark_saved(S, "s", ["e"])
    assert not isinstance(info.value.__cause__, RecursionError)
    await store.close()


class SideFirst(NoLedger):
    def __init__(self, store: str, ledger: Path) -> None:
        self.side_ledger = SideLedger(ledger, "x")  # before the core's __init__
        super().__init__(store)


class CloseFails(SideFirst):
    def _close(self) -> None:
        raise RuntimeError("the client failed to close")


async def test_a_side_ledger_set_before_the_cores_init_serves_and_closes_with_the_engine(tmp_path: Path) -> None:
    store = SideFirst("core-side", tmp_path / "ledger.db")
    await store.mark_saved(S, "s", ["e"])
    assert await store.saved(S, "s") == {"e"}
    await store.close()
    failing = CloseFails("core-close", tmp_path / "ledger2.db")
    await failing.mark_saved(S, "s", ["e"])
    await failing.close()
    assert failing.side_ledger is not None and failing.side_ledger._conn is None


def _longterm_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("longterm-") and t.name != "longterm-embed_0"}


def _files_under(path: Path) -> list[str]:
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(path.resolve())):
            found.append(target)
    return found


@pytest.mark.parametrize("embed_later", [False, True])
def test_a_dropped_local_memory_ends_its_threads_and_closes_its_files(tmp_path: Path, embed_later: bool) -> None:
    """A memory used from the sync wrappers and async code, then dropped unclosed: its worker, its
    sync loop and its background embedder end, and its files are closed (they used to stay)."""
    before = _longterm_threads()
    backend = LocalBackend(tmp_path / "m.db", embedder=HashingEmbedder(32), embed_later=embed_later)
    memory = LongTermMemory(backend=backend)
    del backend
    memory.add_session_to_memory_sync(make_session())
    assert asyncio.run(memory.count(app_name="app", user_id="u1")) == 1
    assert len(_longterm_threads() - before) >= (3 if embed_later else 2)
    del memory
    gc.collect()
    deadline = time.monotonic() + 10
    while (_longterm_threads() - before or _files_under(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
        gc.collect()  # what the ended threads held may be in cycles: the collector runs, as it would
    assert not {t.name for t in _longterm_threads() - before}
    assert not _files_under(tmp_path)
