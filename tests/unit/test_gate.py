"""The input gate (longterm/sessions): ids checked, text repaired, times read the same on every Python."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from longterm import LongTermMemory, sessions
from longterm.errors import InvalidInputError
from longterm.sessions import timestamps
from tests.conftest import make_session

MAY_1_10H = 1714557600.0  # 2024-05-01T10:00:00Z


def _event(text: str, **extra) -> dict:
    return {"author": "user", "content": {"role": "user", "parts": [{"text": text}]}, **extra}


async def test_an_event_without_id_holding_a_lone_surrogate_is_saved_under_the_id_of_its_repaired_text():
    """A client that cut an emoji in half sends a lone surrogate; the text is stored repaired
    (U+FFFD), and the id derived for the event is derived from that same repaired event."""
    memory = LongTermMemory()
    cut = {"id": "s", "app_name": "app", "user_id": "u1", "events": [_event("I packed the sunscreen \ud83d")]}
    repaired = {**cut, "events": [_event("I packed the sunscreen \ufffd")]}
    assert sessions.read_session(cut).event_ids == sessions.read_session(repaired).event_ids
    assert (await memory.add_session_to_memory(cut)).saved == 1
    res = await memory.search_memory(app_name="app", user_id="u1", query="sunscreen")
    assert [p.text for p in res.memories[0].content.parts] == ["I packed the sunscreen \ufffd"]
    assert (await memory.add_session_to_memory(cut)).saved == 0  # the same id again: nothing new
    await memory.close()


async def test_an_event_without_id_holding_media_bytes_that_are_not_utf8_is_saved():
    memory = LongTermMemory()
    photo = {"inline_data": {"mime_type": "image/png", "data": b"\x89PNG\r\n\x1a\n\xff\x00"}}
    event = {"author": "user", "content": {"role": "user", "parts": [{"text": "a photo of my cat"}, photo]}}
    result = await memory.add_events_to_memory(app_name="app", user_id="u1", session_id="s", events=[event])
    assert result.saved == 1
    await memory.close()


def test_ids_derived_for_valid_text_are_the_ones_earlier_versions_derived():
    """Re-importing a transcript imported before must derive the same ids (and write nothing)."""
    events = [
        {
            "author": "user",
            "timestamp": "2024-05-01T10:00:00Z",
            "content": {"role": "user", "parts": [{"text": "I keep bees 🐝"}]},
        },
        {"author": "user", "content": "I keep bees 🐝"},
        {"author": "user", "content": "I keep bees 🐝"},
    ]
    assert sessions.event_ids(events) == [
        "derived-a2476bdf7038e499cc196124",
        "derived-71edf3319df362717edc51ae",
        "derived-71edf3319df362717edc51ae-1",
    ]


BAD_IDS = [("a\x00b", "NUL"), ("x" * 513, "limit is 512"), ("s\ud800", "not valid Unicode")]


@pytest.mark.parametrize("bad, reason", BAD_IDS)
async def test_a_session_id_no_engine_can_key_on_is_refused_naming_the_field(bad: str, reason: str):
    memory = LongTermMemory()
    with pytest.raises(InvalidInputError, match=rf"session\.id .*{reason}"):
        await memory.add_session_to_memory(make_session(sid=bad))
    await memory.close()


@pytest.mark.parametrize("bad, reason", BAD_IDS)
async def test_an_event_id_no_engine_can_key_on_is_refused_naming_the_field(bad: str, reason: str):
    memory = LongTermMemory()
    session = make_session()
    session["events"][1]["id"] = bad
    with pytest.raises(InvalidInputError, match=rf"event id .*{reason}"):
        await memory.add_session_to_memory(session)
    with pytest.raises(InvalidInputError, match=rf"event id .*{reason}"):
        await memory.add_events_to_memory(app_name="app", user_id="u1", session_id="s", events=session["events"])
    assert await memory.count(app_name="app", user_id="u1") == 0
    await memory.close()


# ISO 8601 forms Python 3.11+ reads and Python 3.10's datetime.fromisoformat refuses, and
# the seconds they mean. One of them used to fail the whole session on Python 3.10 only.
FORMS_310_REFUSES = [
    ("2024-05-01T10:00:00.5Z", MAY_1_10H + 0.5),
    ("2024-05-01T10:00:00.1234Z", MAY_1_10H + 0.1234),
    ("2024-05-01T10:00:00.123456789Z", MAY_1_10H + 0.123456789),
    ("20240501T100000Z", MAY_1_10H),
    ("20240501T100000.25+0200", MAY_1_10H - 7200 + 0.25),
    ("2024-05-01T12:00:00+0200", MAY_1_10H),
    ("2024-05-01T10:00:00,5z", MAY_1_10H + 0.5),
    ("20240501", MAY_1_10H - 36000),
    ("2024-W18-3T10:00Z", MAY_1_10H),
]

# What datetime.fromisoformat reads on Python 3.10 (after the old "Z" -> "+00:00"): extended
# date, then HH[:MM[:SS[.fff[fff]]]] and an offset +HH:MM[:SS[.ffffff]].
_PY310_ISO = re.compile(
    r"\d{4}-\d\d-\d\d(.\d\d(:\d\d(:\d\d(\.\d{3}(\d{3})?)?)?)?([+-]\d\d:\d\d(:\d\d(\.\d{6})?)?)?)?", re.ASCII
)


class _Py310Datetime(datetime):
    @classmethod
    def fromisoformat(cls, date_string: str) -> datetime:
        if not _PY310_ISO.fullmatch(date_string):
            raise ValueError(f"Invalid isoformat string: {date_string!r}")
        return datetime.fromisoformat(date_string)


@pytest.mark.parametrize("text, seconds", FORMS_310_REFUSES)
def test_timestamps_python_3_10_cannot_read_are_read_the_same_as_on_3_11(monkeypatch, text: str, seconds: float):
    monkeypatch.setattr(timestamps, "datetime", _Py310Datetime)  # what the gate sees on Python 3.10
    event = sessions.to_event({"id": "e1", "timestamp": text, **_event("hello")})
    assert event.timestamp == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize(
    "value, seconds",
    [
        *FORMS_310_REFUSES,
        ("2024-05-01T10:00:00Z", MAY_1_10H),
        ("2024-05-01T10:00:00", MAY_1_10H),  # no offset: UTC
        ("2024-05-01 10:00", MAY_1_10H),
        ("2024-05-01T10", MAY_1_10H),
        ("2024-05-01T05:00-05:00", MAY_1_10H),
        ("2024-05-01T15:30+05:30", MAY_1_10H),
        ("2024-05-01", MAY_1_10H - 36000),
        ("  2024-05-01T10:00:00Z\n", MAY_1_10H),
        ("1714557600", MAY_1_10H),
        ("1714557600500", MAY_1_10H + 0.5),  # above 1e11: milliseconds
        (1714557600, MAY_1_10H),
        (1714557600500, MAY_1_10H + 0.5),
        (None, 0.0),
        ("", 0.0),
    ],
)
def test_one_timestamp_parser_reads_every_form(value, seconds: float):
    assert sessions.parse_timestamp(value) == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "2024-02-30",
        "2024-05-01T24:00",
        "2024-05-01T10:60",
        "2024-05-01T10:00+24:00",
        "٢٠٢٤-05-01",
        "0000-01-01",
    ],
)
def test_what_is_no_time_is_refused_with_the_value_named(value: str):
    with pytest.raises(InvalidInputError, match=re.escape(repr(value))):
        sessions.parse_timestamp(value)


async def test_add_reads_a_message_one_way_and_refuses_what_it_does_not_understand(tmp_path):
    """A message without a role was saved as the model's (``import`` reads it as the user's), an
    unknown or misspelt role as the model's, an empty message as an empty memory, and a session
    given to ``add()`` got "no field of a known shape"."""
    memory = LongTermMemory(app_name="app", backend_config={"path": str(tmp_path / "m.db")})
    await memory.add([{"content": "I am vegan"}, {"role": "Human", "content": "I keep bees"}], user_id="u")
    assert {(m.text, m.role, m.author) for m in (await memory.get_all(user_id="u")).memories} == {
        ("I am vegan", "user", "user"),
        ("I keep bees", "user", "user"),
    }
    refused = {
        r"events\[0\].role is 'humam', not a role": [{"role": "humam", "content": "x"}],
        r"events\[0\].role is a int": [{"role": 3, "content": "x"}],
        r"events\[1\] has no text": ["fine", {"role": "user", "content": "  "}],
        r"events\[0\] has no text": [{"role": "user", "content": {"parts": []}}],
        "is a session .*: save it with add_session_to_memory": {"messages": [{"role": "user", "content": "x"}]},
    }
    for message, given in refused.items():
        with pytest.raises(InvalidInputError, match=message):
            await memory.add(given, user_id="u")
    assert len((await memory.get_all(user_id="u")).memories) == 2  # nothing of them was saved
    await memory.close()
