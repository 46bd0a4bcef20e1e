"""ADK's own unit tests of its InMemoryMemoryService, pointed at LongTermMemory.

From google/adk-python tests/unittests/memory/test_in_memory_memory_service.py: the same
sessions and the same assertions. Where ADK's test looked into the service's private dict,
this one asks the store (``iter_records``, ``SaveResult``). The last two tests check the
rest of ADK's in-memory contract (``add_events_to_memory`` and ``delete_memory``, ADK 1.x
to 2.x): events are kept once per id, and a deleted memory is not brought back by a
later save of its session.

The policy is the one an ADK user picks to get ADK's behaviour: every role's text
(``ADK_POLICY``); our default keeps only the user's words.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.adk.events.event import Event
from google.adk.sessions.session import Session
from google.genai import types

from longterm import LongTermMemory, MemoryAutoSavePolicy

ADK_POLICY = MemoryAutoSavePolicy(preset="custom", text_only=True)

MOCK_APP_NAME = "test-app"
MOCK_USER_ID = "test-user"
MOCK_OTHER_USER_ID = "another-user"

MOCK_SESSION_1 = Session(
    app_name=MOCK_APP_NAME,
    user_id=MOCK_USER_ID,
    id="session-1",
    last_update_time=1000,
    events=[
        Event(
            id="event-1a",
            invocation_id="inv-1",
            author="user",
            timestamp=12345,
            content=types.Content(parts=[types.Part(text="The ADK is a great toolkit.")]),
        ),
        # Event with no content, should be ignored by the service
        Event(id="event-1b", invocation_id="inv-2", author="user", timestamp=12346),
        Event(
            id="event-1c",
            invocation_id="inv-3",
            author="model",
            timestamp=12347,
            content=types.Content(parts=[types.Part(text="I agree. The Agent Development Kit (ADK) rocks!")]),
        ),
    ],
)

MOCK_SESSION_2 = Session(
    app_name=MOCK_APP_NAME,
    user_id=MOCK_USER_ID,
    id="session-2",
    last_update_time=2000,
    events=[
        Event(
            id="event-2a",
            invocation_id="inv-4",
            author="user",
            timestamp=54321,
            content=types.Content(parts=[types.Part(text="I like to code in Python.")]),
        ),
    ],
)

MOCK_SESSION_DIFFERENT_USER = Session(
    app_name=MOCK_APP_NAME,
    user_id=MOCK_OTHER_USER_ID,
    id="session-3",
    last_update_time=3000,
    events=[
        Event(
            id="event-3a",
            invocation_id="inv-5",
            author="user",
            timestamp=60000,
            content=types.Content(parts=[types.Part(text="This is a secret.")]),
        ),
    ],
)

MOCK_SESSION_WITH_NO_EVENTS = Session(
    app_name=MOCK_APP_NAME,
    user_id=MOCK_USER_ID,
    id="session-4",
    last_update_time=4000,
)


@pytest.fixture
def memory_service(tmp_path: Path) -> LongTermMemory:
    return LongTermMemory(backend_config={"path": str(tmp_path / "m.db")}, auto_save_memory_policy=ADK_POLICY)


async def _records(service: LongTermMemory, session_id: str) -> list:
    records = [r async for r in service.iter_records(app_name=MOCK_APP_NAME, user_id=MOCK_USER_ID)]
    return sorted((r for r in records if r.session_id == session_id), key=lambda r: r.timestamp)


async def test_add_session_to_memory(memory_service: LongTermMemory):
    """Tests that a session with events is correctly added to memory."""
    await memory_service.add_session_to_memory(MOCK_SESSION_1)

    session_memory = await _records(memory_service, MOCK_SESSION_1.id)
    # Check that the event with no content was filtered out
    assert len(session_memory) == 2
    assert session_memory[0].event_id == "event-1a"
    assert session_memory[1].event_id == "event-1c"


async def test_add_session_with_no_events_to_memory(memory_service: LongTermMemory):
    """Tests that adding a session with no events does not cause an error."""
    result = await memory_service.add_session_to_memory(MOCK_SESSION_WITH_NO_EVENTS)

    assert (result.session_id, result.new_events, result.saved) == (MOCK_SESSION_WITH_NO_EVENTS.id, 0, 0)
    assert not await _records(memory_service, MOCK_SESSION_WITH_NO_EVENTS.id)


async def test_search_memory_simple_match(memory_service: LongTermMemory):
    """Tests a simple keyword search that should find a match."""
    await memory_service.add_session_to_memory(MOCK_SESSION_1)
    await memory_service.add_session_to_memory(MOCK_SESSION_2)

    result = await memory_service.search_memory(app_name=MOCK_APP_NAME, user_id=MOCK_USER_ID, query="Python")

    assert len(result.memories) == 1
    assert result.memories[0].content.parts[0].text == "I like to code in Python."
    assert result.memories[0].author == "user"


async def test_search_memory_case_insensitive_match(memory_service: LongTermMemory):
    """Tests that search is case-insensitive."""
    await memory_service.add_session_to_memory(MOCK_SESSION_1)

    result = await memory_service.search_memory(app_name=MOCK_APP_NAME, user_id=MOCK_USER_ID, query="development")

    assert len(result.memories) == 1
    assert result.memories[0].content.parts[0].text == "I agree. The Agent Development Kit (ADK) rocks!"


async def test_search_memory_multiple_matches(memory_service: LongTermMemory):
    """Tests that a query can match multiple events."""
    await memory_service.add_session_to_memory(MOCK_SESSION_1)

    result = await memory_service.search_memory(app_name=MOCK_APP_NAME, user_id=MOCK_USER_ID, query="How about ADK?")

    assert len(result.memories) == 2
    texts = {memory.content.parts[0].text for memory in result.memories}
    assert "The ADK is a great toolkit." in texts
    assert "I agree. The Agent Development Kit (ADK) rocks!" in texts


async def test_search_memory_no_match(memory_service: LongTermMemory):
    """Tests a search query that should not match any memories."""
    await memory_service.add_session_to_memory(MOCK_SESSION_1)

    result = await memory_service.search_memory(app_name=MOCK_APP_NAME, user_id=MOCK_USER_ID, query="nonexistent")

    assert not result.memories


async def test_search_memory_is_scoped_by_user(memory_service: LongTermMemory):
    """Tests that search results are correctly scoped to the user_id."""
    await memory_service.add_session_to_memory(MOCK_SESSION_1)
    await memory_service.add_session_to_memory(MOCK_SESSION_DIFFERENT_USER)

    # Search for "secret", which only exists for MOCK_OTHER_USER_ID, but search as MOCK_USER_ID.
    result = await memory_service.search_memory(app_name=MOCK_APP_NAME, user_id=MOCK_USER_ID, query="secret")

    # No results should be returned for MOCK_USER_ID
    assert not result.memories

    # The result should be found when searching as the correct user
    result_other_user = await memory_service.search_memory(
        app_name=MOCK_APP_NAME, user_id=MOCK_OTHER_USER_ID, query="secret"
    )
    assert len(result_other_user.memories) == 1
    assert result_other_user.memories[0].content.parts[0].text == "This is a secret."


async def test_add_events_to_memory_keeps_each_event_once(memory_service: LongTermMemory):
    """ADK's add_events_to_memory: a delta of events, each kept once per id."""
    events = MOCK_SESSION_1.events
    for _ in range(2):
        await memory_service.add_events_to_memory(
            app_name=MOCK_APP_NAME, user_id=MOCK_USER_ID, events=events, session_id="session-1"
        )
    assert [r.event_id for r in await _records(memory_service, "session-1")] == ["event-1a", "event-1c"]


async def test_a_deleted_memory_is_not_brought_back_by_its_session(memory_service: LongTermMemory):
    """ADK's delete_memory(memory_id=): the memory is gone, and re-adding its session does not re-ingest it."""
    await memory_service.add_session_to_memory(MOCK_SESSION_2)
    found = await memory_service.search_memory(app_name=MOCK_APP_NAME, user_id=MOCK_USER_ID, query="Python")

    await memory_service.delete_memory(app_name=MOCK_APP_NAME, user_id=MOCK_USER_ID, memory_id=found.memories[0].id)
    await memory_service.add_session_to_memory(MOCK_SESSION_2)

    result = await memory_service.search_memory(app_name=MOCK_APP_NAME, user_id=MOCK_USER_ID, query="Python")
    assert not result.memories
