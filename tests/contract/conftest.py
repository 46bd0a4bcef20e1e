"""The contract suite's backend fixtures, for every engine in ``tests.services.PROVIDERS``.

The seam: ``provider_id`` (one per engine; narrow it with
``@pytest.mark.parametrize("provider_id", [...])``), ``backend_name``, ``backend_config`` (a
fresh store per test) and ``open_memory``/``memory`` (``longterm.testing.contract``'s, on that
store). ``test_contract.py`` runs the kit's ``ContractSuite`` with them; the fault suite
imports them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from longterm import LongTermMemory
from longterm.testing.contract import memories
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
def open_memory(backend_name: str, backend_config: dict[str, Any]) -> Iterator[Callable[..., LongTermMemory]]:
    """Open a LongTermMemory on this test's store; every call is a fresh 'process'."""
    with memories(backend_name, backend_config) as _open:
        yield _open


@pytest_asyncio.fixture
async def memory(open_memory: Callable[..., LongTermMemory]) -> Any:
    m = open_memory()
    yield m
    await m.close()
