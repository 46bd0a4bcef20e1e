"""Input that used to fail on one engine and pass on another, or never save at all, now saves
the same everywhere (each test failed before its fix)."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from longterm import ConfigurationError, LongTermMemory


def memory(tmp_path: Path) -> LongTermMemory:
    return LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})


def session(**event: object) -> dict:
    base = {"id": "e1", "author": "user", "content": {"role": "user", "parts": [{"text": "my passport number"}]}}
    return {"id": "s1", "app_name": "app", "user_id": "u", "events": [{**base, **event}]}


async def test_metadata_of_any_python_value_is_stored_as_plain_json(tmp_path: Path):
    m = memory(tmp_path)
    when = datetime(2026, 5, 3, tzinfo=timezone.utc)
    meta = {"when": when, "id": uuid.UUID(int=1), "price": Decimal("1.5"), "tags": {"a"}, "raw": b"\xff"}
    assert (await m.add_session_to_memory(session(custom_metadata=meta))).saved == 1
    [hit] = (await m.search_memory(app_name="app", user_id="u", query="passport")).memories
    stored = hit.custom_metadata["event_metadata"]
    assert stored["when"] == when.isoformat().replace("+00:00", "Z") and stored["tags"] == ["a"]
    assert stored["id"] == str(uuid.UUID(int=1)) and stored["raw"] == "_w=="  # URL-safe base64
    await m.close()


async def test_a_lone_surrogate_in_a_transcription_or_an_error_message_is_repaired(tmp_path: Path):
    m = memory(tmp_path)
    s = session(content=None, input_transcription={"text": "my passport \ud83c number"}, error_message="bad \udc00")
    assert (await m.add_session_to_memory(s, auto_save_memory_policy="all")).saved == 1
    [hit] = (await m.search_memory(app_name="app", user_id="u", query="passport")).memories
    assert "\ufffd" in hit.content.parts[0].text
    await m.close()


async def test_every_part_a_save_makes_of_the_callers_text_is_repaired(tmp_path: Path):
    # The labels classification writes (media, errors, transcriptions) are stored as they are
    # made: each must be repaired where it is made, or the store refuses the record.
    m = memory(tmp_path)
    media = {"inline_data": {"mime_type": "image/png", "data": "aGk=", "display_name": "passport \udc00.png"}}
    s = session(
        content={"role": "user", "parts": [{"text": "my passport"}, media]},
        input_transcription={"text": "passport \ud83c scan"},
        error_code="E\udc01",
        error_message="bad \udc00",
    )
    assert (await m.add_session_to_memory(s, auto_save_memory_policy="all")).saved == 1
    [hit] = (await m.search_memory(app_name="app", user_id="u", query="passport")).memories
    texts = [p.text for p in hit.content.parts]
    assert len(texts) == 4 and all("\ufffd" in t for t in texts[1:]), texts
    await m.close()


@pytest.mark.parametrize("policy", [{"include_roles": 5}, {"exclude_event_types": True}, {"include_event_types": 3}])
def test_a_policy_field_that_is_not_a_list_is_a_configuration_error(tmp_path: Path, policy: dict):
    with pytest.raises(ConfigurationError, match="must be a list of names"):
        LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, auto_save_memory_policy=policy)
