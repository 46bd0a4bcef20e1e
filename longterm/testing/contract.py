"""The backend contract as a kit: what "a backend works" means, for any backend.

The seam: subclass ``ContractSuite`` in a test module and give it two fixtures, the name
the backend is registered under and a ``backend_config`` for a fresh, empty store::

    import pytest
    from longterm.testing.contract import ContractSuite

    class TestMyBackend(ContractSuite):
        @pytest.fixture
        def backend_name(self):
            return "mine"  # an entry point in ``longterm.backends``, or core.registry.register

        @pytest.fixture
        def backend_config(self, tmp_path):
            return {"url": "http://127.0.0.1:9200", "prefix": tmp_path.name}

Optional: the fixture ``home_config`` (a config that leaves the store's location to
``LONGTERM_HOME``, for a backend with such a default; default None: it has none), and the
class attribute ``processes = False`` for a store that lives in one process's memory (its
two-writers test then runs the writers as two memories in two threads).

Every test opens the store as a user does, by name and config, and several times where a
promise needs it (another index, another home, another process): that is why the suite
takes the recipe and not an instance. Each test runs with its own ``LONGTERM_HOME`` and no
other ``LONGTERM_*`` variable. Needs pytest and pytest-asyncio (strict or auto mode).

Why a class: pytest collects the suite's tests in the subclass, whose fixtures override
the suite's (fsspec's abstract tests work so); parametrizing ``backend_name`` runs one
subclass over many backends, as longterm's own ``tests/contract`` does.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from .. import (
    BackendUnavailableError,
    InvalidInputError,
    LongTermMemory,
    LongTermMemoryError,
    Scope,
    record_id,
)
from ..core import registry
from ..entries import entry_text
from . import make_record, make_session
from ._writer import REFUSED, write
from .contract_inputs import InputContract

#: Longest any concurrent part of a test may run before it counts as a hang and fails.
#: A bound against hangs, far above the time the work takes; speed is measured in bench/.
HANG_LIMIT = 180.0

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

#: One word per concurrent session of the concurrency test: its own search term.
FRUITS = ["mango", "kiwi", "papaya", "lychee", "guava", "quince", "durian", "rambutan", "tamarind"]


@contextmanager
def memories(backend_name: str, backend_config: dict[str, Any]) -> Iterator[Callable[..., LongTermMemory]]:
    """A function opening a ``LongTermMemory`` on the test's store (each call a fresh
    'process'; keyword arguments go to ``LongTermMemory``, ``backend_config`` included);
    every memory it opened is closed afterwards, within ``HANG_LIMIT``."""
    opened: list[LongTermMemory] = []

    def _open(**kwargs: Any) -> LongTermMemory:
        m = LongTermMemory(**{"backend": backend_name, "backend_config": dict(backend_config), **kwargs})
        opened.append(m)
        return m

    yield _open
    in_threads({f"closing memory {i}": m.close_sync for i, m in enumerate(opened)})


def in_threads(jobs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run each job in its own daemon thread, all at once; their results by name. A job
    still running after ``HANG_LIMIT`` seconds fails the test (a hang fails it, and does not
    block the run); the first job that raised fails it with its error."""
    results: dict[str, Any] = {}
    errors: dict[str, BaseException] = {}

    def run(name: str, job: Callable[[], Any]) -> None:
        try:
            results[name] = job()
        except BaseException as exc:
            errors[name] = exc

    threads = [threading.Thread(target=run, args=item, name=item[0], daemon=True) for item in jobs.items()]
    for t in threads:
        t.start()
    deadline = time.monotonic() + HANG_LIMIT
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"still running after {HANG_LIMIT:g} s, so hung: {hung}"
    for name, exc in errors.items():
        raise AssertionError(f"{name} failed: {type(exc).__name__}: {exc}") from exc
    return results


def _parts(entry: Any) -> list[Any]:
    """A search hit's parts (ADK's ``Content.parts`` may be None)."""
    return list(entry.content.parts or []) if entry.content is not None else []


async def _texts(memory: LongTermMemory, app: str, user: str, query: str, k: int = 10) -> list[str]:
    res = await memory.search_memory(app_name=app, user_id=user, query=query, top_k=k)
    return [entry_text(m) for m in res.memories]


class ContractSuite(InputContract):
    """The contract: subclass it and provide ``backend_name`` and ``backend_config`` (module docstring)."""

    #: False for a store that lives in one process's memory and so cannot be shared with another.
    processes: bool = True

    # -- fixtures ----------------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def longterm_home(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        """This test's own LONGTERM_HOME; no other LONGTERM_* variable is set."""
        for var in [v for v in os.environ if v.startswith("LONGTERM_")]:
            monkeypatch.delenv(var)
        home = tmp_path / "home"
        monkeypatch.setenv("LONGTERM_HOME", str(home))
        return home

    @pytest.fixture
    def home_config(self) -> dict[str, Any] | None:
        """A backend_config whose store's location follows LONGTERM_HOME; None: no such default."""
        return None

    @pytest.fixture
    def open_memory(self, backend_name: str, backend_config: dict[str, Any]) -> Iterator[Callable[..., LongTermMemory]]:
        with memories(backend_name, backend_config) as _open:
            yield _open

    @pytest_asyncio.fixture
    async def memory(self, open_memory: Callable[..., LongTermMemory]) -> Any:
        m = open_memory()
        yield m
        await m.close()

    # -- a save and a search ----------------------------------------------------------------

    @pytest.mark.asyncio
    async def test_round_trip(self, memory: LongTermMemory):
        s = make_session(turns=[("user", "My favourite colour is teal"), ("model", "Teal is nice")])
        result = await memory.add_session_to_memory(s)
        assert (result.new_events, result.saved) == (2, 1)
        res = await memory.search_memory(app_name="app", user_id="u1", query="what is my favourite colour?")
        assert len(res.memories) == 1
        m = res.memories[0]
        assert m.content.role == "user"
        assert _parts(m)[0].text == "My favourite colour is teal"
        assert m.author == "user"
        assert m.id == record_id("app", "u1", "s1", "s1-e0")
        assert datetime.fromisoformat(m.timestamp or "").timestamp() == pytest.approx(1_700_000_000.0)
        assert m.custom_metadata["session_id"] == "s1"
        assert m.custom_metadata["event_id"] == "s1-e0"
        assert m.custom_metadata["score"] > 0

    @pytest.mark.asyncio
    async def test_best_match_first_and_top_k(self, memory: LongTermMemory):
        turns = [("user", f"note number {i} about gardening") for i in range(8)]
        turns.append(("user", "I keep bees and harvest honey from the bees every summer"))
        await memory.add_session_to_memory(make_session(turns=turns))
        texts = await _texts(memory, "app", "u1", "bees honey", k=3)
        assert texts[0].startswith("I keep bees")
        assert len(await _texts(memory, "app", "u1", "gardening", k=3)) == 3

    @pytest.mark.asyncio
    async def test_upsert_is_idempotent_by_id(self, memory: LongTermMemory):
        scope = Scope(app_name="app", user_id="u1")
        text = "the quick brown fox"
        rec = make_record(text, author="user", role="user", timestamp=1.0)
        backend = memory.backend_instance
        await backend.upsert([rec])
        await backend.upsert([rec])
        await backend.upsert([rec, rec])
        assert await backend.count(scope) == 1
        lazy = {"text": "a lazy dog", "content": {"role": "user", "parts": [{"text": "a lazy dog"}]}}
        await backend.upsert([rec.model_copy(update=lazy)])
        assert await backend.count(scope) == 1
        assert await _texts(memory, "app", "u1", "lazy dog") == ["a lazy dog"]
        assert "the quick brown fox" not in await _texts(memory, "app", "u1", "quick fox")

    @pytest.mark.asyncio
    async def test_a_record_given_another_users_id_is_refused(self, memory: LongTermMemory):
        """Restoring alice's export into bob's account by editing the user: refused, and alice's
        memory stays hers (an id says where a memory belongs); with bob's own id it is bob's."""
        await memory.add_session_to_memory(make_session(user="alice", turns=[("user", "alice passport number")]))
        [rec] = [r async for r in memory.iter_records(app_name="app", user_id="alice")]
        diary = {"text": "bob private diary", "content": {"role": "user", "parts": [{"text": "bob private diary"}]}}
        moved = rec.model_copy(update={"user_id": "bob", **diary})
        with pytest.raises(InvalidInputError, match="ids are derived from where a memory belongs"):
            await memory.upsert_records([moved])
        assert await memory.count(app_name="app", user_id="bob") == 0
        assert await _texts(memory, "app", "alice", "passport") == ["alice passport number"]
        await memory.upsert_records([moved.model_copy(update={"id": moved.own_id()})])
        assert await memory.delete_memory(app_name="app", user_id="alice") == 1
        assert await _texts(memory, "app", "bob", "diary") == ["bob private diary"]

    @pytest.mark.asyncio
    async def test_saving_again_writes_nothing_new(self, memory: LongTermMemory):
        s = make_session(turns=[("user", f"fact {i} about tea") for i in range(5)])
        assert (await memory.add_session_to_memory(s)).saved == 5
        again = await memory.add_session_to_memory(s)
        assert (again.new_events, again.saved) == (0, 0)
        late = {"id": "late", "author": "user", "content": {"role": "user", "parts": [{"text": "one more about tea"}]}}
        s["events"].append(late)
        assert (await memory.add_session_to_memory(s)).saved == 1
        assert await memory.count(app_name="app", user_id="u1") == 6

    # -- isolation -----------------------------------------------------------------------------

    @pytest.mark.asyncio
    @pytest.mark.parametrize("hostile", HOSTILE_IDS)
    async def test_isolation_under_hostile_ids(self, memory: LongTermMemory, hostile: str):
        victim = make_session("v", app="app", user="victim", turns=[("user", "victim secret password swordfish")])
        await memory.add_session_to_memory(victim)
        await memory.add_session_to_memory(
            make_session("o", app="other", user=hostile, turns=[("user", "other app secret swordfish")])
        )
        await memory.add_session_to_memory(
            make_session("h", app="app", user=hostile, turns=[("user", "hostile own secret note")])
        )
        for query in ["secret swordfish", "secret", hostile, "*"]:
            texts = await _texts(memory, "app", hostile, query)
            assert all("victim" not in t and "other app" not in t for t in texts), (query, texts)
        assert await _texts(memory, "app", hostile, "secret") == ["hostile own secret note"]
        assert await _texts(memory, "other", hostile, "secret") == ["other app secret swordfish"]
        assert await memory.count(app_name="app", user_id=hostile) == 1
        assert [r.text async for r in memory.iter_records(app_name="app", user_id=hostile)] == [
            "hostile own secret note"
        ]

    @pytest.mark.asyncio
    @pytest.mark.parametrize("query", HOSTILE_QUERIES)
    async def test_any_query_text_is_valid_and_stays_in_scope(self, memory: LongTermMemory, query: str):
        await memory.add_session_to_memory(make_session("v", user="victim", turns=[("user", "victim secret")]))
        await memory.add_session_to_memory(make_session("m", user="me", turns=[("user", "my own secret")]))
        texts = await _texts(memory, "app", "me", query)
        assert "victim secret" not in texts
        assert set(texts) <= {"my own secret"}

    @pytest.mark.asyncio
    async def test_empty_query_returns_nothing(self, memory: LongTermMemory):
        await memory.add_session_to_memory(make_session())
        assert await _texts(memory, "app", "u1", "") == []

    # -- deleting ------------------------------------------------------------------------------

    @pytest.mark.asyncio
    async def test_erase_and_delete_one(self, memory: LongTermMemory):
        await memory.add_session_to_memory(
            make_session(user="u1", turns=[("user", "alpha fact"), ("user", "beta fact")])
        )
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

    @pytest.mark.asyncio
    @pytest.mark.parametrize("memory_id", ["*", "%", "", " ", "' OR '1'='1", "../", "{}", "a}|@scope:{*", "\\", "中文"])
    async def test_a_hostile_memory_id_deletes_nothing(self, memory: LongTermMemory, memory_id: str):
        await memory.add_session_to_memory(
            make_session(user="u1", turns=[("user", "alpha fact"), ("user", "beta fact")])
        )
        try:
            n = await memory.delete_memory(app_name="app", user_id="u1", memory_id=memory_id)
        except InvalidInputError:
            n = 0
        assert n == 0
        assert await memory.count(app_name="app", user_id="u1") == 2

    @pytest.mark.asyncio
    async def test_deleting_a_session_deletes_only_its_memories(self, memory: LongTermMemory):
        await memory.add_session_to_memory(make_session("s1", turns=[("user", "alpha fact"), ("user", "beta fact")]))
        await memory.add_session_to_memory(make_session("s2", turns=[("user", "gamma fact")]))
        await memory.add_session_to_memory(make_session("s1", user="u2", turns=[("user", "alpha fact of u2")]))
        for hostile in ("*", "%", "s1' OR '1'='1", "s"):
            assert await memory.delete_memory(app_name="app", user_id="u1", session_id=hostile) == 0
        assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s1") == 2
        assert await memory.count(app_name="app", user_id="u1") == 1
        assert [r.session_id async for r in memory.iter_records(app_name="app", user_id="u1")] == ["s2"]
        assert await _texts(memory, "app", "u1", "fact") == ["gamma fact"]
        assert await _texts(memory, "app", "u2", "alpha") == ["alpha fact of u2"]
        assert await memory.delete_memory(app_name="app", user_id="u1", session_id="s1") == 0

    @pytest.mark.asyncio
    async def test_what_a_user_erased_stays_erased(self, memory: LongTermMemory):
        s = make_session(turns=[("user", "I live in Lisbon"), ("user", "my dog is called Rex")])
        assert (await memory.add_session_to_memory(s)).saved == 2
        assert await memory.delete_memory(app_name="app", user_id="u1") == 2
        # the session is still live and saved again: what was erased does not come back
        again = await memory.add_session_to_memory(s)
        assert (again.new_events, again.saved) == (0, 0)
        assert await memory.count(app_name="app", user_id="u1") == 0
        assert await _texts(memory, "app", "u1", "Lisbon") == []
        # new events of that session are saved
        cello = {"id": "s1-new", "author": "user", "content": {"role": "user", "parts": [{"text": "I play the cello"}]}}
        s["events"].append(cello)
        assert (await memory.add_session_to_memory(s)).saved == 1
        assert [r.text async for r in memory.iter_records(app_name="app", user_id="u1")] == ["I play the cello"]
        # bringing them back is explicit, and writes each memory once
        for _ in range(2):
            assert (await memory.add_session_to_memory(s, reconsider=True)).saved == 3
            assert await memory.count(app_name="app", user_id="u1") == 3
        assert (await _texts(memory, "app", "u1", "Lisbon"))[:1] == ["I live in Lisbon"]

    @pytest.mark.asyncio
    async def test_a_save_planned_before_an_erase_does_not_bring_it_back(
        self, memory: LongTermMemory, monkeypatch: pytest.MonkeyPatch
    ):
        # Two workers save one session; the user erases it after it landed; the slower worker
        # read the ledger before the erase and writes now: what was erased stays erased.
        s = make_session(turns=[("user", "I live in Lisbon"), ("user", "my dog is called Rex")])
        await memory.add_session_to_memory(s)
        await memory.delete_memory(app_name="app", user_id="u1", session_id=s["id"])

        async def read_before_the_erase(scope: Any, session_id: str) -> set[str]:
            return set()

        monkeypatch.setattr(memory._ledger, "saved", read_before_the_erase)
        await memory.add_session_to_memory(s)
        assert await memory.count(app_name="app", user_id="u1") == 0
        assert await _texts(memory, "app", "u1", "Lisbon") == []

    # -- the store: reopening, its identity, its ledger ------------------------------------

    @pytest.mark.asyncio
    async def test_data_survives_reopen(self, open_memory: Callable[..., LongTermMemory]):
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

    @pytest.mark.asyncio
    async def test_another_index_is_another_store_and_saves_everything(
        self, open_memory: Callable[..., LongTermMemory]
    ):
        sessions = [make_session(f"s{i}", turns=[("user", f"fact {i} about moving stores")]) for i in range(3)]
        v1 = open_memory(index="v1")
        assert [(await v1.add_session_to_memory(s)).saved for s in sessions] == [1, 1, 1]
        count = await v1.count(app_name="app", user_id="u1")
        await v1.close()
        v2 = open_memory(index="v2")  # same location, another index: its ledger is its own
        assert [(await v2.add_session_to_memory(s)).saved for s in sessions] == [1, 1, 1]
        assert await v2.count(app_name="app", user_id="u1") == count == 3
        assert [(await v2.add_session_to_memory(s)).saved for s in sessions] == [0, 0, 0]
        await v2.close()
        v1 = open_memory(index="v1")
        assert await v1.count(app_name="app", user_id="u1") == 3
        await v1.close()

    @pytest.mark.asyncio
    async def test_users_and_indices_are_listed(self, open_memory: Callable[..., LongTermMemory]):
        """``stats`` and ``migrate`` list a store's users and indices on every engine."""
        a = open_memory(index="listed_a")
        b = open_memory(index="listed_b")
        await a.add_session_to_memory(make_session("s1", turns=[("user", "alpha one"), ("user", "alpha two")]))
        await a.add_session_to_memory(make_session("s2", app="other app", user="u:2", turns=[("user", "beta")]))
        await b.add_session_to_memory(make_session("s3", user="u3", turns=[("user", "gamma")]))
        assert sorted(await a.scopes()) == [("app", "u1", 2), ("other app", "u:2", 1)]
        assert sorted(await b.scopes()) == [("app", "u3", 1)]
        assert {"listed_a", "listed_b"} <= set(await a.indices())
        await a.delete_memory(app_name="other app", user_id="u:2")
        assert sorted(await a.scopes()) == [("app", "u1", 2)]

    @pytest.mark.asyncio
    async def test_the_ledger_moves_with_the_store_not_with_the_home(
        self,
        open_memory: Callable[..., LongTermMemory],
        home_config: dict[str, Any] | None,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ):
        sessions = [make_session(f"s{i}", turns=[("user", f"fact {i} about homes")]) for i in range(3)]

        async def save_all(**kwargs: Any) -> tuple[list[int], int]:
            m = open_memory(**kwargs)
            try:
                saved = [(await m.add_session_to_memory(s)).saved for s in sessions]
                return saved, await m.count(app_name="app", user_id="u1")
            finally:
                await m.close()

        # A store at a given location is the same store under any home: nothing is saved twice.
        assert await save_all() == ([1, 1, 1], 3)
        monkeypatch.setenv("LONGTERM_HOME", str(tmp_path / "second-home"))
        assert await save_all() == ([0, 0, 0], 3)
        if home_config is not None:
            # A store that lives in the home: another home is another store, saved into whole.
            assert await save_all(backend_config=home_config) == ([1, 1, 1], 3)
            monkeypatch.setenv("LONGTERM_HOME", str(tmp_path / "third-home"))
            assert await save_all(backend_config=home_config) == ([1, 1, 1], 3)

    # -- text ----------------------------------------------------------------------------------

    @pytest.mark.asyncio
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
            ("Next month I fly to İstanbul", "istanbul"),
            ("下周我和Maria一起去上海出差", "Maria"),
            ("下周我和Maria一起去上海出差", "上海出差"),
            ("We had dinner at 海底捞 with Tom", "海底捞"),
            ("明天的meeting改到下午三点", "meeting"),
        ],
    )
    async def test_unicode_and_cjk_are_searchable(self, memory: LongTermMemory, text: str, query: str):
        await memory.add_session_to_memory(make_session(turns=[("user", text), ("user", "unrelated filler sentence")]))
        assert (await _texts(memory, "app", "u1", query))[:1] == [text]

    @pytest.mark.asyncio
    async def test_text_cut_inside_an_emoji_is_repaired_and_ids_that_are_no_unicode_refused(
        self, memory: LongTermMemory
    ):
        """Lone UTF-16 surrogates (an emoji sliced by a JavaScript client) cannot be stored by
        any engine: in text, author, tool arguments and metadata they become U+FFFD and the
        memory is saved and found; in an id they are refused with a clear error."""
        s = make_session(turns=[("user", "Pack the sunscreen \ud83d"), ("user", "unrelated filler sentence")])
        s["events"][0]["author"] = "user\udc00"
        s["events"][0]["custom_metadata"] = {"note\ud800": ["x\ud800"]}
        call = {"function_call": {"name": "pack", "args": {"item": "sunscreen \ud83d"}}}
        s["events"].append({"id": "s1-call", "author": "agent", "content": {"role": "model", "parts": [call]}})
        await memory.add_session_to_memory(s, auto_save_memory_policy="all")
        res = await memory.search_memory(app_name="app", user_id="u1", query="sunscreen")
        texts = [" ".join(p.text or "" for p in _parts(m)) for m in res.memories]
        assert "Pack the sunscreen \ufffd" in texts
        hit = res.memories[texts.index("Pack the sunscreen \ufffd")]
        assert hit.author == "user\ufffd"
        assert any(_parts(m)[0].function_call is not None for m in res.memories)
        for bad in (make_session("s\ud800"), {**make_session("s2"), "user_id": "u\udc00"}):
            with pytest.raises(InvalidInputError, match="not valid Unicode"):
                await memory.add_session_to_memory(bad)
        bad_event = make_session("s3")
        bad_event["events"][0]["id"] = "e\ud800"
        with pytest.raises(InvalidInputError, match="not valid Unicode"):
            await memory.add_session_to_memory(bad_event)
        with pytest.raises(InvalidInputError, match="not valid Unicode"):
            await memory.search_memory(app_name="app", user_id="u1\ud800", query="sunscreen")

    @pytest.mark.asyncio
    async def test_a_pasted_page_as_query_is_answered_in_scope(self, memory: LongTermMemory):
        """Thousands of distinct words, or one huge token, are a valid query on every engine
        (OpenSearch alone refuses more than 1,024 clauses), and stay in scope."""
        await memory.add_session_to_memory(make_session(user="victim", turns=[("user", "victim keeps bees too")]))
        await memory.add_session_to_memory(
            make_session(turns=[("user", "I keep bees in the garden"), ("user", "filler words here")])
        )
        many = " ".join(f"w{i}x" for i in range(3000))
        for query in ["bees " + many, "bees " + "z" * 100_000, "bees " + "蜂" * 20_000, "bees " * 3000, many + " bees"]:
            texts = await _texts(memory, "app", "u1", query)
            assert set(texts) <= {"I keep bees in the garden", "filler words here"}, query[:40]
            assert texts or query.startswith("w0x"), query[:40]  # past the first 256 terms, bees may not count

    @pytest.mark.asyncio
    async def test_one_megabyte_event_is_stored_whole_or_refused(self, memory: LongTermMemory):
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
        assert res.memories and _parts(res.memories[0])[0].text == big

    # -- concurrency and lifetime ------------------------------------------------------------

    def test_two_processes_saving_the_same_session(
        self, backend_name: str, backend_config: dict[str, Any], tmp_path: Path
    ):
        """Two writers save the same session at once: processes, or for a store that lives in
        one process's memory (``processes = False``), two memories in two threads."""
        turns = [("user" if i % 2 == 0 else "model", f"event {i} about topic {i % 7}") for i in range(400)]
        session = make_session("shared", turns=turns)
        outcomes = self._two_writers(backend_name, backend_config, session, tmp_path)
        # A store that allows one process at a time (embedded engines) must refuse the
        # second one clearly; every other outcome but success is a failure.
        for out in outcomes:
            assert out == "ok" or "another process" in out, out
        assert "ok" in outcomes
        memory = LongTermMemory(backend=backend_name, backend_config=backend_config)
        try:
            assert memory.count_sync(app_name="app", user_id="u1") == 200
        finally:
            memory.close_sync()

    def _two_writers(self, name: str, config: dict[str, Any], session: dict[str, Any], tmp_path: Path) -> list[str]:
        """Two writers saving ``session`` three times each, at once: each one's outcome."""
        if not self.processes:

            def writer() -> str:
                try:
                    write(name, config, session, 3)
                except BackendUnavailableError as exc:
                    return f"refused: {exc}"
                return "ok"

            return list(in_threads({"writer 1": writer, "writer 2": writer}).values())
        path = tmp_path / "session.json"
        path.write_text(json.dumps(session))
        cls = registry.backend_class(name)
        target = f"{cls.__module__}:{cls.__qualname__}"
        cmd = [sys.executable, "-m", "longterm.testing._writer", name, target, json.dumps(config), str(path), "3"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        procs = [
            subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
        ]
        outcomes = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=HANG_LIMIT)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise
            assert p.returncode in (0, REFUSED), err
            outcomes.append("ok" if p.returncode == 0 else f"refused: {out}")
        return outcomes

    def test_one_memory_from_sync_wrappers_async_code_and_threads(self, open_memory: Callable[..., LongTermMemory]):
        """One memory used at once from its sync wrappers, from several coroutines on one loop
        and from four threads each running its own loop: every call succeeds, exactly."""
        memory = open_memory()
        sessions = {
            f: make_session(f"s-{f}", turns=[("user", f"I like {f}, note {i}") for i in range(5)]) for f in FRUITS
        }

        async def save_and_find(fruit: str) -> tuple[int, int, str]:
            first = await memory.add_session_to_memory(sessions[fruit])
            again = await memory.add_session_to_memory(sessions[fruit])
            res = await memory.search_memory(app_name="app", user_id="u1", query=fruit, top_k=5)
            return first.saved, again.saved, res.memories[0].custom_metadata["session_id"]

        def with_sync_wrappers(fruits: list[str]) -> list[tuple[int, int, str]]:
            out = []
            for f in fruits:
                first = memory.add_session_to_memory_sync(sessions[f])
                again = memory.add_session_to_memory_sync(sessions[f])
                res = memory.search_memory_sync(app_name="app", user_id="u1", query=f, top_k=5)
                out.append((first.saved, again.saved, res.memories[0].custom_metadata["session_id"]))
            return out

        async def together(fruits: list[str]) -> list[tuple[int, int, str]]:
            return list(await asyncio.gather(*(save_and_find(f) for f in fruits)))

        def on_a_new_loop(fruits: list[str]) -> list[tuple[int, int, str]]:
            return asyncio.run(together(fruits))

        jobs = {
            "sync wrappers": partial(with_sync_wrappers, FRUITS[:2]),
            "three coroutines on one loop": partial(on_a_new_loop, FRUITS[2:5]),
        }
        jobs.update({f"thread {i} with its own loop": partial(on_a_new_loop, [f]) for i, f in enumerate(FRUITS[5:])})
        outcomes = sorted(o for results in in_threads(jobs).values() for o in results)
        assert outcomes == sorted((5, 0, f"s-{f}") for f in FRUITS)
        counted = in_threads({"count": lambda: memory.count_sync(app_name="app", user_id="u1")})
        assert counted["count"] == 5 * len(FRUITS)

    @pytest.mark.asyncio
    async def test_close_twice_then_every_call_fails_clearly(self, open_memory: Callable[..., LongTermMemory]):
        m = open_memory()
        await m.add_session_to_memory(make_session())
        await m.close()
        await m.close()
        with pytest.raises(LongTermMemoryError):
            await m.count(app_name="app", user_id="u1")
        with pytest.raises(LongTermMemoryError):
            await m.search_memory(app_name="app", user_id="u1", query="hiking")
        with pytest.raises(LongTermMemoryError):
            await m.add_session_to_memory(make_session("s2"))
        with pytest.raises(LongTermMemoryError):
            await m.delete_memory(app_name="app", user_id="u1")
        s = open_memory()
        assert s.count_sync(app_name="app", user_id="u1") == 1
        s.close_sync()
        s.close_sync()
        with pytest.raises(LongTermMemoryError):
            s.search_memory_sync(app_name="app", user_id="u1", query="hiking")
