"""Every row of the classification and preset tables in longterm.policies."""

from __future__ import annotations

import pytest

from longterm import ConfigurationError, MemoryAutoSavePolicy, MemoryEventType
from longterm.policies import classify, normalize_role, resolve_policy
from longterm.sessions import Event


def ev(parts=None, role=None, author="user", **kw) -> Event:
    content = None if parts is None else {"role": role, "parts": parts}
    return Event(id="e", author=author, content=content, **kw)


# -- role normalisation -------------------------------------------------------------------


@pytest.mark.parametrize(
    "parts, role, author, expected",
    [
        ([{"function_response": {"name": "f", "response": {}}}], "user", "user", "tool"),
        ([{"text": "x"}], "user", "agent", "user"),
        ([{"text": "x"}], "Human", "agent", "user"),
        ([{"text": "x"}], "model", "user", "model"),
        ([{"text": "x"}], "assistant", "user", "model"),
        ([{"text": "x"}], "ai", "user", "model"),
        ([{"text": "x"}], "agent", "user", "model"),
        ([{"text": "x"}], "bot", "user", "model"),
        ([{"text": "x"}], "tool", "user", "tool"),
        ([{"text": "x"}], "function", "user", "tool"),
        ([{"text": "x"}], "system", "user", "system"),
        ([{"text": "x"}], "developer", "user", "system"),
        ([{"text": "x"}], "Narrator", "user", "narrator"),
        ([{"text": "x"}], None, "user", "user"),
        ([{"text": "x"}], None, "system", "system"),
        ([{"text": "x"}], None, "my_agent", "model"),
        (None, None, "user", "user"),
    ],
)
def test_role_normalisation(parts, role, author, expected):
    assert normalize_role(ev(parts, role, author)) == expected


# -- part to unit -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "part, types, empty",
    [
        ({"text": "hmm", "thought": True}, ("thought",), False),
        ({"text": "hello"}, ("text",), False),
        ({"text": "  "}, ("text",), True),
        ({"function_call": {"name": "f", "args": {"a": 1}}}, ("function_call", "tool_call"), False),
        ({"function_response": {"name": "f", "response": {"r": 2}}}, ("function_response", "tool_response"), False),
        ({"inline_data": {"mime_type": "image/png", "data": b"\x89PNG" * 10}}, ("media",), False),
        ({"file_data": {"mime_type": "audio/mp3", "file_uri": "gs://b/x.mp3"}}, ("media",), False),
        ({"executable_code": {"code": "print(1)", "language": "PYTHON"}}, ("executable_code",), False),
        ({"code_execution_result": {"output": "1", "outcome": "OUTCOME_OK"}}, ("code_execution_result",), False),
    ],
)
def test_part_classification(part, types, empty):
    units = classify(ev([part], "model")).units
    assert len(units) == 1
    assert units[0].types == types
    assert units[0].empty is empty


def test_unknown_part_is_dropped():
    assert classify(ev([{"video_metadata": {"fps": 1}}, {"text": "x"}], "user")).units[0].types == ("text",)
    assert len(classify(ev([{"video_metadata": {"fps": 1}}, {"text": "x"}], "user")).units) == 1


ALL = MemoryAutoSavePolicy(preset="all")


def test_media_keeps_size_and_mime_never_bytes():
    data = b"\x00\x01" * 5000
    sel = ALL.select(ev([{"inline_data": {"mime_type": "image/png", "data": data}}], "user"))
    assert sel.media == [{"mime_type": "image/png", "size_bytes": 10000}]
    assert sel.parts == [{"text": "[media: image/png, 10000 bytes]"}]
    assert "\x00" not in repr(sel.parts)


def test_media_base64_size():
    sel = ALL.select(ev([{"inline_data": {"mime_type": "image/png", "data": "AAECAw=="}}], "user"))
    assert sel.media[0]["size_bytes"] == 4


def test_function_parts_render_as_searchable_text():
    u = classify(ev([{"function_call": {"name": "get_weather", "args": {"city": "Oslo"}}}], "model")).units[0]
    assert u.text == 'get_weather({"city": "Oslo"})'


@pytest.mark.parametrize(
    "kw, types, text",
    [
        ({"input_transcription": {"text": "hello by voice"}}, ("transcription",), "hello by voice"),
        ({"output_transcription": {"text": "spoken reply"}}, ("transcription",), "spoken reply"),
        ({"error_code": "500", "error_message": "boom"}, ("error",), "error 500: boom"),
        ({"error_message": "boom"}, ("error",), "error: boom"),
    ],
)
def test_event_level_units(kw, types, text):
    units = classify(ev(None, None, "user", **kw)).units
    assert [(u.types, u.text) for u in units] == [(types, text)]


def test_event_without_units_is_one_empty_text_unit():
    units = classify(ev(None)).units
    assert len(units) == 1 and units[0].empty and units[0].types == ("text",)


# -- presets ------------------------------------------------------------------------------

MIXED = [
    {"text": "I live in Oslo"},
    {"text": "secret reasoning", "thought": True},
    {"text": ""},
    {"function_call": {"name": "f", "args": {}}},
]


def test_default_saves_user_text_only():
    p = MemoryAutoSavePolicy()
    sel = p.select(ev(MIXED, "user"))
    assert sel.text == "I live in Oslo" and sel.event_types == ["text"]
    assert p.select(ev([{"text": "model says"}], "model", "agent")) is None
    assert p.select(ev([{"function_call": {"name": "f", "args": {}}}], "user")) is None
    assert p.select(ev([{"text": "  "}], "user")) is None
    assert p.select(ev([{"text": "deep", "thought": True}], "user")) is None


def test_all_saves_everything_including_thoughts_and_empty_text():
    p = MemoryAutoSavePolicy(preset="all")
    sel = p.select(ev(MIXED, "model", "agent"))
    assert sel.event_types == ["text", "thought", "function_call", "tool_call"]
    assert len(sel.parts) == 4
    assert p.select(ev(None, author="agent")) is not None
    assert p.select(ev([{"function_response": {"name": "f", "response": {}}}], "user")).role == "tool"


def test_no_policy_saves_a_call_or_result_of_the_librarys_memory_tools():
    """Under ``all`` a ``load_memory`` result was saved: a copy of the memories it found, which an
    erase of them left behind (and found again); a ``save_memory`` call is a second copy."""
    p = MemoryAutoSavePolicy(preset="all")
    recall = {"name": "load_memory", "response": {"memories": [{"text": "My door PIN is 9911"}]}}
    assert p.select(ev([{"function_response": recall}], "user")) is None
    assert p.select(ev([{"function_call": {"name": "save_memory", "args": {"text": "PIN 9911"}}}], "model")) is None
    call = {"function_call": {"name": "load_memory", "args": {"query": "PIN"}}}
    mixed = p.select(ev([{"text": "let me look"}, call]))
    assert mixed is not None and mixed.text == "let me look" and mixed.event_types == ["text"]
    assert p.select(ev([{"function_response": {"name": "weather", "response": {"t": 3}}}], "user")) is not None


def test_custom_has_no_role_restriction_keeps_text_and_drops_thoughts_and_empty_text():
    """VeADK: custom starts from the default policy object, roles and types unrestricted."""
    p = MemoryAutoSavePolicy(preset="custom")
    sel = p.select(ev(MIXED, "model", "agent"))
    assert sel.event_types == ["text"]
    assert p.select(ev([{"text": ""}], "model")) is None
    assert p.select(ev(None)) is None


def test_custom_with_roles_keeps_only_text_parts_as_veadk_does():
    """VeADK's test_custom_auto_save_memory_policy_filters_roles_and_non_text_parts."""
    p = resolve_policy({"preset": "custom", "include_roles": ["assistant"]})
    call = {"function_call": {"name": "lookup", "args": {"q": "weather"}}}
    sel = p.select(ev([{"text": "It is sunny"}, call], "model", "agent"))
    assert (sel.text, sel.event_types, sel.parts) == ("It is sunny", ["text"], [{"text": "It is sunny"}])
    assert p.select(ev([{"text": "user words"}], "user")) is None
    assert p.select(ev([call], "model", "agent")) is None


def test_include_event_types_names_what_is_kept_even_with_text_only():
    """VeADK: text_only applies only while include_event_types is not set."""
    p = MemoryAutoSavePolicy(preset="custom", include_event_types=["text", "function_call"])
    assert p.select(ev(MIXED, "model", "agent")).event_types == ["text", "function_call", "tool_call"]
    p2 = MemoryAutoSavePolicy(preset="default", include_roles=None, include_event_types=["function_call"])
    assert p2.select(ev(MIXED, "model", "agent")).event_types == ["function_call", "tool_call"]


def test_explicit_fields_override_the_preset_only_for_themselves():
    p = MemoryAutoSavePolicy(preset="default", include_roles=["user", "model"])
    assert p.select(ev([{"text": "model text"}], "model", "agent")).text == "model text"
    assert p.select(ev([{"text": "deep", "thought": True}], "model")) is None  # still default: no thoughts
    p2 = MemoryAutoSavePolicy(preset="all", include_thought=False)
    assert p2.select(ev([{"text": "deep", "thought": True}], "model")) is None
    assert p2.select(ev([{"text": ""}], "model")) is not None  # still all: empty text kept
    p3 = MemoryAutoSavePolicy(preset="default", include_roles=None)
    assert p3.select(ev([{"text": "any role"}], "model")) is not None


@pytest.mark.parametrize(
    "fields, role, author, kept",
    [
        ({"exclude_roles": ["model"]}, "model", "agent", False),
        ({"exclude_roles": ["model"]}, "user", "user", True),
        ({"include_roles": ["MODEL"]}, "assistant", "agent", True),
        ({"include_authors": ["planner"]}, "model", "planner", True),
        ({"include_authors": ["planner"]}, "model", "critic", False),
        ({"exclude_authors": ["critic"]}, "model", "critic", False),
        ({"exclude_authors": ["critic"]}, "model", "planner", True),
    ],
)
def test_role_and_author_filters(fields, role, author, kept):
    p = MemoryAutoSavePolicy(preset="custom", **fields)
    assert (p.select(ev([{"text": "t"}], role, author)) is not None) is kept


def test_veadk_example_policy_keeps_assistant_events():
    # VeADK's documented policy; its roles are user | assistant | system.
    p = MemoryAutoSavePolicy(
        preset="custom",
        include_roles=["user", "assistant"],
        include_event_types=["text", "function_call", "function_response"],
        include_thought=False,
    )
    assert p.select(ev([{"text": "Noted: no peanuts."}], "model", "ltm_agent")).text == "Noted: no peanuts."
    assert p.select(ev([{"text": "I am vegetarian"}], "user")) is not None
    assert p.select(ev([{"text": "be brief"}], "system")) is None


@pytest.mark.parametrize(
    "policy_role, event_role, author",
    [
        ("assistant", "model", "agent"),  # how users write it, how ADK stores it
        ("Assistant", None, "my_agent"),  # ADK events without a role are the model's
        ("ai", "assistant", "agent"),
        ("human", "user", "user"),
        ("function", "tool", "agent"),
        ("developer", "system", "system"),
        ("narrator", "Narrator", "agent"),  # a role outside the table: itself, lower-cased
    ],
)
def test_policies_read_role_names_through_the_events_alias_table(policy_role, event_role, author):
    event = ev([{"text": "t"}], event_role, author)
    assert MemoryAutoSavePolicy(preset="custom", include_roles=[policy_role]).select(event) is not None
    assert MemoryAutoSavePolicy(preset="custom", exclude_roles=[policy_role]).select(event) is None


def test_event_type_filters_work_on_parts():
    p = MemoryAutoSavePolicy(preset="custom", include_event_types=["tool_call"])
    sel = p.select(ev(MIXED, "model"))
    assert sel.event_types == ["function_call", "tool_call"]
    p = MemoryAutoSavePolicy(preset="custom", exclude_event_types=[MemoryEventType.FUNCTION_CALL])
    assert p.select(ev(MIXED, "model")).event_types == ["text"]
    p = MemoryAutoSavePolicy(preset="all", include_event_types=["error"])
    assert p.select(ev(None, error_message="x")).event_types == ["error"]
    assert p.select(ev([{"text": "hi"}], "user")) is None


def test_text_only_keeps_text_thought_and_transcription():
    p = MemoryAutoSavePolicy(preset="all", text_only=True)
    media = {"inline_data": {"mime_type": "a/b", "data": b"x"}}
    sel = p.select(ev([*MIXED, media], "model", input_transcription={"text": "voice"}))
    assert sel.event_types == ["text", "thought", "transcription"]


@pytest.mark.parametrize(
    "given",
    [None, "default", "ALL", {"preset": "custom", "include_roles": "model"}, MemoryAutoSavePolicy(preset="all")],
)
def test_policy_accepted_forms(given):
    assert isinstance(resolve_policy(given), MemoryAutoSavePolicy)


@pytest.mark.parametrize(
    "given, message",
    [
        ("everything", "unknown auto-save policy preset"),
        ({"preset": "nope"}, "preset"),
        ({"include_event_types": ["texts"]}, "unknown event type"),
        ({"include_rolez": ["user"]}, "include_rolez"),
        (42, "must be None, a preset name"),
    ],
)
def test_bad_policies_are_clear_errors(given, message):
    with pytest.raises(ConfigurationError, match=message):
        resolve_policy(given)
