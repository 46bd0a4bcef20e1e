"""Redis erases of many ids (by date, by filter, an expiry sweep) marked first, against the real Redis
Stack server the test setup starts.

What is held: while an erase of ids is under way (its marks written, its deletes not yet done, or
killed: ``tests/faults/test_crash_erase.py``) no read returns those ids (scan, pages, count, full
text, k-NN, search, the store's listing of users), a record saved again after the marks stays, and
finishing deletes exactly the rest; an erase of more ids than one script call deletes writes all its
marks at once; a store made before records carried their ``rid`` gets it when opened, once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import pytest

from longterm import LongTermMemory, MemoryRecord
from longterm.backends.redis import RedisBackend, erasing
from longterm.backends.redis.scripts import ID_FIELD, INDEX_ON, SCHEMA, record_tag
from longterm.backends.redis.upgrade import IDS_KEY
from longterm.core.erasures import Erasure
from longterm.core.where import living
from longterm.testing import make_record
from tests.backends.test_redis_expiry import NOW, SCOPE, _attributes, _exactly, _indexed, _reads


@pytest.fixture
def redis_cfg(services, tmp_path: Path) -> dict:
    return cast(dict, services("redis").config(tmp_path))


def _memory(cfg: dict) -> LongTermMemory:
    from longterm.retrieval.embedders import HashingEmbedder

    return LongTermMemory(backend="redis", backend_config=cfg, embedder=HashingEmbedder(64), app_name="app")


def _engine(memory: LongTermMemory) -> RedisBackend:
    return cast(RedisBackend, memory.backend_instance)


def _records(n: int) -> list[MemoryRecord]:
    return [make_record(f"note {i}", event=f"e{i}", timestamp=NOW - 5000 + i) for i in range(n)]


def _ids_mark(ids: list[str]) -> Erasure:
    return Erasure(SCOPE.app_name, SCOPE.user_id, None, {"id": {"$in": ids}})


async def test_marks_of_ids_hide_them_from_every_read_until_finished(redis_cfg: dict):
    records = _records(30)
    memory = _memory(redis_cfg)
    engine = _engine(memory)
    try:
        await engine.upsert(records)
        ids = [r.id for r in records]
        await asyncio.to_thread(engine._marked, [_ids_mark(ids[:6]), _ids_mark(ids[6:12])])
        await engine.upsert([records[0]])  # saved again after the marks: it stays

        want = {ids[0], *ids[12:]}
        _exactly(await _reads(engine, living(None, NOW)), want)
        assert engine._scopes() == [(SCOPE.app_name, SCOPE.user_id, len(want))]
        assert engine._r.scard(engine._set(SCOPE)) == 30  # hidden, not yet deleted

        assert await asyncio.to_thread(engine.erasing.finish) == 11  # type: ignore[union-attr]
        assert engine._erasures_pending() == []
        assert engine._r.scard(engine._set(SCOPE)) == len(want)
        _exactly(await _reads(engine, living(None, NOW)), want)
    finally:
        await memory.close()


async def test_an_erase_of_more_ids_than_a_call_deletes_marks_them_all_first(
    redis_cfg: dict, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(erasing, "ERASE_BATCH", 4)
    monkeypatch.setattr(erasing, "MARK_IDS", 5)
    records = _records(20)
    memory = _memory(redis_cfg)
    engine = _engine(memory)
    marked: list[int] = []
    original = engine._marked

    def spy(erasures: list[Erasure]) -> list[Erasure]:
        marked.append(len(erasures))
        assert engine._r.scard(engine._set(SCOPE)) == 20  # nothing deleted before every mark is written
        return original(erasures)

    try:
        await engine.upsert(records)
        monkeypatch.setattr(engine, "_marked", spy)
        assert await memory.delete_all(user_id=SCOPE.user_id, before=NOW - 5000 + 12) == 12
        assert marked == [3]  # 12 ids, 5 a mark: three marks, one write
        assert await memory.delete_all(user_id=SCOPE.user_id, before=NOW - 5000 + 15) == 3  # one call: no mark
        assert marked == [3]
        assert engine._erasures_pending() == []
        assert {r.id for r in (await memory.get_all(user_id=SCOPE.user_id, limit=100)).memories} == {
            r.id for r in records[15:]
        }
    finally:
        await memory.close()


async def test_a_store_made_before_record_tags_gets_them_once_when_opened(redis_cfg: dict):
    records = _records(6)
    first = _memory(redis_cfg)
    engine = _engine(first)
    await engine.upsert(records)
    r, keys = engine._r, [f"{engine.ns}m:{x.id}" for x in records]
    r.execute_command("FT.DROPINDEX", engine.index_name)  # the records stay
    at = SCHEMA.index(ID_FIELD[0])
    old_schema = SCHEMA[:at] + SCHEMA[at + len(ID_FIELD) :]
    vector = ("embedding", "VECTOR", "HNSW", 6, "TYPE", "FLOAT32", "DISTANCE_METRIC", "COSINE", "DIM", 64)
    r.execute_command("FT.CREATE", engine.index_name, *INDEX_ON, engine.ns + "m:", *old_schema, *vector)
    for key in keys:
        r.hdel(key, ID_FIELD[0])
    r.hdel(engine.ns + "meta", IDS_KEY)
    assert ID_FIELD[0].encode() not in _attributes(engine)
    await first.close()

    again = _memory(redis_cfg)
    engine = _engine(again)
    try:
        assert await engine.count(SCOPE) == 6
        assert [engine._r.hget(key, ID_FIELD[0]) for key in keys] == [record_tag(key).encode() for key in keys]
        assert _attributes(engine).count(ID_FIELD[0].encode()) == 1
        await _indexed(engine)
        await asyncio.to_thread(engine._marked, [_ids_mark([x.id for x in records[:2]])])
        _exactly(await _reads(engine, living(None, NOW)), {x.id for x in records[2:]})
    finally:
        await again.close()
