"""The kit as a third party uses it: the whole contract suite (``longterm.testing.contract``)
on the template engine ``examples/dict_backend.py``, registered at run time as "dict"."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longterm.backends import register, unregister
from longterm.testing.contract import ContractSuite

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "dict_backend.py"

_spec = importlib.util.spec_from_file_location("dict_backend", EXAMPLE)
assert _spec is not None and _spec.loader is not None
dict_backend = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = dict_backend
_spec.loader.exec_module(dict_backend)


class TestDictBackend(ContractSuite):
    processes = False  # a dict store lives in one process's memory

    @pytest.fixture
    def backend_name(self) -> Iterator[str]:
        register("dict", dict_backend.DictBackend, replace=True)
        yield "dict"
        unregister("dict")  # later tests see the registry as shipped

    @pytest.fixture
    def backend_config(self, tmp_path: Path) -> dict[str, Any]:
        return {"store": str(tmp_path / "store")}

    @pytest.fixture
    def home_config(self) -> dict[str, Any]:
        return {}  # no store named: the store is the LONGTERM_HOME directory


def test_the_example_runs_as_a_script(tmp_path: Path):
    env = {**os.environ, "LONGTERM_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "saved 1 of 1 new events" in out.stdout
    assert "found: I moved to Lisbon last spring" in out.stdout
