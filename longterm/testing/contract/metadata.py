"""The contract's metadata: kept as given on every engine, or refused at the door naming where.

The seam: ``MetadataValues``, a mixin of test methods over ``Fixtures``' ``memory`` and
``open_memory``; ``KEPT`` (metadata every engine must give back as it was given) and
``REFUSED`` (metadata no engine may take, each with the path its refusal names).

Why a JSON round trip is the measure: every engine stores metadata as JSON, so JSON is what
"as given" can mean everywhere. What JSON has no form for changed without a word: NaN and
infinities came back as None from Redis and Qdrant (SQLite kept them), and
``{"a": {1: "int one", "1": "str one"}}`` came back as ``{"a": {"1": "str one"}}``. The rule
(``sessions.metadata``) refuses those before any engine sees them (and nesting deeper than
engines read back, which came back as JSON text); everything else comes
back equal, types included (``True`` is not ``1``, ``1.0`` is not ``1``, ``-0.0`` keeps its sign),
read by id, by listing, by search and by another process.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ... import InvalidInputError, LongTermMemory
from ...records import MAX_DEPTH
from .. import make_record, make_session


def _nested(levels: int) -> dict[str, Any]:
    """Metadata ``levels`` dicts deep, the metadata itself the first."""
    tree: dict[str, Any] = {"leaf": "bottom"}
    for i in range(levels - 1):
        tree = {f"level {levels - 1 - i}": tree}
    return tree


#: (name, metadata) that every engine gives back equal, as ``json.dumps`` sees it.
KEPT: list[tuple[str, dict[str, Any]]] = [
    ("nested dicts", {"a": {"b": {"c": {"d": "e"}}}}),
    ("lists", {"v": [1, "two", None, [3.5, {"k": []}], {}, True]}),
    ("unicode keys", {"ключ": "значение", "键": "值", "🔑": "é", "e\u0301": "a decomposed key", "": "an empty key"}),
    ("bools are not ints", {"t": True, "f": False, "one": 1, "zero": 0, "one float": 1.0, "zero float": 0.0}),
    ("the largest integers", {"max": 2**53 - 1, "min": -(2**53 - 1)}),
    ("negative zero", {"v": -0.0}),
    ("float extremes", {"big": 1e308, "small": -1e308, "tiny": 5e-324, "third": 1 / 3}),
    ("empty values", {"s": "", "l": [], "d": {}, "n": None}),
    ("text with escapes", {"v": 'line\nbreak\ttab "quoted" \\ \u2028 </script> \x01'}),
    ("keys like operators and paths", {"$gt": 1, "a.b": 2, "metadata.x": {"$in": [1]}, "__proto__": 3}),
    ("many keys", {f"k{i}": i for i in range(200)}),
    ("as deep as kept", _nested(MAX_DEPTH)),
]

#: (name, metadata, what the refusal names) that no engine may take.
REFUSED: list[tuple[str, dict[Any, Any], str]] = [
    ("NaN", {"a": {"b": float("nan")}}, "['a']['b'] is NaN"),
    ("infinity", {"a": [1, float("inf")]}, "['a'][1] is infinity"),
    ("minus infinity", {"a": float("-inf")}, "['a'] is -infinity"),
    ("an integer key beside its text", {"a": {1: "int one", "1": "str one"}}, "['a'] keys must be strings, got 1"),
    ("a tuple key in a list", {"a": [{"b": {(1, 2): "x"}}]}, "['a'][0]['b'] keys must be strings, got (1, 2)"),
    ("a top-level integer key", {1: "x"}, "keys must be strings, got 1"),
    ("2**53", {"n": 2**53}, f"['n'] is {2**53}"),
    ("-(2**53)", {"n": -(2**53)}, f"['n'] is {-(2**53)}"),
    ("2**64", {"n": [2**64]}, f"['n'][0] is {2**64}"),
    (
        "deeper than kept",
        {"a": _nested(MAX_DEPTH)},
        "['a']['level 1']['level 2']",
    ),
    ("an object with no JSON form", {"o": [object()]}, "['o'][0] is a object, which has no JSON form"),
]

_USER = "meta-user"


def _json(value: Any) -> str:
    """``value`` as JSON with sorted keys: equal only if equal in type too (True vs 1, 1.0 vs 1)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _differences(name: str, given: dict[str, Any], got: dict[str, Any] | None, how: str) -> list[str]:
    if got is None:
        return [f"{name}: not found {how}"]
    # A search's ``custom_metadata`` holds the library's keys too (ADK has one dict); every other read
    # gives the metadata alone, with no key of the engine's.
    mine = {k: got.get(k, "<missing>") for k in given} if how == "by search" else got
    return [] if _json(mine) == _json(given) else [f"{name}: {how} gave {_json(mine)[:300]}, was {_json(given)[:300]}"]


class MetadataValues:
    """Metadata a caller gives comes back as given on every engine, or is refused naming where."""

    @pytest.mark.asyncio
    async def test_every_json_value_comes_back_as_given(self, open_memory: Any):
        memory: LongTermMemory = open_memory()
        ids = {}
        for name, meta in KEPT:
            result = await memory.add(f"metadata case {name}", user_id=_USER, metadata=meta)
            ids[name] = result.memory_ids[0]
        wrong: list[str] = []
        listed = {m.id: m.metadata for m in (await memory.get_all(user_id=_USER, limit=100)).memories}
        for name, meta in KEPT:
            got = await memory.get(ids[name], user_id=_USER)
            wrong += _differences(name, meta, None if got is None else got.metadata, "by id")
            wrong += _differences(name, meta, listed.get(ids[name]), "listed")
        found = await memory.search_memory(app_name=memory.default_app, user_id=_USER, query="metadata case", top_k=50)
        by_id = {e.id: e.custom_metadata for e in found.memories}
        for name, meta in KEPT:
            wrong += _differences(name, meta, by_id.get(ids[name]), "by search")
        await memory.close()
        again = open_memory()  # another process, reading what the engine kept
        for name, meta in KEPT:
            got = await again.get(ids[name], user_id=_USER)
            wrong += _differences(name, meta, None if got is None else got.metadata, "reopened")
        assert wrong == []

    @pytest.mark.asyncio
    async def test_every_way_in_keeps_metadata_as_given(self, memory: LongTermMemory):
        meta = {name: value for name, value in KEPT if name != "as deep as kept"}
        app = memory.default_app
        event = {"role": "user", "content": "metadata of an event", "metadata": meta}
        events = await memory.add_events_to_memory(
            app_name=app,
            user_id=_USER,
            events=[{"role": "user", "content": "metadata of a delta"}],
            custom_metadata=meta,
        )
        direct = await memory.add_memory(
            app_name=app, user_id=_USER, memories=["metadata of a memory"], custom_metadata=meta
        )
        own = await memory.add([event], user_id=_USER)
        page = {m.text: m.metadata for m in (await memory.get_all(user_id=_USER)).memories}
        assert (events.saved, direct.saved, own.saved) == (1, 1, 1)
        wrong = _differences("add_events_to_memory", meta, page.get("metadata of a delta"), "listed")
        wrong += _differences("add_memory", meta, page.get("metadata of a memory"), "listed")
        wrong += _differences("an event's metadata", meta, page["metadata of an event"].get("event_metadata"), "listed")
        assert wrong == []

    @pytest.mark.asyncio
    @pytest.mark.parametrize("way", ["add", "add_events_to_memory", "add_memory"])
    async def test_metadata_json_cannot_keep_is_refused_naming_where(self, memory: LongTermMemory, way: str):
        app = memory.default_app
        calls = {
            "add": lambda meta: memory.add("refused metadata", user_id=_USER, metadata=meta),
            "add_events_to_memory": lambda meta: memory.add_events_to_memory(
                app_name=app, user_id=_USER, events=["refused metadata"], custom_metadata=meta
            ),
            "add_memory": lambda meta: memory.add_memory(
                app_name=app, user_id=_USER, memories=["refused metadata"], custom_metadata=meta
            ),
        }
        for name, meta, where in REFUSED:
            with pytest.raises(InvalidInputError) as refused:
                await calls[way](meta)
            assert where in str(refused.value), (name, str(refused.value))
        assert (await memory.get_all(user_id=_USER)).memories == []

    @pytest.mark.asyncio
    async def test_an_event_whose_metadata_json_cannot_keep_is_refused_and_saves_once_fixed(
        self, memory: LongTermMemory
    ):
        turns = [("user", "an event with metadata"), ("user", "a plain event")]
        session = make_session("s-meta", memory.default_app, _USER, turns=turns)
        for name, meta, where in REFUSED:
            session["events"][0]["custom_metadata"] = meta
            with pytest.raises(InvalidInputError) as refused:
                await memory.add_session_to_memory(session)
            message = str(refused.value)
            assert where in message and "s-meta-e0" in message, (name, message)
        assert (await memory.get_all(user_id=_USER)).memories == []
        # an automatic (lenient) save leaves that event out, unmarked, and saves the others
        result = await memory.add_session_to_memory(session, lenient=True)
        assert (result.saved, result.refused) == (1, 1)
        session["events"][0]["custom_metadata"] = {"score": None, "n": 2**53 - 1}
        result = await memory.add_session_to_memory(session)  # fixed, the same event saves: it was never marked
        assert (result.new_events, result.saved) == (1, 1)
        page = {m.text: m.metadata for m in (await memory.get_all(user_id=_USER)).memories}
        assert page["an event with metadata"]["event_metadata"] == {"score": None, "n": 2**53 - 1}

    @pytest.mark.asyncio
    async def test_records_written_as_they_are_are_held_to_the_same_rule(self, memory: LongTermMemory):
        app = memory.default_app
        fine = make_record("a restored memory", app=app, user=_USER, event="e1", metadata={"n": 2**53 - 1})
        for n, (name, meta, where) in enumerate(REFUSED):
            if not all(isinstance(k, str) for k in meta) or name == "deeper than kept":
                continue  # string keys at the top (pydantic); a record as stored may nest as an older release kept it
            bad = make_record("a refused memory", app=app, user=_USER, event=f"bad{n}", metadata=meta)
            with pytest.raises(InvalidInputError) as refused:
                await memory.upsert_records([fine, bad])
            assert f"records[1].metadata{where}" in str(refused.value), (name, str(refused.value))
        assert (await memory.get_all(user_id=_USER)).memories == []
        await memory.upsert_records([fine])
        [kept] = (await memory.get_all(user_id=_USER)).memories
        assert kept.metadata == {"n": 2**53 - 1}
