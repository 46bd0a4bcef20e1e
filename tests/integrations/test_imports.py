"""``import longterm`` loads none of these frameworks, and an integration whose framework is not
installed says which extra installs it."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from longterm import MissingDependencyError

INTEGRATIONS = [
    ("longterm.integrations.openai_agents", "agents", "openai-agents", "openai-agents"),
    ("longterm.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai-slim", "pydantic-ai"),
    ("longterm.integrations.adk", "google.adk", "google-adk", "adk"),
]


def test_import_longterm_and_a_memory_load_no_framework_of_these_integrations(tmp_path: Path) -> None:
    frameworks = ("agents", "pydantic_ai", "openai", "longterm.integrations")
    code = (
        "import json, sys\nfrom longterm import LongTermMemory\nLongTermMemory()\n"
        f"print(json.dumps([m for m in {frameworks!r} if m in sys.modules]))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGTERM_")}
    env["LONGTERM_HOME"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == []


@pytest.mark.parametrize(("module", "framework", "package", "extra"), INTEGRATIONS)
def test_an_integration_without_its_framework_names_its_extra(
    module: str, framework: str, package: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, framework, None)  # "not installed": importing it raises ImportError
    with pytest.raises(MissingDependencyError) as caught:
        importlib.import_module(module)
    assert f"pip install 'longterm[{extra}]'" in str(caught.value) and f"'{package}'" in str(caught.value)
