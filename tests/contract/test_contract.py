"""The backend contract: what "a backend works" means, run over every engine in
``tests.services.PROVIDERS`` (``provider_id`` in conftest). The tests are the kit's
(``longterm.testing.contract``), so a third-party backend passes the very same suite."""

from __future__ import annotations

from typing import Any

import pytest

from longterm.core import registry
from longterm.testing.contract import ContractSuite
from tests.services import PROVIDERS


def test_every_registered_backend_has_a_test_engine():
    missing = set(registry.BUILTINS) - {p.name for p in PROVIDERS.values()}
    assert not missing, f"backends without a test engine: {missing}"


class TestContract(ContractSuite):
    """``backend_name`` and ``backend_config`` come from conftest: every engine in PROVIDERS."""

    @pytest.fixture
    def home_config(self, backend_config: dict[str, Any]) -> dict[str, Any] | None:
        """An embedded engine's store is under LONGTERM_HOME unless its config names a path."""
        if "path" not in backend_config:
            return None
        return {k: v for k, v in backend_config.items() if k != "path"}
