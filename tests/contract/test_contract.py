"""The backend contract: what "a backend works" means. Parametrized over every backend
in tests/services.PROVIDERS; a new backend passes it unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from longterm import InvalidInputError, LongTermMemory, MemoryRecord, Scope, record_id
from longterm.core import registry
from tests.conftest import make_session
from tests.contract._writer import REFUSED
from tests.services import PROVIDERS

ROOT = Path(__file__).resolve().parents[2]

HOSTILE_IDS = [
    "a}|@user_id:{b",
    'x" | "',
    "*",
    "%",
    "user 1",
    "a@b.com",
    "Alice",
    "中文用户",
    "' OR 1=1 --",
    "\\",
    "{}",
    "-1",
    "line\nbreak",
    "a:b/c?d=e&f",
]

HOSTILE_QUERIES = [
    "",
    "   ",
    '"',
    "*",
    "NEAR(",
    "AND",
    "OR NOT",
    ":",
    "-",
    "secret*",
    '"secret',
    "@user_id:{*}",
    ") | (@app_name:{*}",
    "' OR '1'='1",
    "*:*",
    "user_id:victim",
    "$where",
    "\x00secret",
    "secret\\",
    "%secret%",
    "secret AND (",
]


async def _texts(memory: LongTermMemory, app: str, user: str, query: str, k: int = 10) -> list[str]:
    res = await memory.search_memory(app_name=app, user_id=user, query=query, top_k=k)
    return [" ".join(p.text for p in m.content.parts if p.text) for m in res.memories]


def test_every_registered_backend_has_a_test_engine():
    missing = set(registry.BUILTINS) - {p.name for p in PROVIDERS.values()}
    assert not missing, f"backends without a test engine: {missing}"


async def test_round_trip(memory: LongTermMemory):
    s = make_session(turns=[("user", "My favourite colour is teal"), ("model", "Teal is nice")])
    result = await memory.add_session_to_memory(s)
    assert (result.new_events, result.saved) == (2, 1)
    res = await memory.search_memory(app_name="app", user_id="u1", query="what is my favourite colour?")
    assert len(res.memories) == 1
    m = res.memories[0]
    assert m.content.role == "user"
    assert m.content.parts[0].text == "My favourite colour is teal"
    assert m.author == "user"
    assert m.id == record_id("app", "u1", "s1", "s1-e0")
    assert datetime.fromisoformat(m.timestamp).timestamp() == pytest.approx(1_700_000_000.0)
    assert m.custom_metadata["session_id"] == "s1"
    assert m.custom_metadata["event_id"] == "s1-e0"
    assert m.custom_metadata["score"] > 0


async def test_best_match_first_and_top_k(memory: LongTermMemory):
    turns = [("user", f"note number {i} about gardening") for i in range(8)]
    turns.append(("user", "I keep bees and harvest honey from the bees every summer"))
    await memory.add_session_to_memory(make_session(turns=turns))
    texts = await _texts(memory, "app", "u1", "bees honey", k=3)
    assert texts[0].startswith("I keep bees")
    assert len(await _texts(memory, "app", "u1", "gardening", k=3)) == 3


async def test_upsert_is_idempotent_by_id(memory: LongTermMemory):
    scope = Scope(app_name="app", user_id="u1")
    rec = MemoryRecord(
        id=record_id("app", "u1", "s", "e"), app_name="app", user_id="u1", session_id="s", event_id="e",
        author="user", role="user", text="the quick brown fox", content={"role": "user", "parts": [{"text": "the quick brown fox"}]},
        timestamp=1.0,
    )  # fmt: skip
    backend = memory.backend_instance
    await backend.upsert([rec])
    await backend.upsert([rec])
    await backend.upsert([rec, rec])
    assert await backend.count(scope) == 1
    changed = rec.model_copy(update={"text": "a lazy dog", "content": {"role": "user", "parts": [{"text": "a lazy dog"}]}})
    await backend.upsert([changed])
    assert await backend.count(scope) == 1
    assert await _texts(memory, "app", "u1", "lazy dog") == ["a lazy dog"]
    assert "the quick brown fox" not in await _texts(memory, "app", "u1", "quick fox")


async def test_saving_again_writes_nothing_new(memory: LongTermMemory):
    s = make_session(turns=[("user", f"fact {i} about tea") for i in range(5)])
    assert (await memory.add_session_to_memory(s)).saved == 5
    again = await memory.add_session_to_memory(s)
    assert (again.new_events, again.saved) == (0, 0)
    s["events"].append({"id": "late", "author": "user", "content": {"role": "user", "parts": [{"text": "one more about tea"}]}})
    assert (await memory.add_session_to_memory(s)).saved == 1
    assert await memory.count(app_name="app", user_id="u1") == 6


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
async def test_isolation_under_hostile_ids(memory: LongTermMemory, hostile: str):
    await memory.add_session_to_memory(make_session("v", app="app", user="victim", turns=[("user", "victim secret password swordfish")]))
    await memory.add_session_to_memory(make_session("o", app="other", user=hostile, turns=[("user", "other app secret swordfish")]))
    await memory.add_session_to_memory(make_session("h", app="app", user=hostile, turns=[("user", "hostile own secret note")]))
    for query in ["secret swordfish", "secret", hostile, "*"]:
        texts = await _texts(memory, "app", hostile, query)
        assert all("victim" not in t and "other app" not in t for t in texts), (query, texts)
    assert await _texts(memory, "app", hostile, "secret") == ["hostile own secret note"]
    assert await _texts(memory, "other", hostile, "secret") == ["other app secret swordfish"]
    assert await memory.count(app_name="app", user_id=hostile) == 1
    assert [r.text async for r in memory.iter_records(app_name="app", user_id=hostile)] == ["hostile own secret note"]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
async def test_any_query_text_is_valid_and_stays_in_scope(memory: LongTermMemory, query: str):
    await memory.add_session_to_memory(make_session("v", user="victim", turns=[("user", "victim secret")]))
    await memory.add_session_to_memory(make_session("m", user="me", turns=[("user", "my own secret")]))
    texts = await _texts(memory, "app", "me", query)
    assert "victim secret" not in texts
    assert set(texts) <= {"my own secret"}


async def test_empty_query_returns_nothing(memory: LongTermMemory):
    await memory.add_session_to_memory(make_session())
    assert await _texts(memory, "app", "u1", "") == []


async def test_erase_and_delete_one(memory: LongTermMemory):
    await memory.add_session_to_memory(make_session(user="u1", turns=[("user", "alpha fact"), ("user", "beta fact")]))
    await memory.add_session_to_memory(make_session(user="u2", turns=[("user", "alpha fact of u2")]))
    res = await memory.search_memory(app_name="app", user_id="u1", query="beta")
    assert await memory.delete_memory(app_name="app", user_id="u1", memory_id=res.memories[0].id) == 1
    assert await _texts(memory, "app", "u1", "fact") == ["alpha fact"]
    # an id of another user's memory deletes nothing
    other = (await memory.search_memory(app_name="app", user_id="u2", query="alpha")).memories[0].id
    assert await memory.delete_memory(app_name="app", user_id="u1", memory_id=other) == 0
    assert await memory.delete_memory(app_name="app", user_id="u1") == 1
    assert await memory.count(app_name="app", user_id="u1") == 0
    assert await _texts(memory, "app", "u1", "alpha") == []
    assert await _texts(memory, "app", "u2", "alpha") == ["alpha fact of u2"]


@pytest.mark.parametrize("memory_id", ["*", "%", "", " ", "' OR '1'='1", "../", "{}", "a}|@scope:{*", "\\", "中文"])
async def test_a_hostile_memory_id_deletes_nothing(memory: LongTermMemory, memory_id: str):
    await memory.add_session_to_memory(make_session(user="u1", turns=[("user", "alpha fact"), ("user", "beta fact")]))
    try:
        n = await memory.delete_memory(app_name="app", user_id="u1", memory_id=memory_id)
    except InvalidInputError:
        n = 0
    assert n == 0
    assert await memory.count(app_name="app", user_id="u1") == 2


async def test_data_survives_reopen(open_memory):
    first = open_memory()
    await first.add_session_to_memory(make_session(turns=[("user", "I was born in Porto")]))
    await first.close()
    second = open_memory()
    try:
        assert await _texts(second, "app", "u1", "born") == ["I was born in Porto"]
        again = await second.add_session_to_memory(make_session(turns=[("user", "I was born in Porto")]))
        assert again.saved == 0
        assert await second.count(app_name="app", user_id="u1") == 1
    finally:
        await second.close()


@pytest.mark.parametrize(
    "text, query",
    [
        ("我今天在北京吃了烤鸭，味道很好", "北京"),
        ("我今天在北京吃了烤鸭，味道很好", "烤鸭"),
        ("昨日は東京で寿司を食べました", "東京"),
        ("저는 서울에서 한국어를 공부합니다", "한국어"),
        ("Ich wohne in München und trinke gern Kaffee", "münchen"),
        ("J'adore le café crème", "cafe"),
        ("Weekend plans 🎉 with Zoë", "zoë"),
    ],
)
async def test_unicode_and_cjk_are_searchable(memory: LongTermMemory, text: str, query: str):
    await memory.add_session_to_memory(make_session(turns=[("user", text), ("user", "unrelated filler sentence")]))
    assert (await _texts(memory, "app", "u1", query))[:1] == [text]


async def test_text_cut_inside_an_emoji_is_repaired_and_ids_that_are_no_unicode_refused(memory: LongTermMemory):
    """Lone UTF-16 surrogates (an emoji sliced by a JavaScript client) cannot be stored by
    any engine: in text, author, tool arguments and metadata they become U+FFFD and the
    memory is saved and found; in an id they are refused with a clear error."""
    s = make_session(turns=[("user", "Pack the sunscreen \ud83d"), ("user", "unrelated filler sentence")])
    s["events"][0]["author"] = "user\udc00"
    s["events"][0]["custom_metadata"] = {"note\ud800": ["x\ud800"]}
    s["events"].append({"id": "s1-call", "author": "agent", "content": {"role": "model", "parts": [
        {"function_call": {"name": "pack", "args": {"item": "sunscreen \ud83d"}}}]}})  # fmt: skip
    await memory.add_session_to_memory(s, auto_save_memory_policy="all")
    res = await memory.search_memory(app_name="app", user_id="u1", query="sunscreen")
    texts = [" ".join(p.text or "" for p in m.content.parts) for m in res.memories]
    assert "Pack the sunscreen \ufffd" in texts
    hit = res.memories[texts.index("Pack the sunscreen \ufffd")]
    assert hit.author == "user\ufffd"
    assert any(m.content.parts[0].function_call is not None for m in res.memories)
    for bad in (make_session("s\ud800"), {**make_session("s2"), "user_id": "u\udc00"}):
        with pytest.raises(InvalidInputError, match="not valid Unicode"):
            await memory.add_session_to_memory(bad)
    bad_event = make_session("s3")
    bad_event["events"][0]["id"] = "e\ud800"
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        await memory.add_session_to_memory(bad_event)
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        await memory.search_memory(app_name="app", user_id="u1\ud800", query="sunscreen")


async def test_a_pasted_page_as_query_is_answered_in_scope(memory: LongTermMemory):
    """Thousands of distinct words, or one huge token, are a valid query on every engine
    (OpenSearch alone refuses more than 1,024 clauses), and stay in scope."""
    await memory.add_session_to_memory(make_session(user="victim", turns=[("user", "victim keeps bees too")]))
    await memory.add_session_to_memory(make_session(turns=[("user", "I keep bees in the garden"), ("user", "filler words here")]))
    many = " ".join(f"w{i}x" for i in range(3000))
    for query in ["bees " + many, "bees " + "z" * 100_000, "bees " + "蜂" * 20_000, "bees " * 3000, many + " bees"]:
        texts = await _texts(memory, "app", "u1", query)
        assert set(texts) <= {"I keep bees in the garden", "filler words here"}, query[:40]
        assert texts or query.startswith("w0x"), query[:40]  # past the first 256 terms, bees may not count


async def test_one_megabyte_event_is_stored_whole_or_refused(memory: LongTermMemory):
    big = ("lorem ipsum dolor sit amet " * 40_000)[:1_000_000] + " zanzibar"
    s = make_session(turns=[("user", big)])
    try:
        await memory.add_session_to_memory(s)
    except InvalidInputError as exc:
        assert "bytes" in str(exc)
        assert await memory.count(app_name="app", user_id="u1") == 0
        return
    stored = [r async for r in memory.iter_records(app_name="app", user_id="u1")]
    assert len(stored) == 1 and stored[0].text == big
    res = await memory.search_memory(app_name="app", user_id="u1", query="zanzibar")
    assert res.memories and res.memories[0].content.parts[0].text == big


def test_two_processes_saving_the_same_session(backend_name: str, backend_config: dict, tmp_path: Path):
    turns = [("user" if i % 2 == 0 else "model", f"event {i} about topic {i % 7}") for i in range(400)]
    session = make_session("shared", turns=turns)
    path = tmp_path / "session.json"
    path.write_text(json.dumps(session))
    cmd = [sys.executable, "-m", "tests.contract._writer", backend_name, json.dumps(backend_config), str(path), "3"]
    procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        # A store that allows one process at a time (embedded engines) must refuse the
        # second one clearly; every other outcome but success is a failure.
        assert p.returncode in (0, REFUSED), err
        if p.returncode == REFUSED:
            assert "another process" in out, out
        outcomes.append(p.returncode)
    assert 0 in outcomes
    memory = LongTermMemory(backend=backend_name, backend_config=backend_config)
    try:
        assert memory.count_sync(app_name="app", user_id="u1") == 200
    finally:
        memory.close_sync()
