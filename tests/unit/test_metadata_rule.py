"""The metadata rule (``sessions.metadata``) beyond what the contract runs on every engine:
objects converted before they are checked, structures that hold themselves or nest past any
recursion limit, records written as they are (``memory.inputs.records_metadata``), and the
records an older local store kept with NaN, which must still read."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pydantic import BaseModel

from longterm import InvalidInputError, LongTermMemory, MemoryRecord
from longterm.memory.inputs import metadata, records_metadata
from longterm.records import record_id
from longterm.sessions.metadata import MAX_SAFE_INT, metadata_problem


@dataclasses.dataclass
class Reading:
    value: float


class Model(BaseModel):
    scores: dict[str, float]


def test_objects_are_checked_as_they_are_stored():
    assert metadata_problem({"r": Reading(float("nan"))}) == (
        "custom_metadata['r']['value'] is NaN: JSON has no NaN; store None or a string."
    )
    assert "['m']['scores']['x'] is infinity" in (metadata_problem({"m": Model(scores={"x": math.inf})}) or "")
    assert metadata_problem({"at": datetime.now(timezone.utc), "r": Reading(1.5), "b": b"\xff", "s": {1, 2}}) is None
    assert "['s']" in (metadata_problem({"s": {MAX_SAFE_INT + 1}}) or "")


def test_bools_str_subclasses_and_the_integer_limits():
    assert metadata_problem({"t": True, "n": MAX_SAFE_INT, "m": -MAX_SAFE_INT, "f": 1e308}) is None
    assert "got True (bool)" in (metadata_problem({"a": {True: 1}}) or "")
    assert "got None (NoneType)" in (metadata_problem({"a": [{None: 1}]}) or "")

    class Key(str):
        pass

    assert metadata_problem({Key("k"): 1}) is None


def test_a_structure_holding_itself_one_nested_too_deep_and_an_object_without_json_are_refused():
    """Each came back changed: ``"[cycle]"``, a JSON string past level 32, ``"<object object at ...>"``."""
    loop: dict[str, object] = {"name": "loop"}
    loop["self"] = loop
    assert "nests deeper than 32 levels (or holds itself)" in (metadata_problem(loop) or "")
    deep: dict[str, object] = {"leaf": 1}
    for _ in range(5000):  # walked in a loop, past every recursion limit
        deep = {"d": deep}
    assert (metadata_problem(deep) or "").startswith("custom_metadata['d']['d']")
    shallow: dict[str, object] = {"leaf": 1}
    for _ in range(30):
        shallow = {"d": shallow}
    assert metadata_problem(shallow) is None
    assert metadata_problem({"o": object()}) == (
        "custom_metadata['o'] is a object, which has no JSON form; store text, a number, true or false, None, "
        "a list or a dict."
    )
    assert metadata_problem({"when": datetime(2025, 1, 1, tzinfo=timezone.utc), "tags": {"a"}, "raw": b"x"}) is None


def test_the_argument_is_named():
    with pytest.raises(InvalidInputError, match=r"^metadata\['a'\] is -infinity"):
        metadata({"a": -math.inf}, "metadata")
    with pytest.raises(InvalidInputError, match=r"^custom_metadata keys must be strings, got 1 \(int\)"):
        metadata({1: "x"})


def _record(meta: dict[str, object]) -> MemoryRecord:
    rid = record_id("app", "u1", "s1", "e1")
    return MemoryRecord(id=rid, app_name="app", user_id="u1", session_id="s1", event_id="e1", text="t", metadata=meta)


def test_records_written_as_they_are_are_held_to_the_same_rule():
    fine = [_record({"a": [1, 2.5, None]}), "not a record"]  # the type is upsert_records' to refuse, by index
    assert records_metadata(fine) == fine
    with pytest.raises(InvalidInputError, match=r"records\[1\]\.metadata\['score'\] is NaN.*record '[0-9a-f]+'"):
        records_metadata([_record({}), _record({"score": math.nan})])
    with pytest.raises(InvalidInputError, match=r"records\[0\]\.metadata\['a'\] keys must be strings"):
        records_metadata([_record({"a": {1: "x"}})])


async def test_records_an_older_local_store_kept_with_nan_still_read(tmp_path: Path):
    """The local engine kept NaN and infinities (Python's JSON writes them); such records read
    as they were, by id, listed, searched and scanned: the rule refuses at the door, never on reading."""
    path = tmp_path / "old.db"
    m = LongTermMemory(backend_config={"path": str(path)})
    saved = await m.add("a reading from an older version", user_id="u1", metadata={"score": 0.5})
    await m.close()
    with sqlite3.connect(path) as db:  # as an older version wrote it
        db.execute("UPDATE records SET metadata = ?", ('{"score": NaN, "high": Infinity, "low": -Infinity}',))
    m = LongTermMemory(backend_config={"path": str(path)})
    got = await m.get(saved.memory_ids[0], user_id="u1")
    assert got is not None and math.isnan(got.metadata["score"])
    assert (got.metadata["high"], got.metadata["low"]) == (math.inf, -math.inf)
    [listed] = (await m.get_all(user_id="u1")).memories
    assert math.isnan(listed.metadata["score"])
    [found] = await m.search("reading", user_id="u1")
    assert math.isnan(found.metadata["score"])
    [scanned] = [r async for r in m.iter_records(app_name=m.default_app, user_id="u1")]
    assert math.isnan(scanned.metadata["score"])
    await m.close()


async def test_an_adk_event_with_nan_in_its_custom_metadata_is_refused_or_left_out(tmp_path: Path):
    """ADK's Event carries ``custom_metadata``: refused by a direct save, naming the event; left out,
    unmarked, by an automatic (lenient) save, which saves the session's other events."""
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session
    from google.genai import types

    def event(eid: str, text: str, meta: dict[str, object] | None) -> Event:
        content = types.Content(role="user", parts=[types.Part(text=text)])
        return Event(id=eid, author="user", invocation_id="i1", content=content, custom_metadata=meta)

    events = [event("e-nan", "a reading", {"reading": {"value": math.nan}}), event("e-ok", "a note", {"n": 1})]
    session = Session(id="adk-meta", app_name="app", user_id="u1", events=events)
    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    with pytest.raises(InvalidInputError, match=r"event 'e-nan': custom_metadata\['reading'\]\['value'\] is NaN"):
        await m.add_session_to_memory(session)
    result = await m.add_session_to_memory(session, lenient=True)
    assert (result.saved, result.refused) == (1, 1)
    events[0].custom_metadata = {"reading": {"value": None}}
    assert (await m.add_session_to_memory(session)).saved == 1
    assert await m.count(app_name="app", user_id="u1") == 2
    await m.close()


async def test_a_lone_surrogate_in_a_key_is_repaired_by_add_and_update_alike(tmp_path: Path):
    """A key's lone surrogate made ``add`` refuse with a model dump and ``update`` fail on the
    local engine (UTF-8) while others stored three U+FFFD: both now store one U+FFFD, as for values."""
    memory = LongTermMemory(app_name="app", backend_config={"path": str(tmp_path / "m.db")})
    (mid,) = (await memory.add("x", user_id="u", metadata={"\udfff": 1, "k": {"\ud800": "v"}})).memory_ids
    assert (await memory.get(mid, user_id="u")).metadata == {"\ufffd": 1, "k": {"\ufffd": "v"}}  # type: ignore[union-attr]
    await memory.update(mid, user_id="u", text="half \ud83d emoji", metadata={"\udfff": 2})
    got = await memory.get(mid, user_id="u")
    assert got is not None and got.metadata == {"\ufffd": 2} and got.text == "half \ufffd emoji"
    await memory.close()
