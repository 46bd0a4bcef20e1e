"""Qdrant (qdrant-edge, and qdrant-client's local mode: the server's code path): a record is found
by its id exactly, and a second memory of this process on an embedded store hears what to do.

A point id is a UUID: every spelling of one (upper case, dashes, braces, ``urn:uuid:``) reads as
the same point, yet a delete by one must erase nothing, as ``get`` finds nothing by it and the
other engines delete nothing (``qdrant.ids``). The embedded store's lock is taken by one memory
at a time: in this process the second is told so, not that another process has it.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from longterm import BackendUnavailableError, LongTermMemory
from longterm.records import Scope
from longterm.testing import make_record

ENGINES = ["edge", "local"]


def _memory(path: Path, engine: str) -> LongTermMemory:
    return LongTermMemory(app_name="app", backend="qdrant", backend_config={"path": str(path), "engine": engine})


def _spellings(mid: str) -> list[str]:
    dashed = str(uuid.UUID(hex=mid))
    return [mid.upper(), dashed, dashed.upper(), "{" + dashed + "}", "urn:uuid:" + dashed]


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_delete_by_another_spelling_of_the_id_erases_nothing(tmp_path: Path, engine: str):
    memory = _memory(tmp_path / "q", engine)
    (mid,) = (await memory.add("bees make honey", user_id="alice")).memory_ids
    for other in _spellings(mid):
        assert await memory.get(other, user_id="alice") is None
        assert await memory.delete(other, user_id="alice") is False, other
    assert (await memory.get(mid, user_id="alice")) is not None
    assert await memory.delete(mid, user_id="alice") is True
    assert await memory.get(mid, user_id="alice") is None
    await memory.close()


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_record_of_a_uuid_id_is_deleted_by_that_id_only(tmp_path: Path, engine: str):
    """A record whose id is a UUID in another form (written directly, as a foreign store's): its point
    is kept as it was written, its own id deletes it, another spelling of it does not."""
    memory = _memory(tmp_path / "q", engine)
    engine_ = memory.backend_instance
    dashed = str(uuid.uuid4())
    record = make_record("a foreign record", user="alice").model_copy(update={"id": dashed})
    await engine_.upsert([record])
    scope = Scope(app_name="app", user_id="alice")
    assert await engine_.delete(scope, [dashed.upper(), dashed.replace("-", "")]) == 0
    assert await engine_.delete(scope, [dashed]) == 1
    assert await engine_.count(scope) == 0
    await memory.close()


async def test_a_second_memory_of_this_process_on_one_store_is_told_so(tmp_path: Path):
    first = _memory(tmp_path / "q", "edge")
    await first.add("bees make honey", user_id="alice")
    second = _memory(tmp_path / "q", "edge")
    with pytest.raises(BackendUnavailableError) as refused:
        await second.search("honey", user_id="alice")
    text = str(refused.value)
    assert "this process has the embedded store open already" in text.lower() and "close" in text
    assert "another process" not in text
    await first.close()
    assert [m.text for m in await second.search("honey", user_id="alice")] == ["bees make honey"]
    await second.close()
