"""``longterm ui`` as an operator runs it: a subprocess on a port of its choosing, driven by a
real headless Chromium (selenium) and by plain HTTP (httpx).

``write_store(path)`` fills a local store with the test data: hostile memories (a
``<script>``, with hostile metadata, control characters, a right-to-left override, a 1 MB text, ids holding ``/``,
``%``, spaces and Chinese), 120 ordinary ones to page through, and a fact superseded by
another (fact records written directly, as the fact layer writes them). ``UIServer`` starts
the real command (``longterm ... ui --port 0``) and reads the URL it prints; ``browser`` is
one Chromium per module. Everything is bounded: the server must print its URL within
``START_SECONDS``, pages load within ``PAGE_SECONDS``, HTTP calls time out.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longterm import LongTermMemory
from longterm.facts.model import Fact
from longterm.records import MemoryRecord, Scope
from longterm.testing import make_record
from tests.pipes import PipeLines

START_SECONDS = 30
PAGE_SECONDS = 30
APP = "travel"
#: Memories of USER: 120 ordinary, 4 hostile, 1 in session "..", 2 facts.
ALICE_COUNT = 127
USER = "alice"
OTHER = "b/o b% 中文"
HOSTILE_SESSION = "a/b %中文 x"
SCRIPT = '<script>alert("x")</script><img src=x onerror=alert(2)> hello'
RTL = "abc\u202edef RTL-MARKER"
CONTROLS = "bell\x07 esc\x1b[31m red\x7f del\x85 CTL-MARKER"
BIG = "big-text " + "y" * 1_000_000
#: The metadata of the SCRIPT memory: markup, and names the library uses for its own fields.
HOSTILE_META = {
    "note": "</script><img src=x onerror=alert(3)>",
    "backend": "mine",
    "score": "high",
    "n": [1, {"a": None}],
}
ADMIN_TOKEN = "admin-token-0123456789abcdef"
ALICE_TOKEN = "alice-token-0123456789abcdef"
LAUNCH = "from longterm.cli import cli; from longterm.ui.cli import ui; cli.add_command(ui); cli(prog_name='longterm')"


def records() -> list[MemoryRecord]:
    """The test data (see the module docstring)."""
    recs = [
        make_record(
            f"ordinary memory number {i} about Lisbon",
            app=APP,
            user=USER,
            session=f"trip-{i % 3}",
            event=f"e{i}",
            timestamp=1_700_000_000.0 + i * 60,
            author="user",
            role="user",
        )
        for i in range(120)
    ]
    hostile = [(SCRIPT, HOSTILE_SESSION), (RTL, "rtl"), (CONTROLS, "ctl"), (BIG, "big")]
    for i, (text, session) in enumerate(hostile):
        meta = HOSTILE_META if text == SCRIPT else {}
        recs.append(
            make_record(
                text, app=APP, user=USER, session=session, event=f"h{i}", timestamp=1_800_000_000.0 + i, metadata=meta
            )
        )
    recs.append(make_record("dots session", app=APP, user=USER, session="..", event="d", timestamp=1.75e9))
    recs.append(make_record("bob's own secret", app=APP, user=OTHER, session="s", event="e", timestamp=1.7e9))
    scope = Scope(app_name=APP, user_id=USER)
    paris = Fact.new(scope, "user", "The user lives in Paris", [recs[0]])
    lisbon = Fact.new(scope, "user", "The user lives in Lisbon", [recs[5]])
    paris.supersede(recs[5].timestamp, lisbon.id, [recs[5]], "updated")
    return [*recs, paris.to_record(), lisbon.to_record()]


def write_store(path: Path) -> Path:
    async def go() -> None:
        memory = LongTermMemory(backend="local", backend_config={"path": str(path)}, app_name=APP)
        try:
            await memory.upsert_records(records())
        finally:
            await memory.close()

    asyncio.run(go())
    return path


def token_file(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "tokens": [
                    {"user": USER, "token": ALICE_TOKEN},
                    {"user": "ops", "token": ADMIN_TOKEN, "admin": True},
                ]
            }
        )
    )
    return path


class UIServer:
    """``longterm --config {"path": store} ui --port 0 ARGS`` in a subprocess."""

    def __init__(self, store: Path, home: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")}
        env["LONGTERM_HOME"] = str(home)
        cmd = [sys.executable, "-c", LAUNCH, "--config", json.dumps({"path": str(store)}), "ui", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True)
        self.url = self._wait_for_url()

    def _wait_for_url(self) -> str:
        assert self.proc.stderr is not None
        output = PipeLines(self.proc.stderr)  # not select + readline: that misses lines printed together
        deadline, seen = time.monotonic() + START_SECONDS, []
        while time.monotonic() < deadline:
            try:
                line = output.next(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break
            if not line:
                break
            seen.append(line)
            if line.startswith("longterm ui: serving on "):
                return line.split("serving on ", 1)[1].split()[0].rstrip("/")
        self.stop()
        raise AssertionError(f"longterm ui printed no URL within {START_SECONDS}s: {''.join(seen)!r}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def run_ui(home: Path, *args: str, timeout: float = START_SECONDS) -> subprocess.CompletedProcess[str]:
    """``longterm ui ARGS`` expected to exit (a refusal): its status and output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")}
    env["LONGTERM_HOME"] = str(home)
    cmd = [sys.executable, "-c", LAUNCH, "ui", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("ui-store") / "memory.db")


@pytest.fixture(scope="module")
def readonly(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UIServer]:
    """One read-only server over the shared store, for the tests that only look."""
    server = UIServer(store, tmp_path_factory.mktemp("ui-home"))
    yield server
    server.stop()


@pytest.fixture
def erasable(tmp_path: Path) -> Iterator[UIServer]:
    """A server started with --allow-erase over a store of its own."""
    server = UIServer(write_store(tmp_path / "memory.db"), tmp_path / "home2", "--allow-erase")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, through chromium-driver. Missing, the test fails saying so."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        pytest.fail(f"selenium is not installed ({exc}): .venv/bin/pip install selenium")
    binary, driver_path = "/usr/bin/chromium", "/usr/bin/chromedriver"
    for need in (binary, driver_path):
        if not Path(need).exists():
            pytest.fail(f"{need} is missing: apt-get install -y chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(options=options, service=Service(driver_path))
    except Exception as exc:
        pytest.fail(f"cannot start headless Chromium: {type(exc).__name__}: {exc}")
    driver.set_page_load_timeout(PAGE_SECONDS)
    driver.set_script_timeout(PAGE_SECONDS)
    yield driver
    driver.quit()
