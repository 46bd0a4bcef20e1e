from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from longterm import LongTermMemory
from tests.services import PROVIDERS


@pytest.fixture(params=sorted(PROVIDERS))
def provider_id(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def backend_name(provider_id: str) -> str:
    return PROVIDERS[provider_id].name


@pytest.fixture
def backend_config(provider_id: str, services, tmp_path: Path) -> dict[str, Any]:
    return services(provider_id).config(tmp_path)


@pytest.fixture
def open_memory(backend_name: str, backend_config: dict[str, Any]) -> Callable[..., LongTermMemory]:
    """Open a LongTermMemory on this test's store; every call is a fresh 'process'."""
    opened: list[LongTermMemory] = []

    def _open(**kwargs: Any) -> LongTermMemory:
        m = LongTermMemory(backend=backend_name, backend_config=dict(backend_config), **kwargs)
        opened.append(m)
        return m

    yield _open


@pytest.fixture
async def memory(open_memory) -> LongTermMemory:
    m = open_memory()
    yield m
    await m.close()
