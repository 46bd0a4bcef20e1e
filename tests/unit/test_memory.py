"""The facade's own promises, on the local backend: exactly-once saves, clear errors,
sync wrappers, a loop that never blocks."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from longterm import (
    BackendUnavailableError,
    ConfigurationError,
    InvalidInputError,
    LongTermMemory,
    MemoryLedger,
    Scope,
)
from longterm.backends.local import LocalBackend
from tests.conftest import make_session

ROOT = Path(__file__).resolve().parents[2]


class FlakyBackend(LocalBackend):
    """The local backend, with an upsert that fails while ``down`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.down = False
        self.written: list[str] = []

    def _write(self, records, vectors):
        if self.down:
            raise ConnectionError("engine unreachable")
        self.written.extend(r.id for r in records)
        super()._write(records, vectors)

    def _commit(self, records, vectors, scope, session_id, event_ids, **kw):
        if self.down:
            raise ConnectionError("engine unreachable")
        self.written.extend(r.id for r in records)
        super()._commit(records, vectors, scope, session_id, event_ids, **kw)


async def test_failed_save_raises_keeps_ledger_and_retries_exactly_once(tmp_path: Path):
    backend = FlakyBackend(tmp_path / "m.db")
    memory = LongTermMemory(backend=backend)
    s = make_session(turns=[("user", f"fact {i}") for i in range(10)])
    await memory.add_session_to_memory(make_session("first", turns=[("user", "before the outage")]))
    backend.down = True
    with pytest.raises(
        BackendUnavailableError,
        match="cannot reach local at .* while saving memories: ConnectionError: engine unreachable",
    ):
        await memory.add_session_to_memory(s)
    assert await memory.event_ledger.saved(Scope(app_name="app", user_id="u1"), "s1") == set()
    s["events"].append({"id": "late", "author": "user", "content": {"role": "user", "parts": [{"text": "fact late"}]}})
    backend.down = False
    result = await memory.add_session_to_memory(s)
    assert result.saved == 11
    assert await memory.count(app_name="app", user_id="u1") == 12
    assert len(backend.written) == len(set(backend.written)) == 12
    assert (await memory.add_session_to_memory(s)).saved == 0
    await memory.close()


def _save_in_new_process(home: Path, session_file: Path) -> str:
    code = (
        "import json,sys; from longterm import LongTermMemory;"
        "m=LongTermMemory(); r=m.add_session_to_memory_sync(json.load(open(sys.argv[1])));"
        "print(r.saved, m.count_sync(app_name='app', user_id='u1')); m.close_sync()"
    )
    env = {**os.environ, "LONGTERM_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(session_file)], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_restart_saves_nothing_new(tmp_path: Path, _home: Path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(make_session(turns=[("user", f"fact {i}") for i in range(20)])))
    assert _save_in_new_process(_home, f) == "20 20"
    assert _save_in_new_process(_home, f) == "0 20"


async def test_sessions_as_adk_objects():
    from google.adk.events.event import Event
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.sessions.session import Session
    from google.genai import types

    events = [
        Event(
            author="user",
            invocation_id="i1",
            content=types.Content(role="user", parts=[types.Part(text="My dog is named Biscuit")]),
        ),
        Event(
            author="agent", invocation_id="i1", content=types.Content(role="model", parts=[types.Part(text="Cute!")])
        ),
        Event(
            author="user",
            invocation_id="i2",
            content=types.Content(
                role="user", parts=[types.Part(inline_data=types.Blob(mime_type="image/jpeg", data=b"\xff" * 300))]
            ),
        ),
    ]
    session = Session(id="adk1", app_name="app", user_id="u1", events=events)
    memory = LongTermMemory()
    assert (await memory.add_session_to_memory(session, auto_save_memory_policy="all")).saved == 3
    # each event is considered once: a later save under another policy adds nothing
    assert (await memory.add_session_to_memory(session)).new_events == 0
    default_only = LongTermMemory(backend_config={"index": "other"}, ledger=MemoryLedger())
    assert (await default_only.add_session_to_memory(session)).saved == 1
    await default_only.close()
    res = await memory.search_memory(app_name="app", user_id="u1", query="dog name")
    assert isinstance(res.memories[0], MemoryEntry)
    assert isinstance(res.memories[0].content, types.Content)
    assert res.memories[0].content.parts[0].text == "My dog is named Biscuit"
    media = await memory.search_memory(app_name="app", user_id="u1", query="jpeg")
    assert media.memories[0].custom_metadata["media"] == [{"mime_type": "image/jpeg", "size_bytes": 300}]
    await memory.close()


async def test_add_events_and_add_memory():
    memory = LongTermMemory()
    r = await memory.add_events_to_memory(
        app_name="app",
        user_id="u1",
        session_id="s9",
        custom_metadata={"ttl": "30d"},
        events=[
            {"id": "x1", "author": "user", "content": {"role": "user", "parts": [{"text": "I prefer window seats"}]}}
        ],
    )
    assert r.saved == 1
    again = await memory.add_events_to_memory(
        app_name="app",
        user_id="u1",
        session_id="s9",
        events=[
            {"id": "x1", "author": "user", "content": {"role": "user", "parts": [{"text": "I prefer window seats"}]}}
        ],
    )
    assert again.saved == 0
    await memory.add_memory(
        app_name="app",
        user_id="u1",
        memories=[{"content": {"role": "user", "parts": [{"text": "Allergic to shellfish"}]}}],
    )
    res = await memory.search_memory(app_name="app", user_id="u1", query="window seats")
    assert res.memories[0].custom_metadata["ttl"] == "30d"
    res = await memory.search_memory(app_name="app", user_id="u1", query="shellfish")
    assert res.memories[0].content.parts[0].text == "Allergic to shellfish"
    await memory.close()


async def test_what_a_user_erased_stays_erased_while_new_events_are_saved():
    memory = LongTermMemory()
    s = make_session(turns=[("user", "remember me")])
    await memory.add_session_to_memory(s)
    await memory.delete_memories(app_name="app", user_id="u1")
    assert (await memory.add_session_to_memory(s)).saved == 0  # the live session does not bring it back
    assert await memory.count(app_name="app", user_id="u1") == 0
    s["events"].append({"id": "new", "author": "user", "content": {"role": "user", "parts": [{"text": "a new thing"}]}})
    assert (await memory.add_session_to_memory(s)).saved == 1
    # bringing erased events back is explicit
    assert (await memory.add_session_to_memory(s, reconsider=True)).saved == 2
    assert await memory.count(app_name="app", user_id="u1") == 2
    await memory.close()


async def test_custom_ledger_is_used():
    ledger = MemoryLedger()
    memory = LongTermMemory(ledger=ledger)
    await memory.add_session_to_memory(make_session())
    assert await ledger.saved(Scope(app_name="app", user_id="u1"), "s1") == {"s1-e0", "s1-e1"}
    await memory.close()


@pytest.mark.parametrize(
    "session, message",
    [
        (None, "session is None"),
        ({"id": "s", "app_name": "a"}, "session.user_id must be a non-empty string"),
        ({"id": "", "app_name": "a", "user_id": "u"}, "session.id"),
        ({"id": "s", "app_name": "a", "user_id": "u", "events": "nope"}, "must be a list"),
        ({"id": "s", "app_name": "a", "user_id": "u", "events": [{"timestamp": "yesterday"}]}, "timestamp"),
        ({"id": "s", "app_name": "a" * 600, "user_id": "u"}, "limit is 512"),
    ],
)
async def test_bad_sessions_are_clear_errors(session, message):
    memory = LongTermMemory()
    with pytest.raises(InvalidInputError, match=message):
        await memory.add_session_to_memory(session)
    await memory.close()


@pytest.mark.parametrize("timestamp", [float("nan"), float("inf"), -float("inf"), 1e20, -1e300, "99999-01-01"])
async def test_a_timestamp_that_is_no_time_is_refused_before_anything_is_saved(timestamp):
    """Engines cannot index NaN or infinite times: such a memory would be saved and never
    found (Redis), or break every later search of the user. Refused with the event named."""
    memory = LongTermMemory()
    session = make_session(turns=[("user", "I keep bees"), ("user", "My car is blue")])
    session["events"][1]["timestamp"] = timestamp
    with pytest.raises(InvalidInputError, match=r"event 's1-e1' is malformed at 'timestamp'"):
        await memory.add_session_to_memory(session)
    assert await memory.count(app_name="app", user_id="u1") == 0
    session["events"][1]["timestamp"] = 1_700_000_000_000  # milliseconds are fine
    assert (await memory.add_session_to_memory(session)).saved == 2
    res = await memory.search_memory(app_name="app", user_id="u1", query="car")
    assert res.memories[0].timestamp.startswith("2023-11-14")
    await memory.close()


def test_records_refuse_times_no_engine_can_index():
    from pydantic import ValidationError

    from longterm.records import MemoryRecord

    for bad in (float("nan"), float("inf"), 1e15):
        with pytest.raises(ValidationError, match="timestamp"):
            MemoryRecord(id="x", app_name="a", user_id="u", session_id="s", event_id="e", text="t", timestamp=bad)


async def test_bad_search_arguments_are_clear_errors():
    memory = LongTermMemory()
    with pytest.raises(InvalidInputError, match="query must be a string"):
        await memory.search_memory(app_name="a", user_id="u", query=None)
    with pytest.raises(InvalidInputError, match="top_k must be an integer"):
        await memory.search_memory(app_name="a", user_id="u", query="x", top_k=0)
    with pytest.raises(InvalidInputError, match="user_id must be a non-empty string"):
        await memory.search_memory(app_name="a", user_id="", query="x")
    await memory.close()


def test_configuration_errors_say_what_to_do():
    with pytest.raises(ConfigurationError, match="unknown backend 'nosuch'; registered backends: local"):
        LongTermMemory(backend="nosuch")
    with pytest.raises(ConfigurationError, match="'pathh'.*Known keys:.*path, index"):
        LongTermMemory(backend_config={"pathh": "x"})
    with pytest.raises(ValueError, match="backend must be a registered name"):
        LongTermMemory(backend=object())


def test_index_defaults(tmp_path: Path):
    assert LongTermMemory().index == "default_app"
    assert LongTermMemory(app_name="shop").index == "shop"
    assert LongTermMemory(app_name="shop", index="x").backend_instance.index == "x"


def test_environment_selects_backend_and_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LONGTERM_BACKEND", "local")
    monkeypatch.setenv("LONGTERM_LOCAL_PATH", str(tmp_path / "env.db"))
    m = LongTermMemory()
    assert m.backend_instance.path == tmp_path / "env.db"


def test_store_directory_is_private(tmp_path: Path):
    m = LongTermMemory(backend_config={"path": str(tmp_path / "private" / "m.db")})
    m.add_session_to_memory_sync(make_session())
    assert (tmp_path / "private").stat().st_mode & 0o777 == 0o700
    m.close_sync()


async def test_sync_wrappers_work_inside_a_running_loop():
    m = LongTermMemory()
    assert m.add_session_to_memory_sync(make_session()).saved == 1  # called from async code
    assert m.search_memory_sync(app_name="app", user_id="u1", query="hiking").memories
    m.close_sync()


async def test_saving_does_not_block_the_event_loop():
    m = LongTermMemory()
    ticks = 0
    stop = False

    async def heartbeat():
        nonlocal ticks
        while not stop:
            ticks += 1
            await asyncio.sleep(0.001)

    hb = asyncio.create_task(heartbeat())
    await asyncio.sleep(0)
    start = time.perf_counter()
    for n in range(5):
        await m.add_session_to_memory(
            make_session(f"s{n}", turns=[("user", f"fact number {i} " * 30) for i in range(400)])
        )
    elapsed = time.perf_counter() - start
    stop = True
    await hb
    # a blocked loop would tick about once per save; a free one ticks all along
    assert ticks > 20, (ticks, elapsed)
    await m.close()


def test_works_without_google_adk(tmp_path: Path, _home: Path):
    code = (
        "import sys; sys.modules['google.adk']=None; sys.modules['google.adk.memory']=None\n"
        "import longterm; assert not longterm.HAVE_ADK\n"
        "m=longterm.LongTermMemory(); m.add_session_to_memory_sync({'id':'s','app_name':'a','user_id':'u',"
        "'events':[{'author':'user','content':{'role':'user','parts':[{'text':'offline memory works'}]}}]})\n"
        "r=m.search_memory_sync(app_name='a',user_id='u',query='offline'); print(r.memories[0].content.parts[0].text)"
    )
    env = {**os.environ, "LONGTERM_HOME": str(_home)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "offline memory works"


async def test_store_settings_cannot_change_once_open_and_others_are_validated():
    memory = LongTermMemory()
    with pytest.raises(ConfigurationError, match="backend cannot change once the memory is open"):
        memory.backend = "redis"
    with pytest.raises(ConfigurationError, match="index cannot change"):
        memory.index = "other"
    with pytest.raises(ConfigurationError, match="invalid value for LongTermMemory.top_k"):
        memory.top_k = 0
    assert memory.top_k == 5
    memory.top_k = 3  # a valid change applies
    for i in range(4):
        await memory.add_session_to_memory(make_session(f"s{i}", turns=[("user", f"tea number {i}")]))
    assert len((await memory.search_memory(app_name="app", user_id="u1", query="tea")).memories) == 3
    await memory.close()


async def test_a_memory_cannot_be_copied_so_closing_a_copy_never_closes_it():
    import copy

    memory = LongTermMemory()
    for attempt in (memory.model_copy, lambda: copy.copy(memory), lambda: copy.deepcopy(memory)):
        with pytest.raises(ConfigurationError, match="cannot be copied"):
            attempt()
    await memory.add_session_to_memory(make_session())
    assert await memory.count(app_name="app", user_id="u1") == 1
    await memory.close()
    await memory.close()  # a second close does nothing


async def test_adk_names_are_not_shadowed_by_a_star_import():
    import longterm

    assert not {"Session", "Event", "Content", "Part"} & set(longterm.__all__)
    for name in ("Rescoring", "AutoSaver", "MemoryTool"):
        assert name in longterm.__all__ and hasattr(longterm, name)
