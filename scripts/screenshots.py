"""Screenshots of ``longterm ui``'s main pages, for docs/screenshots/ (README and docs/ui.md).

Usage: ``.venv/bin/python scripts/screenshots.py [OUT_DIR]`` (default ``docs/screenshots``).
Builds a demo store in a temporary directory (two users, a few sessions, a fact superseded by
another, a hostile ``<script>`` memory), starts ``longterm ui --allow-erase`` on it with
``--port 0``, and saves PNGs through Debian's headless Chromium (``apt-get install chromium
chromium-driver``; ``pip install selenium``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from longterm import LongTermMemory  # noqa: E402
from longterm.facts.model import Fact  # noqa: E402
from longterm.records import Scope  # noqa: E402
from longterm.testing import make_record  # noqa: E402

LAUNCH = "from longterm.cli import cli; from longterm.ui.cli import ui; cli.add_command(ui); cli(prog_name='longterm')"
T0 = 1_767_000_000.0
CHATS = {
    "trip-planning": [
        "I'm planning a trip to Lisbon in May",
        "My passport expires in August 2027",
        "I prefer window seats on long flights",
        "Book somewhere near the Alfama district please",
    ],
    "diet": ["I'm vegetarian, no fish either", "I love Thai food, the spicier the better"],
    "moving": ["I live in Paris", "Big news: I moved to Lisbon last week!", "The new flat has a tiny balcony"],
}
PAGES = {
    "overview": "/",
    "memories": "/apps/travel/users/alice",
    "search": "/apps/travel/users/alice?q=passport+Lisbon",
    "facts": "/apps/travel/users/alice/facts",
    "session": "/apps/travel/users/alice/sessions/moving",
    "erase": "/apps/travel/users/alice/erase?session=diet",
}


def demo_store(path: Path) -> None:
    recs, t = [], T0
    for session, lines in CHATS.items():
        for i, line in enumerate(lines):
            t += 3600
            recs.append(
                make_record(line, app="travel", user="alice", session=session, event=f"{session}-{i}", timestamp=t)
            )
    recs.append(
        make_record('<script>alert("hi")</script> shown as text', app="travel", user="alice", session="odd", event="x")
    )
    recs += [make_record(f"Bob asked about flight {i}", app="travel", user="bob", event=f"b{i}") for i in range(3)]
    scope = Scope(app_name="travel", user_id="alice")
    paris = Fact.new(scope, "user", "The user lives in Paris", [recs[6]])
    lisbon = Fact.new(scope, "user", "The user lives in Lisbon", [recs[7]])
    paris.supersede(recs[7].timestamp, lisbon.id, [recs[7]], "updated")
    veg = Fact.new(scope, "user", "The user is vegetarian", [recs[4]])
    recs += [paris.to_record(), lisbon.to_record(), veg.to_record()]

    async def go() -> None:
        async with LongTermMemory(backend="local", backend_config={"path": str(path)}, app_name="travel") as m:
            await m.upsert_records(recs)

    asyncio.run(go())


def main() -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="longterm-shots-") as tmp:
        store = Path(tmp) / "memory.db"
        demo_store(store)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")}
        env["LONGTERM_HOME"] = tmp
        config = json.dumps({"path": str(store)})
        cmd = [sys.executable, "-c", LAUNCH, "--config", config, "ui", "--port", "0", "--allow-erase"]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            if "serving on " not in line:
                raise SystemExit(f"longterm ui did not start: {line}")
            base = line.split("serving on ", 1)[1].split()[0].rstrip("/")
            options = webdriver.ChromeOptions()
            options.binary_location = "/usr/bin/chromium"
            for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800"):
                options.add_argument(arg)
            driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
            driver.set_page_load_timeout(30)
            try:
                for name, path in PAGES.items():
                    driver.get(base + path)
                    driver.save_screenshot(str(out / f"{name}.png"))
                    print(out / f"{name}.png")
                facts_page = base + PAGES["facts"]
                driver.get(facts_page)
                paris = driver.find_element("xpath", "//tr[contains(., 'lives in Paris')]")
                paris.find_element("link text", "history").click()
                driver.save_screenshot(str(out / "fact-history.png"))
                print(out / "fact-history.png")
            finally:
                driver.quit()
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
