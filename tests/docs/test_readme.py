"""The README is a door, not the manual: short, the two commands first, the quick start near the
top, and one version everywhere."""

from __future__ import annotations

import re

from click.testing import CliRunner

import longterm
from longterm.cli import cli
from tests.docs.blocks import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
#: About 200 lines: past that, the README is a manual again; the docs are the manual.
MOST_LINES = 210


def test_the_readme_is_short() -> None:
    assert len(README) <= MOST_LINES, len(README)


def test_the_two_commands_come_first() -> None:
    assert README[0] == "# longterm"
    fence = README.index("```bash")
    assert fence <= 3
    first, second = README[fence + 1], README[fence + 2]
    assert first.startswith("python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/longterm demo")
    assert second.startswith("bash scripts/test")
    assert README[fence + 3] == "```"


def test_the_quick_start_is_within_the_first_60_lines() -> None:
    heading = README.index("## Quick start")
    assert heading < 60
    code = README.index("```python", heading)
    assert code < 60 and "from longterm import LongTermMemory" in README[code + 1]


def test_one_version_everywhere() -> None:
    """pyproject.toml, longterm.__version__, `longterm --version`, the newest release of the
    changelog and the README name one version."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    [version] = re.findall(r'(?m)^version = "([^"]+)"$', pyproject)
    assert longterm.__version__ == version
    out = CliRunner().invoke(cli, ["--version"], prog_name="longterm")
    assert out.exit_code == 0 and out.output.strip() == f"longterm, version {version}", out.output
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"(?m)^## (\d+\.\d+\.\d+)\b", changelog)
    assert releases and releases[0] == version, releases
    assert not re.search(r"(?m)^## Unreleased", changelog), "name the release: ## X.Y.Z (unreleased)"
    assert f"Version {version}" in "\n".join(README)
