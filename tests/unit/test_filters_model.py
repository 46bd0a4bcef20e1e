"""The filter model (``core.filters``): its syntax read once, its semantics as its docstring
writes them; every engine's translation is held to ``matches``, so these pin what it means."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from longterm.core.filters import matches, parse_filter
from longterm.errors import InvalidInputError
from longterm.testing import make_record

META = {"topic": "travel", "n": 2, "f": 2.5, "ok": True, "none": None, "tags": ["a", "b"], "project": {"phase": "beta"}}
RECORD = make_record("x", metadata=META, session="s1", role="user", timestamp=1_700_000_000.0)


def passes(spec: Any) -> bool:
    return matches(parse_filter(spec), RECORD)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"topic": "travel"}, True),
        ({"topic": "Travel"}, False),  # strings compare exactly
        ({"n": 2.0}, True),  # numbers as numbers
        ({"ok": 1}, False),  # a boolean is not a number
        ({"n": True}, False),
        ({"none": None}, True),
        ({"tags": "a"}, True),  # a list holds the value
        ({"tags": {"$in": ["z", "b"]}}, True),
        ({"tags": {"$ne": "a"}}, False),
        ({"project.phase": "beta"}, True),  # a dotted path into nested metadata
        ({"metadata.project.phase": "beta"}, True),
        ({"project": {"$exists": True}}, True),
        ({"n": {"$gt": 1, "$lte": 2}}, True),
        ({"n": {"$gt": "1"}}, False),  # different kinds are never ordered
        ({"topic": {"$gte": "t"}}, True),
        ({"tags": {"$gt": "a"}}, False),  # ranges compare scalars only
        ({"missing": 1}, False),
        ({"missing": {"$ne": 1}}, True),  # a missing key matches $ne, $nin, $not, $exists: false
        ({"missing": {"$nin": [1]}}, True),
        ({"$not": {"missing": 1}}, True),
        ({"missing": {"$exists": False}}, True),
        ({"missing": {"$gt": 0}}, False),
        ({"topic.deeper": "x"}, False),  # a path through a non-object leads nowhere
        ({"session_id": "s1", "role": "user"}, True),  # the record's own fields
        ({"timestamp": {"$gte": "2023-11-14T22:13:20Z"}}, True),
        ({"timestamp": {"$lt": datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)}}, False),
        ({"$or": [{"n": 3}, {"topic": "travel"}]}, True),
        ({"$and": [{"n": 3}, {"topic": "travel"}]}, False),
    ],
)
def test_what_a_filter_means(spec: Any, expected: bool) -> None:
    assert passes(spec) is expected


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"$foo": 1}, "unknown operator '$foo'"),
        ({"n": {"$like": 1}}, "unknown operator '$like'"),
        ({"n": {"$in": 3}}, "$in takes a list"),
        ({"n": {"$gt": None}}, "$gt compares numbers or strings"),
        ({"n": {"$exists": 1}}, "$exists takes true or false"),
        ({"n": [1, 2]}, "use {'$in': [...]}"),
        ({"n": {"a": 1}}, "use dotted paths or operators"),
        ({"n": float("nan")}, "not a finite number"),
        ({"$and": []}, "non-empty list"),
        ({"a..b": 1}, "empty step"),
        ({"timestamp": "soon"}, "a timestamp is seconds"),
        ({"timestamp": datetime(2024, 1, 1)}, "no timezone"),
        ([{"n": 1}], "must be a non-empty object"),
    ],
)
def test_a_malformed_filter_is_refused_by_name(spec: Any, named: str) -> None:
    with pytest.raises(InvalidInputError, match="^filters") as refused:
        parse_filter(spec)
    assert named in str(refused.value)


def test_no_filter_passes_everything() -> None:
    assert parse_filter(None) is None and parse_filter({}) is None and matches(None, RECORD)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.sampled_from("ab")
)
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.sampled_from("xy"), scalars, max_size=2))
metadata = st.dictionaries(st.sampled_from(["k", "m", "x"]), values, max_size=3)
ops = st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"])


@settings(max_examples=300, deadline=None)
@given(metadata, st.sampled_from(["k", "m", "k.x", "missing"]), ops, scalars.filter(lambda v: v is not None))
def test_negations_and_missing_keys_keep_the_documented_laws(meta: dict, key: str, op: str, value: Any) -> None:
    record = make_record("x", metadata=meta)
    if op in ("$gt", "$gte", "$lt", "$lte") and isinstance(value, bool):
        return
    f = {key: {op: value}}
    assert matches(parse_filter({"$not": f}), record) is not matches(parse_filter(f), record)
    assert matches(parse_filter({key: {"$ne": value}}), record) is not matches(parse_filter({key: value}), record)
    assert matches(parse_filter({key: {"$nin": [value]}}), record) is not matches(
        parse_filter({key: {"$in": [value]}}), record
    )
    present = matches(parse_filter({key: {"$exists": True}}), record)
    if not present:  # a missing key passes only the negations
        assert not matches(parse_filter(f), record) or op == "$ne"


def test_an_erase_reads_a_filter_as_a_search_does(tmp_path: Any) -> None:
    """A filter mistake is named as a search names it, and a filter as deep as a search takes is taken
    (an erase wrapped it in ``$and`` first: its own path in the message, one level less allowed)."""
    from longterm import LongTermMemory
    from longterm.core.filters import MAX_DEPTH

    with LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}) as memory:
        memory.add_sync("keep me", user_id="u", metadata={"i": 1})
        wrong = {"i": {"$regex": "x"}}
        with pytest.raises(InvalidInputError) as searching:
            memory.search_sync("keep", user_id="u", filters=wrong)
        with pytest.raises(InvalidInputError) as erasing:
            memory.delete_all_sync(user_id="u", filters=wrong)
        assert str(erasing.value) == str(searching.value)
        deep: dict[str, Any] = {"i": 2}
        for _ in range(MAX_DEPTH):
            deep = {"$not": deep}  # an even count: "i is 2"
        assert memory.search_sync("keep", user_id="u", filters=deep) == []
        assert memory.delete_all_sync(user_id="u", filters=deep) == 0


def test_a_time_in_milliseconds_means_in_a_filter_what_it_means_in_an_erase() -> None:
    """``delete_all(before=1.7e12)`` reads milliseconds, as an event's time is read; a filter did not."""
    ms = RECORD.timestamp * 1000
    assert passes({"timestamp": {"$lt": ms + 1000}}) and not passes({"timestamp": {"$lt": ms - 1000}})
    assert passes({"timestamp": RECORD.timestamp})


def test_a_timestamp_past_any_float_is_refused_by_name() -> None:
    with pytest.raises(InvalidInputError, match="no time"):
        parse_filter({"timestamp": {"$gt": 10**400}})


def test_a_filter_too_deep_for_the_local_sql_is_the_callers_error_saying_what_to_do(tmp_path: Any) -> None:
    """SQLite's parser overflows on some filters the syntax takes (nested as each $and's last part):
    a BackendError said the store failed; it is the input, and the message says how to nest less."""
    from longterm import LongTermMemory

    spec: dict[str, Any] = {"k": 1}
    for i in range(20):
        spec = {("$or", "$and")[i % 2]: [{"k": {"$gt": 1}}, spec]}
    with LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}) as memory:
        memory.add_sync("a note", user_id="u", metadata={"k": 2})
        with pytest.raises(InvalidInputError, match="nest it less"):
            memory.count_sync(app_name="default_app", user_id="u", filters=spec)
