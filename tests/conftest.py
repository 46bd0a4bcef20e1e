from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from longterm.testing import make_session  # noqa: F401  (one copy; tests import it from here)
from tests.services import PROVIDERS


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes under its own LONGTERM_HOME, never into the checkout."""
    home = tmp_path / "home"
    monkeypatch.setenv("LONGTERM_HOME", str(home))
    for var in ("LONGTERM_BACKEND", "LONGTERM_LOCAL_PATH"):
        monkeypatch.delenv(var, raising=False)
    return home


_started: dict[str, Any] = {}


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory):
    """Start engines lazily, once per session; stop them all at the end."""

    def get(name: str):
        provider = PROVIDERS[name]
        if name not in _started:
            provider.start(tmp_path_factory.mktemp(f"svc-{name}"))
            _started[name] = provider
        return provider

    yield get
    for provider in _started.values():
        provider.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Nothing in this suite may skip: a skipped backend test is a failed one."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"test was skipped, which this suite treats as a failure: {report.longrepr}"
