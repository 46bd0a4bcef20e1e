"""The facade's seams: a memory is a ``MemoryPort``, ``MemoryService`` works alone as ADK's memory
service, ``MemorySettings`` validates alone, and the blocking twins are the async methods' own."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from longterm import ConfigurationError, LongTermMemory
from longterm.memory import MemoryService, MemorySettings
from longterm.ports import MemoryPort
from tests.conftest import make_session


async def test_a_memory_is_a_port_and_its_members_answer(tmp_path: Path):
    m = LongTermMemory(backend_config={"path": str(tmp_path / "m.db")})
    assert isinstance(m, MemoryPort)
    assert m.is_open and m.facts_error is None and m.event_ledger is m.backend_instance
    assert m.scope("app", "u1").user_id == "u1"
    await m.close()
    assert not m.is_open


async def test_the_service_alone_saves_searches_erases_and_closes(tmp_path: Path):
    service = MemoryService(backend_config={"path": str(tmp_path / "m.db")})
    assert isinstance(service, MemoryPort) and not hasattr(service, "add")
    assert (await service.add_session_to_memory(make_session(turns=[("user", "plum jam")]))).saved == 1
    found = await service.search_memory(app_name="app", user_id="u1", query="plum")
    assert [e.custom_metadata["backend"] for e in found.memories] == ["local"]
    assert await service.delete_memories(app_name="app", user_id="u1") == 1
    await service.close()


def test_settings_validate_alone_and_open_nothing():
    settings = MemorySettings(backend="Redis", top_k=3, auto_save_memory_policy="all")
    assert settings.backend == "redis" and settings.index == "default_app"
    assert settings.auto_save_memory_policy.preset == "all"
    settings.index = "other"  # not open: nothing is fixed yet
    assert settings.model_copy().index == "other"
    with pytest.raises(ConfigurationError, match="invalid LongTermMemory argument 'top_k'"):
        MemorySettings(top_k=True)


def test_each_blocking_twin_has_its_methods_parameters():
    for name, twin in inspect.getmembers(LongTermMemory, inspect.isfunction):
        if name.endswith("_sync") and name != "close_sync":
            method = getattr(LongTermMemory, name.removesuffix("_sync"))
            assert inspect.iscoroutinefunction(method) and not inspect.iscoroutinefunction(twin), name
            assert inspect.signature(twin) == inspect.signature(method), name
            assert twin.__name__ == name
