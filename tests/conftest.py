from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from longterm.testing import make_session  # noqa: F401  (one copy; tests import it from here)
from tests.services import PROVIDERS
from tests.services.opensearch_node import SHARED_URL, OpenSearchNode

_shared: list[OpenSearchNode] = []


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, the controller launches one OpenSearch node for all its workers (they
    attach to it: ``SHARED_URL``, inherited when they start), and stops it at the end: one JVM's
    start, warm-up and heap a run instead of one a worker. It starts in the background while the
    workers collect; a worker waits for it only when a test needs it."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if os.environ.get(SHARED_URL):
        return  # an outer run's node
    node = OpenSearchNode()
    node.launch(Path(tempfile.mkdtemp(prefix="longterm-opensearch-")))
    os.environ[SHARED_URL] = node.url
    _shared.append(node)


def pytest_unconfigure(config: pytest.Config) -> None:
    for node in _shared:
        node.stop()
        os.environ.pop(SHARED_URL, None)
        shutil.rmtree(node.workdir, ignore_errors=True)
    _shared.clear()


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes under its own LONGTERM_HOME, never into the checkout."""
    home = tmp_path / "home"
    monkeypatch.setenv("LONGTERM_HOME", str(home))
    for var in ("LONGTERM_BACKEND", "LONGTERM_LOCAL_PATH", "LONGTERM_URI"):
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
