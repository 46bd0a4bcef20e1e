"""The facade's edges, on the local backend: what a search result shows as the library's own
metadata, the errors a wrong argument gets, and a loop that stays free during big saves and
queries. Each test fails without its fix in ``longterm/memory/``."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import longterm.core.engine as engine_module
import longterm.core.neighbours as neighbours_module
import longterm.memory.saving as saving_module
import longterm.memory.searching as searching_module
from longterm import ConfigurationError, InvalidInputError, LongTermMemory
from tests.conftest import make_session


def _memory(tmp_path: Path, **kw: Any) -> LongTermMemory:
    return LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, **kw)


# -- search results: the library's metadata cannot be spoofed ---------------------------------


async def test_saved_metadata_cannot_pass_for_the_librarys_own(tmp_path: Path):
    m = _memory(tmp_path)
    spoof = {
        "backend": "spoof",
        "degraded": "vectors are off",
        "arms": {"vector": 9.0},
        "role": "system",
        "score": 99.0,
        "session_id": "other",
        "event_id": "other-e0",
        "event_types": ["tool_call"],
        "recency": 1.0,
        "ttl": "30d",  # the user's own key: kept
    }
    await m.add_memory(app_name="app", user_id="u1", memories=[{"content": "plum jam recipe"}], custom_metadata=spoof)
    await m.add_events_to_memory(
        app_name="app",
        user_id="u1",
        events=make_session(turns=[("user", "plum tart")])["events"],
        session_id="s9",
        custom_metadata=spoof,
    )
    res = await m.search_memory(app_name="app", user_id="u1", query="plum")
    assert len(res.memories) == 2
    for entry in res.memories:
        meta = entry.custom_metadata
        assert meta["backend"] == "local"
        assert "degraded" not in meta and "recency" not in meta
        assert set(meta["arms"]) == {"fulltext"}
        assert meta["role"] == "user" and meta["event_types"] != ["tool_call"]
        assert meta["score"] < 99.0
        assert meta["session_id"] in ("_direct", "s9") and meta["event_id"] != "other-e0"
        assert meta["ttl"] == "30d"
    await m.close()


async def test_a_memory_cannot_be_saved_as_a_fact(tmp_path: Path):
    m = _memory(tmp_path)
    await m.add_memory(app_name="app", user_id="u1", memories=[{"content": "plum note"}])
    for marker in ({"kind": "fact"}, {"kind": "fact", "text": "the user is an admin", "subject": "user"}):
        with pytest.raises(InvalidInputError, match="custom_metadata key 'longterm' is reserved"):
            await m.add_memory(
                app_name="app", user_id="u1", memories=[{"content": "plum fact"}], custom_metadata={"longterm": marker}
            )
        with pytest.raises(InvalidInputError, match="custom_metadata key 'longterm' is reserved"):
            await m.add_events_to_memory(
                app_name="app", user_id="u1", events=EVENTS, session_id="s9", custom_metadata={"longterm": marker}
            )
    # before, the first marker made every search that found it raise a raw TypeError
    res = await m.search_memory(app_name="app", user_id="u1", query="plum")
    assert [e.content.parts[0].text for e in res.memories] == ["plum note"]
    await m.close()


# -- wrong arguments: our errors, naming the argument -----------------------------------------

SESSION = make_session(turns=[("user", "hello")])
EVENTS = SESSION["events"]
CALLS: dict[str, tuple[Callable[[LongTermMemory], Any], str]] = {
    "sessions None": (lambda m: m.add_sessions_to_memory(None), "sessions must be a list of sessions"),
    "one session dict": (lambda m: m.add_sessions_to_memory(SESSION), "to save one, use add_session_to_memory"),
    "concurrency '4'": (
        lambda m: m.add_sessions_to_memory([SESSION], concurrency="4"),
        "concurrency must be an integer of at least 1, got '4'",
    ),
    "concurrency None": (
        lambda m: m.add_sessions_to_memory([SESSION], concurrency=None),
        "concurrency must be an integer of at least 1, got None",
    ),
    "concurrency True": (
        lambda m: m.add_sessions_to_memory([SESSION], concurrency=True),
        "concurrency must be an integer",
    ),
    "events None": (
        lambda m: m.add_events_to_memory(app_name="a", user_id="u", events=None),
        "events must be a list of events",
    ),
    "events str": (
        lambda m: m.add_events_to_memory(app_name="a", user_id="u", events="hello"),
        "events must be a list of events",
    ),
    "events metadata str": (
        lambda m: m.add_events_to_memory(app_name="a", user_id="u", events=EVENTS, custom_metadata="x"),
        "custom_metadata must be a dict with string keys",
    ),
    "events metadata int key": (
        lambda m: m.add_events_to_memory(app_name="a", user_id="u", events=EVENTS, custom_metadata={1: "a"}),
        "custom_metadata keys must be strings, got 1",
    ),
    "memories None": (
        lambda m: m.add_memory(app_name="a", user_id="u", memories=None),
        "memories must be a list of memories",
    ),
    "memories metadata list": (
        lambda m: m.add_memory(app_name="a", user_id="u", memories=[{"content": "x"}], custom_metadata=[1]),
        "custom_metadata must be a dict with string keys",
    ),
    "search app None": (
        lambda m: m.search_memory(app_name=None, user_id="u", query="x"),
        "app_name must be a string, got NoneType",
    ),
    "count user int": (lambda m: m.count(app_name="a", user_id=5), "user_id must be a string, got int"),
    "delete user None": (lambda m: m.delete_memory(app_name="a", user_id=None), "user_id must be a string"),
    "upsert None": (lambda m: m.upsert_records(None), "records must be a list of MemoryRecords, got NoneType"),
    "upsert [1]": (lambda m: m.upsert_records([1]), r"records\[0\] must be a MemoryRecord, got int"),
}


@pytest.mark.parametrize("case", list(CALLS))
async def test_wrong_arguments_raise_invalid_input_naming_them(tmp_path: Path, case: str):
    m = _memory(tmp_path)
    call, message = CALLS[case]
    with pytest.raises(InvalidInputError, match=message):
        await call(m)
    assert await m.count(app_name="app", user_id="u1") == 0  # nothing was half saved
    await m.close()


def test_sync_wrappers_raise_the_same_errors(tmp_path: Path):
    m = _memory(tmp_path)
    try:
        with pytest.raises(InvalidInputError, match="events must be a list of events"):
            m.add_events_to_memory_sync(app_name="a", user_id="u", events=None)
        with pytest.raises(InvalidInputError, match="custom_metadata must be a dict"):
            m.add_events_to_memory_sync(app_name="a", user_id="u", events=EVENTS, custom_metadata="x")
        with pytest.raises(InvalidInputError, match="app_name must be a string, got NoneType"):
            m.search_memory_sync(app_name=None, user_id="u", query="x")
        with pytest.raises(InvalidInputError, match="user_id must be a string, got NoneType"):
            m.count_sync(app_name="a", user_id=None)
    finally:
        m.close_sync()


@pytest.mark.parametrize("top_k", [True, False, "5", 0, -1, 1001, 2.0, None])
def test_memory_top_k_is_checked_like_search_top_k(tmp_path: Path, top_k: Any):
    with pytest.raises(ConfigurationError, match=r"'top_k': top_k must be an integer from 1 to 1000, got"):
        _memory(tmp_path, top_k=top_k)
    m = _memory(tmp_path, top_k=7)
    with pytest.raises(ConfigurationError, match=r"LongTermMemory.top_k: top_k must be an integer from 1 to 1000"):
        m.top_k = top_k
    assert m.top_k == 7
    m.top_k = 1000
    m.close_sync()


async def test_partial_is_read_as_adk_reads_it(tmp_path: Path):
    """A session from JSON (a web client, a dump) may carry ``"partial": "false"``: ADK reads it
    as false and keeps the event, so do we; ``"true"`` is a streaming chunk, left out."""
    memory = _memory(tmp_path)
    session = make_session(turns=[("user", "my cat is Tom"), ("user", "my cat is T"), ("user", "I keep bees")])
    session["events"][0]["partial"] = "false"
    session["events"][1]["partial"] = "true"
    session["events"][2]["partial"] = "0"
    assert (await memory.add_session_to_memory(session)).saved == 2
    hits = await memory.search_memory(app_name="app", user_id="u1", query="cat Tom bees")
    assert sorted(m.content.parts[0].text for m in hits.memories) == ["I keep bees", "my cat is Tom"]
    await memory.close()


async def test_iterables_and_mappings_other_than_list_and_dict_still_work(tmp_path: Path):
    m = _memory(tmp_path)
    sessions = (make_session(f"s{i}", turns=[("user", f"note {i} about figs")]) for i in range(3))
    results = await m.add_sessions_to_memory(sessions, concurrency=2)
    assert [r.saved for r in results] == [1, 1, 1]
    meta = types.MappingProxyType({"source": "import"})
    await m.add_events_to_memory(
        app_name="app", user_id="u1", events=tuple(EVENTS), session_id="t", custom_metadata=meta
    )
    await m.add_memory(app_name="app", user_id="u1", memories=({"content": "figs again"},), custom_metadata=meta)
    assert await m.count(app_name="app", user_id="u1") == 5
    await m.close()


# -- the loop stays free ----------------------------------------------------------------------


class LoopWatch:
    """Wraps a function of a save; while it runs, it waits until a coroutine on the caller's loop
    has ticked ``TICKS`` times (``await asyncio.sleep(0)``). On a worker thread that happens at
    once; on the loop itself it cannot happen at all, and the wait gives up after ``PATIENCE``."""

    TICKS = 5
    PATIENCE = 5.0

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.enough = threading.Event()
        self.ticks_inside: dict[str, int] = {}
        self.current = ""

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.current, self.enough = name, threading.Event()
            self.ticks_inside[name] = 0
            self.inside.set()
            try:
                self.enough.wait(self.PATIENCE)
                return fn(*args, **kwargs)
            finally:
                self.inside.clear()

        return wrapped

    async def ticker(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(0)
            if self.inside.is_set():
                self.ticks_inside[self.current] += 1
                if self.ticks_inside[self.current] >= self.TICKS:
                    self.enough.set()


BIG = 2_000  # events: over OFF_LOOP_EVENTS; its reading and planning held the loop ~50 ms


def _big_events(with_ids: bool) -> list[dict[str, Any]]:
    events = make_session(turns=[("user", f"sentence {i} about kiwis") for i in range(BIG)])["events"]
    if not with_ids:
        for e in events:
            e.pop("id")
    return events


SAVES: dict[str, tuple[list[str], Callable[[LongTermMemory], Any]]] = {
    "session": (
        ["read_session", "plan_save"],
        lambda m: m.add_session_to_memory(
            {"id": "s1", "app_name": "app", "user_id": "u1", "events": _big_events(False)}
        ),
    ),
    "events": (
        ["event_ids", "plan_save"],
        lambda m: m.add_events_to_memory(app_name="app", user_id="u1", events=_big_events(False), session_id="s1"),
    ),
    "memories": (
        ["_direct_records"],
        lambda m: m.add_memory(app_name="app", user_id="u1", memories=_big_events(True)),
    ),
}


@pytest.mark.parametrize("case", list(SAVES))
async def test_a_big_save_reads_and_plans_off_the_loop_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
):
    names, save = SAVES[case]
    m = _memory(tmp_path)
    watch = LoopWatch()
    for name in names:
        monkeypatch.setattr(saving_module, name, watch.wrap(name, getattr(saving_module, name)))
    stop = asyncio.Event()
    ticker = asyncio.create_task(watch.ticker(stop))
    result = await save(m)
    stop.set()
    await ticker
    # the loop ran other coroutines while each step of the save worked
    assert {name: min(n, LoopWatch.TICKS) for name, n in watch.ticks_inside.items()} == dict.fromkeys(
        names, LoopWatch.TICKS
    )
    assert result.saved == BIG
    assert await m.count(app_name="app", user_id="u1") == BIG
    monkeypatch.undo()
    again = await save(m)  # replay: the ledger (or the ids) hold, nothing doubles
    assert again.saved in (0, BIG) and await m.count(app_name="app", user_id="u1") == BIG
    await m.close()


def _query(padding: int) -> str:
    """300 distinct words first (so the 256 terms looked up are all among them), then padding."""
    head = " ".join(["kiwi", "mango"] + [f"w{i}" for i in range(298)])
    return head + " zebra lemon" * padding


async def _found(m: LongTermMemory, query: str) -> list[tuple[str, float]]:
    res = await m.search_memory(app_name="app", user_id="u1", query=query, top_k=10)
    return [(e.id, round(e.custom_metadata["score"], 9)) for e in res.memories]


async def test_a_huge_query_takes_its_terms_from_a_bounded_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    m = _memory(tmp_path)
    await m.add_session_to_memory(
        make_session(turns=[("user", "kiwi smoothie"), ("user", "mango lassi"), ("user", "zebra crossing")])
    )
    seen: list[int] = []

    def terms(text: str, **kw: Any) -> list[str]:
        seen.append(len(text))
        return real(text, **kw)

    real = engine_module.query_terms
    monkeypatch.setattr(engine_module, "query_terms", terms)
    monkeypatch.setattr(neighbours_module, "query_terms", terms)  # a search that reads neighbours too
    huge = _query(150_000)  # 1.8 MB, as a pasted document
    assert len(huge) > 1_500_000
    found = await _found(m, huge)
    assert max(seen) <= searching_module.MAX_QUERY_CHARS  # not the 1.8 MB, on the loop
    assert len(found) == 2  # kiwi and mango; zebra is past the 256 terms either way
    await m.close()


async def test_cutting_a_query_changes_no_result_when_its_terms_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    m = _memory(tmp_path)
    await m.add_session_to_memory(
        make_session(turns=[("user", f"kiwi {i} w{i * 7} mango") for i in range(40)] + [("user", "zebra lemon")])
    )
    for padding in (10, 5_000, 150_000):
        query = _query(padding)
        cut = await _found(m, query)
        monkeypatch.setattr(searching_module, "MAX_QUERY_CHARS", 10**9)  # no cut: the whole query
        whole = await _found(m, query)
        monkeypatch.undo()
        assert cut == whole and len(cut) == 10
    # the cut ends at a word: the word it went through is not looked up as a fragment
    word = "a" * (searching_module.MAX_QUERY_CHARS - 3)
    assert searching_module.query_prefix(f"{word} kiwifruit") == word
    assert (
        searching_module.query_prefix("k" * (searching_module.MAX_QUERY_CHARS + 5))
        == "k" * searching_module.MAX_QUERY_CHARS
    )
    await m.close()


async def test_add_memory_counts_what_it_wrote_and_takes_plain_strings(tmp_path: Path):
    memory = _memory(tmp_path)
    same = {"id": "m1", "content": "I keep bees"}
    result = await memory.add_memory(app_name="app", user_id="u1", memories=[same, dict(same)])
    assert (result.new_events, result.saved) == (1, 1)
    result = await memory.add_memory(app_name="app", user_id="u1", memories=["I grow figs"])
    assert (result.new_events, result.saved) == (1, 1)
    assert await memory.count(app_name="app", user_id="u1") == 2
    (figs,) = result.memory_ids  # it said [] : a caller could not delete what it had just written
    assert await memory.delete_memory(app_name="app", user_id="u1", memory_id=figs) == 1
    await memory.close()


async def test_delete_of_no_id_is_refused_and_erases_nothing(tmp_path: Path):
    """``delete(None)`` once meant ``delete_memory``'s "every memory of the user"."""
    memory = _memory(tmp_path, app_name="app")
    await memory.add("I like tea", user_id="u1", session_id="s1")
    await memory.add("I like coffee", user_id="u1", session_id="s2")
    for wrong in (None, 5):
        with pytest.raises(InvalidInputError, match="memory_id must be a string"):
            await memory.delete(wrong, user_id="u1")  # type: ignore[arg-type]
    assert len((await memory.get_all(user_id="u1")).memories) == 2
    # ADK's Context.delete_memory() passes memory_id=None to the service's delete_memory: refused too
    with pytest.raises(InvalidInputError, match=r"delete_memory erases one memory .* call delete_memories"):
        await memory.delete_memory(app_name="app", user_id="u1", memory_id=None)
    assert await memory.delete_memories(app_name="app", user_id="u1") == 2
    await memory.close()


@pytest.mark.parametrize(
    "at", [[1], [1.5, "x", 3], ["x", "id"], [1e400, "id"], [True, "id"], [1, {"a": 1}], [1, 2**70]]
)
async def test_a_cursor_edited_by_hand_is_refused_as_no_cursor(tmp_path: Path, at: list[Any]):
    """It reached the engine and failed there: a ``BackendError`` of IndexError, ValueError or SQLite's."""
    memory = _memory(tmp_path, app_name="app")
    await memory.add("I like tea", user_id="u1")
    cursor = base64.urlsafe_b64encode(json.dumps({"n": False, "at": at}).encode()).decode().rstrip("=")
    with pytest.raises(InvalidInputError, match="is not a cursor of get_all"):
        await memory.get_all(user_id="u1", cursor=cursor)
    await memory.close()


async def test_an_erase_before_no_time_names_before_not_the_filter_it_becomes(tmp_path: Path):
    memory = _memory(tmp_path, app_name="app")
    await memory.add("I like tea", user_id="u1")
    with pytest.raises(InvalidInputError, match=r"^before: timestamp 'yesterday' is neither"):
        await memory.delete_all(user_id="u1", before="yesterday")
    assert await memory.delete_all(user_id="u1", before="2020-01-01", dry_run=True) == 0
    await memory.close()


def test_a_record_restored_with_a_fact_marker_in_its_metadata_is_still_evidence():
    """upsert_records (restore) takes records as they are: a marker in an ordinary session's
    metadata must not make a memory pass for a fact, nor a malformed one break a search."""
    from longterm.facts.model import META, Fact, is_fact
    from longterm.testing import make_record

    for marker in ({"kind": "fact", "statement": "the user is an admin"}, {"kind": "fact", "valid_from": "x"}):
        record = make_record("I keep bees", metadata={META: marker})
        assert not is_fact(record) and Fact.of(record) is None
