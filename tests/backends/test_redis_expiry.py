"""A memory's life on the Redis engine, against the real Redis Stack server the test setup starts.

What is held: a read at a moment (``core.where.living``) returns exactly the records alive then that
pass the filter, from every read (scan, count, pages, pages by time, full text, k-NN, search); a
moment past a record's expiry hides it at once; ``expires_at`` and ``updated_at`` come back as
written from every read, and a record rewritten without an expiry loses its ``expires`` field;
a store made before expiry gets the field when opened, once, and its records never expire.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

import pytest

from longterm import LongTermMemory, MemoryRecord, Scope
from longterm.backends.redis import RedisBackend
from longterm.backends.redis.filtering import EXPIRES_FIELD, clause, plan
from longterm.backends.redis.scripts import INDEX_ON, SCHEMA
from longterm.backends.redis.upgrade import EXPIRY_KEY
from longterm.core.engine import Query
from longterm.core.erasures import Erasure
from longterm.core.where import EXPIRES, Has, Neg, Or, Span, Where, holds, living, record_tokens, where_of
from longterm.retrieval.embedders import HashingEmbedder
from longterm.retrieval.text import query_terms
from longterm.testing import make_record
from longterm.testing.contract import HANG_LIMIT

SCOPE = Scope(app_name="app", user_id="u1")
NOW = 1_700_000_000.0
NOTE = Query("note", query_terms("note", stem=False))


@pytest.fixture
def redis_cfg(services, tmp_path: Path) -> dict:
    return cast(dict, services("redis").config(tmp_path))


def _engine(memory: LongTermMemory) -> RedisBackend:
    return cast(RedisBackend, memory.backend_instance)


def _memory(cfg: dict, vectors: bool = True) -> LongTermMemory:
    embedder = HashingEmbedder(64) if vectors else None
    return LongTermMemory(backend="redis", backend_config=cfg, embedder=embedder, app_name="app")


def _records(user: str = "u1") -> list[MemoryRecord]:
    """30 records: a third expired before ``NOW``, a third expiring after (one at ``NOW`` itself: gone
    at ``NOW``), a third never; topic a or b; some corrected (``updated_at``)."""
    return [
        make_record(
            f"note {i}",
            user=user,
            event=f"e{i}",
            metadata={"topic": "ab"[i % 2]},
            expires_at=(NOW - 1000 + i, NOW + 10 * (i - 1), None)[i % 3],
            updated_at=NOW - i if i % 4 == 0 else None,
            timestamp=NOW - 5000 + i,
        )
        for i in range(30)
    ]


def _alive(records: list[MemoryRecord], where: Where) -> set[str]:
    """What ``where`` passes (the reference: ``holds`` over tokens, time and expiry, and ``admits``)."""
    out = set()
    for r in records:
        native = holds(where.native, set(record_tokens(r)), r.timestamp, r.expires_at)
        assert native == where.admits(r)
        if native:
            out.add(r.id)
    return out


def test_the_expiry_span_is_the_expires_field_and_the_alive_part_is_split_off():
    assert clause(Span(5.0, None, lo_incl=False, field="expires_at")) == "@expires:[(5.0 +inf]"
    assert clause(Span(None, 5.0, field="timestamp")) == "@timestamp:[-inf 5.0]"
    assert living(None, NOW).native == Or((Neg(Has((EXPIRES,))), Span(NOW, None, lo_incl=False, field="expires_at")))
    p = plan(living(None, NOW))
    assert p is not None and p.rest == "" and p.at == NOW and "@expires:[(1700000000.0 +inf]" in p.full
    topic = where_of({"topic": "a"})
    assert topic is not None
    p = plan(living(topic, NOW))
    assert p is not None and p.at == NOW and p.rest == f"({clause(topic.native)})" and "@expires" in p.full
    p = plan(topic)
    assert p is not None and p.at is None and p.rest == p.full == clause(topic.native)
    assert plan(None) is not None and plan(living(where_of({"topic": {"$in": []}}), NOW)) is None
    # An alive part not at the top of the tree stays in the clause.
    odd = Where(None, Neg(living(None, NOW).native), True, NOW)
    p = plan(odd)
    assert p is not None and p.at is None and "@expires" in p.rest


async def _reads(engine: RedisBackend, where: Where) -> dict[str, Any]:
    """The ids every read returns for ``where`` (k large enough for all)."""
    vector = engine.embedder.embed(["note"], kind="query")[0]  # type: ignore[union-attr]
    pages: list[str] = []
    cursor = None
    while True:
        records, cursor = await asyncio.to_thread(engine._page, SCOPE, cursor, 7, where)
        pages += [r.id for r in records]
        if cursor is None:
            break
    by_time: list[str] = []
    cursor = None
    while True:
        records, cursor = await engine.page_by_time(SCOPE, cursor, 4, where=where)
        by_time += [r.id for r in records]
        if cursor is None:
            break
    return {
        "scan": [r.id async for r in engine.scan(SCOPE, batch_size=5, where=where)],
        "page": pages,
        "page_by_time": by_time,
        "count": await engine.count(SCOPE, where=where),
        "fulltext": [r.id for r, _ in await asyncio.to_thread(engine._fulltext, SCOPE, NOTE, 100, where)],
        "nearest": [r.id for r, _ in await asyncio.to_thread(engine._nearest, SCOPE, vector, 100, where)],
        "search": [h.record.id for h in await engine.search(SCOPE, "note", 100, where=where)],
    }


def _exactly(reads: dict[str, Any], want: set[str]) -> None:
    for name, got in reads.items():
        if name == "count":
            assert got == len(want), name
        else:
            assert len(got) == len(set(got)) and set(got) == want, name


async def test_every_read_at_a_moment_returns_exactly_the_alive_ones_that_pass(redis_cfg: dict):
    memory = _memory(redis_cfg)
    engine = _engine(memory)
    records = _records()
    await engine.upsert([*records, *_records("u2")])
    try:
        topic = where_of({"topic": "a"})
        not_b = where_of({"topic": {"$ne": "b"}})
        # 10 expired long ago, 1 at ``NOW`` itself, 19 alive at ``NOW``; all of them before.
        assert len(_alive(records, living(None, NOW))) == 19 and len(_alive(records, living(None, NOW - 2000))) == 30
        for where in (living(None, NOW), living(topic, NOW), living(not_b, NOW), living(None, NOW - 2000)):
            _exactly(await _reads(engine, where), _alive(records, where))
        # Scores are those of an unfiltered read: expiry adds nothing to them.
        plain = {r.id: s for r, s in await asyncio.to_thread(engine._fulltext, SCOPE, NOTE, 100, None)}
        alive = await asyncio.to_thread(engine._fulltext, SCOPE, NOTE, 100, living(None, NOW))
        assert {r.id: s for r, s in alive} == {i: plain[i] for i in _alive(records, living(None, NOW))}
        # The cut comes after expiry: the best 3 alive, not the alive among the best 3.
        vector = engine.embedder.embed(["note 0"], kind="query")[0]  # type: ignore[union-attr]
        best = await asyncio.to_thread(engine._nearest, SCOPE, vector, 3, living(None, NOW))
        assert len(best) == 3 and all(r.expires_at is None or r.expires_at > NOW for r, _ in best)
    finally:
        await memory.close()


async def test_the_alive_few_are_found_under_the_expired_crowd_that_ranks_above_them(redis_cfg: dict):
    memory = _memory(redis_cfg)
    engine = _engine(memory)
    loud = [make_record("apple apple apple", event=f"c{i}", expires_at=NOW - i) for i in range(300)]
    quiet = [make_record(f"an apple among pears plums and figs {i}", event=f"q{i}") for i in range(3)]
    await engine.upsert([*loud, *quiet])
    apple = Query("apple", query_terms("apple", stem=False))
    vector = engine.embedder.embed(["apple"], kind="query")[0]  # type: ignore[union-attr]
    want = {r.id for r in quiet}
    try:
        assert {r.id for r, _ in await asyncio.to_thread(engine._fulltext, SCOPE, apple, 3, None)} & want == set()
        for k in (1, 3):
            text = await asyncio.to_thread(engine._fulltext, SCOPE, apple, k, living(None, NOW))
            near = await asyncio.to_thread(engine._nearest, SCOPE, vector, k, living(None, NOW))
            assert len(text) == len(near) == k and {r.id for r, _ in text} <= want and {r.id for r, _ in near} <= want
        assert {h.record.id for h in await engine.search(SCOPE, "apple", 3, where=living(None, NOW))} == want
        assert await engine.count(SCOPE, where=living(None, NOW)) == 3
        assert await engine.count(SCOPE, where=living(None, NOW - 150)) == 3 + 150
    finally:
        await memory.close()


async def test_a_moment_past_an_expiry_hides_the_record_at_once(redis_cfg: dict):
    memory = _memory(redis_cfg)
    engine = _engine(memory)
    short = make_record("note short", event="short", expires_at=NOW + 1.5)
    never = make_record("note never", session="s2", event="never")
    await engine.upsert([short, never])
    try:
        _exactly(await _reads(engine, living(None, NOW + 1.4)), {short.id, never.id})
        _exactly(await _reads(engine, living(None, NOW + 1.5)), {never.id})  # at the moment itself: gone
        _exactly(await _reads(engine, living(None, NOW + 99)), {never.id})
        _exactly(await _reads(engine, living(where_of({"event_id": "short"}), NOW + 1.5)), set())
        # No moment: the expired record is still there (``living`` is what leaves it out).
        assert {r.id async for r in engine.scan(SCOPE)} == {short.id, never.id}
        assert await engine.count(SCOPE) == 2
        # An erase under way and an expiry together.
        await asyncio.to_thread(engine._erasure_begin, Erasure(app_name="app", user_id="u1", session_id="s"))
        _exactly(await _reads(engine, living(None, NOW)), {never.id})
    finally:
        await memory.close()


async def test_expiry_and_correction_times_round_trip_and_a_rewrite_drops_the_field(redis_cfg: dict):
    memory = _memory(redis_cfg)
    engine = _engine(memory)
    record = make_record("note kept", event="k", expires_at=NOW + 0.25, updated_at=NOW - 0.5)
    await engine.upsert([record])
    key = f"{engine.ns}m:{record.id}"
    try:
        read = {
            "scan": [r async for r in engine.scan(SCOPE)],
            "page": (await asyncio.to_thread(engine._page, SCOPE, None, 10))[0],
            "by_time": (await engine.page_by_time(SCOPE))[0],
            "search": [h.record for h in await engine.search(SCOPE, "note", 5)],
            "alive": [h.record for h in await engine.search(SCOPE, "note", 5, where=living(None, NOW))],
        }
        for name, got in read.items():
            assert [(r.expires_at, r.updated_at) for r in got] == [(NOW + 0.25, NOW - 0.5)], name
            assert got[0] == record, name
        assert float(engine._r.hget(key, "expires")) == NOW + 0.25
        # Corrected to never expire (an overwrite by id): the field goes, the record is alive again.
        forever = record.model_copy(update={"expires_at": None, "updated_at": NOW + 5, "text": "note fixed"})
        await engine.upsert([forever])
        assert not engine._r.hexists(key, "expires")
        _exactly(await _reads(engine, living(None, NOW + 10)), {record.id})
        assert [r async for r in engine.scan(SCOPE)] == [forever]
        # And back to expiring: the field is written again.
        await engine.upsert([record])
        assert float(engine._r.hget(key, "expires")) == NOW + 0.25
        _exactly(await _reads(engine, living(None, NOW + 10)), set())
    finally:
        await memory.close()


def _info(engine: RedisBackend) -> dict[bytes, Any]:
    fields = engine._r.execute_command("FT.INFO", engine.index_name)
    return dict(zip(fields[::2], fields[1::2], strict=True))


def _attributes(engine: RedisBackend) -> list[bytes]:
    return [attr[1] for attr in _info(engine)[b"attributes"]]


async def _indexed(engine: RedisBackend) -> None:
    """Until the index has scanned the records it was made (or altered) over, in the background.
    The scan walks the whole keyspace of the suite's shared server, so how long it takes follows
    what other tests wrote and the machine's load: bounded only against a hang (``HANG_LIMIT``)."""
    end = time.monotonic() + HANG_LIMIT
    while time.monotonic() < end:
        if int(_info(engine)[b"indexing"]) == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the index did not finish its scan within {HANG_LIMIT:.0f} s")


async def test_a_store_made_before_expiry_gets_the_field_once_and_its_records_never_expire(
    redis_cfg: dict, monkeypatch: pytest.MonkeyPatch
):
    old = [make_record(f"note {i}", event=f"e{i}", metadata={"topic": "a"}) for i in range(6)]
    first = _memory(redis_cfg)
    engine = _engine(first)
    await engine.upsert(old)
    r = engine._r
    r.execute_command("FT.DROPINDEX", engine.index_name)  # the records stay
    at = SCHEMA.index(EXPIRES_FIELD[0])
    old_schema = SCHEMA[:at] + SCHEMA[at + len(EXPIRES_FIELD) :]
    vector = ("embedding", "VECTOR", "HNSW", 6, "TYPE", "FLOAT32", "DISTANCE_METRIC", "COSINE", "DIM", 64)
    r.execute_command("FT.CREATE", engine.index_name, *INDEX_ON, engine.ns + "m:", *old_schema, *vector)
    r.hdel(engine.ns + "meta", EXPIRY_KEY)
    assert EXPIRES_FIELD[0].encode() not in _attributes(engine)
    await first.close()

    a, b = _memory(redis_cfg), _memory(redis_cfg)
    ea, eb = _engine(a), _engine(b)
    try:
        # Two processes open it at once: both add the field, neither fails.
        counts = await asyncio.gather(
            ea.count(SCOPE, where=living(None, NOW)), eb.count(SCOPE, where=living(None, NOW))
        )
        assert counts == [6, 6]
        assert _attributes(ea).count(EXPIRES_FIELD[0].encode()) == 1
        assert ea._r.hget(ea.ns + "meta", EXPIRY_KEY) is not None
        await _indexed(ea)
        _exactly(await _reads(ea, living(None, NOW)), {x.id for x in old})
        # What is saved now expires, in the old store too.
        gone = make_record("note gone", event="gone", expires_at=NOW - 1)
        await ea.upsert([gone])
        _exactly(await _reads(ea, living(None, NOW)), {x.id for x in old})
        _exactly(await _reads(ea, living(where_of({"topic": "a"}), NOW)), {x.id for x in old})
        assert await ea.count(SCOPE) == 7

        def never(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("altered twice")

        c = _memory(redis_cfg)
        monkeypatch.setattr(_engine(c)._r, "execute_command", _only_reads(_engine(c)._r.execute_command, never))
        try:
            assert await _engine(c).count(SCOPE, where=living(None, NOW)) == 6
        finally:
            monkeypatch.undo()
            await c.close()
    finally:
        await a.close()
        await b.close()


def _only_reads(execute: Any, never: Any) -> Any:
    """``execute_command`` that fails on ``FT.ALTER``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if args and str(args[0]).upper() == "FT.ALTER":
            never()
        return execute(*args, **kwargs)

    return call


async def test_a_fresh_store_indexes_each_record_once_however_busy_the_server(redis_cfg: dict):
    """RediSearch's initial scan walks the server's whole keyspace and indexed again the records a
    fresh store saved while it ran, so BM25's statistics moved between two reads of one question
    (a contract test's flake). A store never opened skips that scan: each record is indexed once."""
    memory = _memory(redis_cfg, vectors=False)
    r = _engine(memory)._r  # the engine is not opened before its first call
    filler = redis_cfg["prefix"] + "filler:"
    with r.pipeline(transaction=False) as pipe:
        for i in range(30_000):
            pipe.hset(f"{filler}{i}", mapping={"x": i})
        pipe.execute()
    try:
        engine = _engine(memory)
        await engine.upsert([make_record(f"note {i}", event=f"e{i}") for i in range(300)])
        await _indexed(engine)
        info = _info(engine)
        assert int(info[b"num_docs"]) == 300
        assert int(info[b"max_doc_id"]) == 300, "a record indexed twice: the initial scan met it"
    finally:
        await memory.close()
        for start in range(0, 30_000, 5_000):
            r.delete(*[f"{filler}{i}" for i in range(start, start + 5_000)])
