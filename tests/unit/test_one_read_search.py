"""A search reads its hits and the neighbours that lend them score in one read on the engine's
thread (``core.neighbours.search_lending``); what that must not change: an engine subclass's own
``search`` is still the one asked, a search that ran out of time reads nothing more, hits whose
order changed after the engine picked the lenders get theirs read apart, and with an embedder
the answer is the two-call form's."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory
from longterm.backends.local import LocalBackend
from longterm.errors import BackendUnavailableError, ConfigurationError
from longterm.records import Hit, Scope

TURNS = ["which hotel should I book in Lisbon", "the Bairro Alto one, near the tram", "thanks", "ok"]
QUERY = "which hotel in Lisbon, near the tram"


def _session(sid: str, turns: list[str], user: str = "u") -> dict[str, Any]:
    events = [{"author": "user", "content": {"role": "user", "parts": [{"text": t}]}} for t in turns]
    return {"id": sid, "app_name": "app", "user_id": user, "events": events}


async def _texts(m: LongTermMemory, query: str = QUERY) -> list[tuple[str, float]]:
    found = await m.search_memory(app_name="app", user_id="u", query=query)
    return [(e.content.parts[0].text or "", e.custom_metadata["score"]) for e in found.memories]


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = LocalBackend._read

    async def counted(self: LocalBackend, what: str, fn: Any, *args: object) -> Any:
        reads.append(what)
        return await real(self, what, fn, *args)

    monkeypatch.setattr(LocalBackend, "_read", counted)
    return reads


async def test_a_search_reads_its_hits_and_their_neighbours_in_one_call(tmp_path: Path, monkeypatch) -> None:
    # The neighbours that lend score are read in the search's own call on the engine's thread
    # (one hop, not two), and the answer is the one reading them apart gives.
    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    await m.add_session_to_memory(_session("s", TURNS))
    reads = _count_reads(monkeypatch)
    together = await _texts(m)
    assert reads == ["searching"], reads
    assert sorted(t for t, _ in together[:2]) == sorted(TURNS[:2]), together
    monkeypatch.setattr(LocalBackend, "search_lending", None)  # as a backend without it: read apart
    reads.clear()
    apart = await _texts(m)
    assert reads == ["searching", "reading neighbours"], reads
    assert together == apart
    await m.close()


class Discreet(LocalBackend):
    """A user's engine whose ``search`` leaves out hits that hold a secret."""

    async def search(self, scope: Scope, query: str, top_k: int) -> list[Hit]:
        return [h for h in await super().search(scope, query, top_k) if "secret" not in h.record.text]


async def test_an_engine_that_overrides_search_is_asked_its_own_search(tmp_path: Path) -> None:
    m = LongTermMemory(backend=Discreet(tmp_path / "m.db"))
    await m.add_session_to_memory(_session("s", ["hotel in lisbon"]))
    await m.add_session_to_memory(_session("t", ["hotel secret code 1234"]))  # no neighbour lends it
    assert [t for t, _ in await _texts(m, "hotel")] == ["hotel in lisbon"]
    await m.close()


async def test_a_search_past_its_deadline_reads_no_neighbours_after_it(tmp_path: Path, monkeypatch) -> None:
    # The caller got its timeout error; the reader thread, still in the full-text query, must
    # not go on to read the neighbours of an answer no one takes.
    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db"), "timeout": 0.3})
    await m.add_session_to_memory(_session("s", TURNS))
    done, around = threading.Event(), []
    slow, real_around = LocalBackend._fulltext, LocalBackend._around

    def slow_fulltext(self: LocalBackend, *args: Any) -> Any:
        time.sleep(0.6)
        try:
            return slow(self, *args)
        finally:
            done.set()

    def counted_around(self: LocalBackend, *args: Any) -> Any:
        around.append(args)
        return real_around(self, *args)

    monkeypatch.setattr(LocalBackend, "_fulltext", slow_fulltext)
    monkeypatch.setattr(LocalBackend, "_around", counted_around)
    with pytest.raises(BackendUnavailableError):
        await m.search_memory(app_name="app", user_id="u", query=QUERY)
    assert await asyncio.to_thread(done.wait, 5)
    await asyncio.sleep(0.1)  # what the reader does right after the query
    assert around == []
    monkeypatch.setattr(LocalBackend, "_fulltext", slow)
    texts = {t for t, _ in await _texts(m)}  # and the next search answers, its neighbours read once
    assert set(TURNS[:2]) <= texts and len(around) == 1
    await m.close()


async def test_lenders_whose_order_changed_after_the_engine_picked_them_are_read_apart(
    tmp_path: Path, monkeypatch
) -> None:
    # Calibration keeps the engine's order today; were it to change, the facade must not lend
    # the neighbours the engine read around other hits: it reads the right ones in a second call.
    import longterm.memory.searching as searching

    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    await m.add_session_to_memory(_session("s1", ["hotel in Lisbon", "near the tram", "a", "b"]))
    await m.add_session_to_memory(_session("s2", ["c", "my hotel in Porto", "d"]))
    real = searching.calibrate
    monkeypatch.setattr(searching, "calibrate", lambda *a: list(reversed(real(*a))))
    reads = _count_reads(monkeypatch)
    together = await _texts(m, "hotel tram")
    assert reads == ["searching", "reading neighbours"], reads
    monkeypatch.setattr(LocalBackend, "search_lending", None)
    reads.clear()
    assert await _texts(m, "hotel tram") == together and reads == ["searching", "reading neighbours"]
    await m.close()


async def test_with_an_embedder_one_read_answers_as_two(tmp_path: Path, monkeypatch) -> None:
    config = {"path": str(tmp_path / "m.db"), "embedder": {"name": "hashing", "dim": 64}}
    m = LongTermMemory(backend_config=config)
    await m.add_session_to_memory(_session("s", TURNS))
    await m.add_session_to_memory(_session("t", ["a hotel by the sea", "in Cascais", "nice"]))
    reads = _count_reads(monkeypatch)
    together = await _texts(m)
    assert reads == ["searching"], reads
    monkeypatch.setattr(LocalBackend, "search_lending", None)
    reads.clear()
    apart = await _texts(m)
    assert reads == ["searching", "reading neighbours"], reads
    assert together == apart and {t for t, _ in together} >= set(TURNS[:2])
    await m.close()


async def test_an_engine_written_before_filters_refuses_a_filtered_search_and_hides_what_expired(
    tmp_path: Path,
) -> None:
    # Its search takes no where=: a filter cannot go before its cut, so it is refused by name; the
    # moment of a read still holds (what expired is left out of its hits and of every listing).
    clock = [2_000_000_000.0]
    m = LongTermMemory(backend=Discreet(tmp_path / "m.db"), clock=lambda: clock[0])
    await m.add_session_to_memory(_session("s", ["hotel in lisbon"]))
    await m.add_session_to_memory(_session("t", ["hotel in porto"]), ttl=10)
    with pytest.raises(ConfigurationError, match="takes no filters"):
        await m.search_memory(app_name="app", user_id="u", query="hotel", filters={"session_id": "s"})
    clock[0] += 11
    assert [t for t, _ in await _texts(m, "hotel")] == ["hotel in lisbon"]
    assert await m.count(app_name="app", user_id="u", filters={"session_id": "t"}) == 0
    await m.close()
