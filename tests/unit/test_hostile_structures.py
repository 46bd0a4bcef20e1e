"""Hostile structures in sessions: deep nesting and repeated event ids.

The seam: what a user gives ``add_session_to_memory`` / ``add_events_to_memory`` /
``add_memory`` (tool calls and responses, metadata, event ids) and what they read back with
``search_memory``, ``count``, ``iter_records`` and ``delete_memory``, on the local store and
on engines that keep each record as JSON (redis, qdrant-edge, mem0).

Why: a tool call nested a few hundred levels deep used to make a user's memories unreadable
on the JSON engines (and, on mem0, impossible to erase), or to fail every save of its session
with a raw ``ValueError``; and three events sharing one id were reported saved while only the
last one was kept.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from longterm import InvalidInputError, LongTermMemory
from longterm.records import MAX_DEPTH, MemoryRecord, bound_depth, parse_record, repair_tree, tree_text
from longterm.sessions import event_ids
from longterm.shapes import plain as _plain
from longterm.testing import make_record
from tests.contract import conftest as contract

# The contract suite's engine fixtures (as tests/faults does), bound by assignment so that
# the tests' parameters of the same names do not read as redefined imports.
provider_id, backend_name, backend_config = contract.provider_id, contract.backend_name, contract.backend_config
open_memory, memory = contract.open_memory, contract.memory

#: Engines that store each record as JSON (pydantic's reader stops at 200 levels), and the local store.
ENGINES = ["local", "redis", "qdrant-edge", "mem0"]
#: Keeps tool calls and responses (the default policy keeps the user's text only).
KEEP_ALL = {"preset": "all"}


def deep(levels: int, leaf: Any = "bottom") -> Any:
    x = leaf
    for _ in range(levels):
        x = {"a": x}
    return x


def depth(value: Any) -> int:
    """Levels of dicts and lists in ``value`` (iterative: deep inputs are the point)."""
    most, stack = 0, [(value, 1)]
    while stack:
        v, level = stack.pop()
        if isinstance(v, dict):
            stack.extend((x, level + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, level + 1) for x in v)
        else:
            continue
        most = max(most, level)
    return most


def deep_session(levels: int, sid: str = "s1") -> dict[str, Any]:
    """A user turn, a tool call and its response nested ``levels`` deep, another user turn."""
    return {
        "id": sid,
        "app_name": "app",
        "user_id": "u1",
        "events": [
            {"id": "e1", "author": "user", "timestamp": 1_700_000_001, "content": "first kiwi"},
            {
                "id": "e2",
                "author": "agent",
                "timestamp": 1_700_000_002,
                "content": {"role": "model", "parts": [{"function_call": {"name": "lookup", "args": deep(levels)}}]},
            },
            {
                "id": "e3",
                "author": "agent",
                "timestamp": 1_700_000_003,
                "content": {
                    "role": "user",
                    "parts": [{"function_response": {"name": "lookup", "response": deep(levels, "papaya")}}],
                },
            },
            {"id": "e4", "author": "user", "timestamp": 1_700_000_004, "content": "later mango"},
        ],
    }


async def texts(m: LongTermMemory, query: str) -> list[str]:
    """The texts ``search_memory`` finds, best first."""
    found = await m.search_memory(app_name="app", user_id="u1", query=query)
    return [" ".join(p.text or "" for p in e.content.parts) for e in found.memories]


async def event_ids_found(m: LongTermMemory, query: str) -> list[str]:
    found = await m.search_memory(app_name="app", user_id="u1", query=query)
    return [e.custom_metadata["event_id"] for e in found.memories]


async def records(m: LongTermMemory) -> list[MemoryRecord]:
    return [r async for r in m.iter_records(app_name="app", user_id="u1")]


# -- deep nesting -------------------------------------------------------------------------------


def test_bound_depth_keeps_shallow_trees_and_turns_deeper_subtrees_into_their_json() -> None:
    shallow = {"a": [1, {"b": "c"}]}
    assert bound_depth(shallow) is shallow  # nothing copied when nothing is too deep
    bounded = bound_depth(deep(100))
    assert depth(bounded) == MAX_DEPTH
    cut = bounded
    for _ in range(MAX_DEPTH - 1):
        cut = cut["a"]
    assert json.loads(cut["a"]) == deep(100 - MAX_DEPTH)  # the subtree survives as its JSON text
    assert tree_text(deep(5000)).count("{") == 5000  # no RecursionError, however deep
    looped: dict[str, Any] = {}
    looped["a"] = looped["b"] = looped  # a structure holding itself is cut, not unrolled
    assert bound_depth({"m": looped}) == {"m": {"a": "[cycle]", "b": "[cycle]"}}


def test_a_record_written_deeper_than_pydantic_reads_back() -> None:
    # What the JSON engines hold for a memory saved before nesting was bounded (the serializer
    # allows ~255 levels, pydantic's JSON reader 200).
    old = MemoryRecord.model_construct(
        **MemoryRecord(id="r", app_name="app", user_id="u1", session_id="s", event_id="e", text="plum").__dict__
    )
    old.metadata = {"x": deep(230)}
    doc = old.model_dump_json()
    with pytest.raises(ValidationError, match="recursion limit"):
        MemoryRecord.model_validate_json(doc)
    rec = parse_record(doc)
    assert rec.text == "plum" and depth(rec.metadata) <= MAX_DEPTH + 8


@pytest.mark.parametrize("provider_id", ENGINES)
@pytest.mark.parametrize("levels", [215, 600])  # past pydantic's reader (200), past its serializer (~255)
async def test_deep_tool_calls_and_metadata_save_and_read_back(
    memory: LongTermMemory, provider_id: str, levels: int
) -> None:
    result = await memory.add_session_to_memory(deep_session(levels), auto_save_memory_policy=KEEP_ALL)
    assert (result.new_events, result.saved) == (4, 4)
    with pytest.raises(InvalidInputError, match=r"custom_metadata\['x'\].* nests deeper than 32 levels"):
        await memory.add_memory(  # metadata comes back as given or is refused: engines keep no deeper
            app_name="app", user_id="u1", memories=[{"content": "plum note"}], custom_metadata={"x": deep(1200)}
        )
    added = await memory.add_memory(
        app_name="app", user_id="u1", memories=[{"content": "plum note"}], custom_metadata={"x": deep(30)}
    )
    assert added.saved == 1

    # Best first (mem0 ranks by vectors only, so every memory comes back, in some order).
    assert (await texts(memory, "later mango"))[0] == "later mango"
    assert (await texts(memory, "plum note"))[0] == "plum note"
    assert {"e2", "e3"} <= set(await event_ids_found(memory, "lookup"))
    assert await memory.count(app_name="app", user_id="u1") == 5
    stored = await records(memory)
    assert sorted(r.event_id for r in stored if r.session_id == "s1") == ["e1", "e2", "e3", "e4"]
    assert all(depth(r.content) <= MAX_DEPTH + 8 and depth(r.metadata) <= MAX_DEPTH + 8 for r in stored)
    call = next(r for r in stored if r.event_id == "e2").content["parts"][0]["function_call"]
    assert call["name"] == "lookup" and "bottom" in json.dumps(call)  # the deep part is kept, as text
    assert "papaya" in next(r for r in stored if r.event_id == "e3").text

    replay = await memory.add_session_to_memory(deep_session(levels), auto_save_memory_policy=KEEP_ALL)
    assert replay.new_events == 0
    assert await memory.delete_memories(app_name="app", user_id="u1") == 5
    assert await memory.count(app_name="app", user_id="u1") == 0


@pytest.mark.parametrize("provider_id", ["redis", "qdrant-edge", "mem0"])
async def test_a_store_holding_an_over_deep_record_stays_searchable_and_erasable(
    memory: LongTermMemory, provider_id: str
) -> None:
    # A record as an earlier version wrote it: metadata 230 levels deep, past pydantic's reader.
    good = make_record("plum from before", session="_direct", event="old")
    old = MemoryRecord.model_construct(**{**good.__dict__, "metadata": {"x": deep(230)}})
    await memory.upsert_records([old])
    assert await texts(memory, "plum from before") == ["plum from before"]
    assert [r.event_id for r in await records(memory)] == ["old"]
    assert await memory.delete_memories(app_name="app", user_id="u1") == 1
    assert await memory.count(app_name="app", user_id="u1") == 0


async def test_nesting_past_the_serializers_limit_saves_instead_of_raising(tmp_path: Any) -> None:
    m = LongTermMemory(backend="local", backend_config={"path": str(tmp_path / "m.db")})
    try:
        # No ids: the derived ids hash the content, which pydantic cannot serialize this deep; the
        # default policy classifies the tool events (serializing them) before it leaves them out.
        events = [{k: v for k, v in e.items() if k != "id"} for e in deep_session(600)["events"]]
        result = await m.add_events_to_memory(app_name="app", user_id="u1", events=events, session_id="s9")
        assert (result.new_events, result.saved) == (4, 2)
        again = await m.add_events_to_memory(app_name="app", user_id="u1", events=events, session_id="s9")
        assert again.new_events == 0  # derived ids are stable
        assert await texts(m, "kiwi") == ["first kiwi"]
    finally:
        await m.close()


class Unreadable:
    """An event-like object whose dump fails, as a broken third-party object might."""

    def __init__(self, event_id: str | None = None) -> None:
        self.id, self.author = event_id, "user"

    def model_dump(self, **_: Any) -> Any:
        raise RuntimeError("boom")


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


async def test_an_event_that_cannot_be_read_is_an_invalid_input_naming_it(tmp_path: Any) -> None:
    m = LongTermMemory(backend="local", backend_config={"path": str(tmp_path / "m.db")})

    def session(*events: Any) -> dict[str, Any]:
        return {"id": "s1", "app_name": "app", "user_id": "u1", "events": list(events)}

    try:
        with pytest.raises(InvalidInputError, match=r"event 'w1' cannot be read \(RuntimeError: boom\)"):
            await m.add_session_to_memory(session(Unreadable("w1")))
        without_id = {"author": "user", "content": Unreadable()}  # its id is derived from the content
        with pytest.raises(InvalidInputError, match=r"event #1 of the session cannot be read \(RuntimeError: boom\)"):
            await m.add_session_to_memory(session({"id": "ok", "content": "fine"}, without_id))
        code = {"id": "c1", "author": "agent", "content": {"parts": [{"executable_code": {"code": Unprintable()}}]}}
        cannot_save = r"event 'c1' of session 's1' cannot be saved \(RuntimeError: no text\)"
        with pytest.raises(InvalidInputError, match=cannot_save):
            await m.add_session_to_memory(session(code), auto_save_memory_policy=KEEP_ALL)
        assert await m.count(app_name="app", user_id="u1") == 0  # a session is saved whole or not at all
    finally:
        await m.close()


# -- repeated event ids -------------------------------------------------------------------------


def same_id_session(*texts_: str, stamps: list[float] | None = None) -> dict[str, Any]:
    stamps = stamps or [1_700_000_000.0 + i for i in range(len(texts_))]
    return {
        "id": "s1",
        "app_name": "app",
        "user_id": "u1",
        "events": [
            {"id": "e", "author": "user", "timestamp": ts, "content": text}
            for text, ts in zip(texts_, stamps, strict=True)
        ],
    }


@pytest.mark.parametrize("provider_id", ["local", "qdrant-edge"])
async def test_different_events_sharing_an_id_are_all_kept(memory: LongTermMemory, provider_id: str) -> None:
    session = same_id_session("first apricot", "second blueberry", "third cherry")
    result = await memory.add_session_to_memory(session)
    assert (result.new_events, result.saved) == (3, 3)
    assert await memory.count(app_name="app", user_id="u1") == 3
    for word in ("apricot", "blueberry", "cherry"):
        assert len(await texts(memory, word)) == 1
    ids = sorted(r.event_id for r in await records(memory))
    assert ids[0] == "e" and all(i.startswith("e#") for i in ids[1:])  # the earliest keeps its id

    assert (await memory.add_session_to_memory(session)).new_events == 0  # a replay writes nothing
    session["events"].append({"id": "e", "author": "user", "timestamp": 1_700_000_009.0, "content": "fourth date"})
    more = await memory.add_session_to_memory(session)
    assert (more.new_events, more.saved) == (1, 1)
    assert await memory.count(app_name="app", user_id="u1") == 4


@pytest.mark.parametrize("provider_id", ["local"])
async def test_events_sharing_an_id_keep_their_ids_in_any_order(memory: LongTermMemory, provider_id: str) -> None:
    """A session store (or a re-sorted transcript) lists the same events in another order: no
    memory is written twice, and one the user erased stays erased."""
    session = same_id_session("I moved to Lisbon", "my dog is named Rex", "I am vegan")
    assert (await memory.add_session_to_memory(session)).saved == 3
    [lisbon] = [r for r in await records(memory) if "Lisbon" in r.text]
    assert await memory.delete_memory(app_name="app", user_id="u1", memory_id=lisbon.id) == 1
    for order in ([2, 1, 0], [1, 0, 2], [1, 2, 0]):
        shuffled = {**session, "events": [session["events"][i] for i in order]}
        assert (await memory.add_session_to_memory(shuffled)).new_events == 0
    assert sorted(r.text for r in await records(memory)) == ["I am vegan", "my dog is named Rex"]


_SHARING = [
    {"id": "a", "author": "user", "timestamp": 5, "content": "one"},
    {"id": "a", "author": "user", "timestamp": 5, "content": "two"},
    {"id": "a", "author": "user", "timestamp": 1, "content": "three"},
    {"id": "a", "author": "user", "timestamp": 1, "content": "three"},
    {"id": "b", "author": "model", "content": "four"},
    {"id": "b", "author": "user", "content": "four"},
    {"author": "user", "content": "five"},
]


@given(st.permutations(range(len(_SHARING))))
def test_an_events_id_does_not_depend_on_where_the_session_lists_it(order: list[int]) -> None:
    expected = dict(zip(range(len(_SHARING)), event_ids(_SHARING), strict=True))
    assert dict(zip(order, event_ids([_SHARING[i] for i in order]), strict=True)) == expected


@pytest.mark.parametrize("provider_id", ["local"])
async def test_an_event_repeated_identically_is_one_event(memory: LongTermMemory, provider_id: str) -> None:
    session = same_id_session("same fig", "same fig", "same fig", stamps=[1_700_000_000.0] * 3)
    result = await memory.add_session_to_memory(session)
    assert (result.new_events, result.saved) == (1, 1)
    assert await memory.count(app_name="app", user_id="u1") == 1

    mixed = same_id_session("a guava", "a lime", "a guava", stamps=[1_700_000_000.0] * 3)
    mixed["id"] = "s2"
    result = await memory.add_session_to_memory(mixed)
    assert (result.new_events, result.saved) == (2, 2)
    assert await memory.count(app_name="app", user_id="u1") == 3

    events = [{"id": "x", "author": "user", "timestamp": 5.0, "content": "one kumquat"}] * 2
    via_events = await memory.add_events_to_memory(app_name="app", user_id="u1", events=events, session_id="s3")
    assert (via_events.new_events, via_events.saved) == (1, 1)
    assert await memory.count(app_name="app", user_id="u1") == 4


def _old_derived_event_id(raw: dict[str, Any]) -> str:
    """``sessions._derived_event_id`` as it was before repeated ids were handled."""
    content = to_jsonable_python(_plain(raw.get("content")), fallback=str, bytes_mode="base64")
    body = repair_tree({"author": raw.get("author"), "timestamp": raw.get("timestamp"), "content": content})
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    return "derived-" + hashlib.sha256(text.encode()).hexdigest()[:24]


def test_ids_of_sessions_without_repeated_ids_are_unchanged() -> None:
    raw = [
        {"id": "a", "author": "user", "content": "x"},
        {"id": "b", "author": "user", "content": "x"},
        {"author": "user", "timestamp": 3, "content": "hi \ud83d"},
        {"author": "user", "timestamp": 3, "content": "hi \ud83d"},
        {"author": "agent", "content": {"parts": [{"inline_data": {"mime_type": "image/png", "data": b"\xff\x00"}}]}},
        {"author": "agent", "content": {"parts": [{"function_call": {"name": "f", "args": deep(100)}}]}},
    ]
    first = _old_derived_event_id(raw[2])
    assert event_ids(raw) == [
        "a",
        "b",
        first,
        f"{first}-1",
        _old_derived_event_id(raw[4]),
        _old_derived_event_id(raw[5]),
    ]
