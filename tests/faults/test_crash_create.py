"""kill -9 at each step of making a new store, then open it again: it opens, saves and answers.

The seam: ``_maker.py`` opens a store that does not exist yet and dies by SIGKILL at one step
of its making (``core.making.step`` for embedded Qdrant; SQLite's own steps for the local
store), or of a purge's replacement of its shard, then a second run opens the same path, saves
one memory and finds it. Before the
making was atomic, embedded Qdrant killed inside its shard's creation (the write-ahead log
written, ``edge_config.json`` not) refused every later open with "edge config is not provided
and no segments were loaded".
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import ROOT, helper

EDGE_STEPS = (
    "edge-half",
    "edge-wal",
    "created",
    "indexed app_name",
    "indexed timestamp",
    "flushed",
    "built",
    "moved",
)
LOCAL_STEPS = ("file", "wal", "schema")
PURGE_STEPS = ("purge:replacement built", "purge:replaced moved aside", "purge:replacement moved")


def _run(backend: str, config: dict[str, Any], at: str) -> subprocess.CompletedProcess[str]:
    cmd = helper("_maker", backend, json.dumps(config), at)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _killed_then_opened(backend: str, config: dict[str, Any], at: str) -> None:
    killed = _run(backend, config, at)
    assert killed.returncode == -signal.SIGKILL, f"the maker was not killed at {at!r}: {killed.stderr[-2000:]}"
    again = _run(backend, config, "none")
    assert again.returncode == 0, f"killed at {at!r}, the store did not open again: {again.stderr[-3000:]}"
    assert again.stdout.split() == ["ok", "1", "1"], again.stdout


@pytest.mark.parametrize("at", EDGE_STEPS)
def test_embedded_qdrant_killed_while_made_opens_again(at: str, tmp_path: Path):
    config = {"path": str(tmp_path / "qdrant"), "engine": "edge"}
    _killed_then_opened("qdrant", config, at)
    assert not list((tmp_path / "qdrant" / "default_app").glob(".shard.making-*")), "a making's leftover stayed"


@pytest.mark.parametrize("at", LOCAL_STEPS)
def test_local_store_killed_while_made_opens_again(at: str, tmp_path: Path):
    _killed_then_opened("local", {"path": str(tmp_path / "memory.db")}, at)


@pytest.mark.parametrize("at", PURGE_STEPS)
def test_embedded_qdrant_killed_while_purged_keeps_its_memories(at: str, tmp_path: Path):
    """A purge rebuilds the shard beside it and swaps it in: killed at each step, the store opens
    with the memory it held (the old shard put back, or the new one kept), and nothing beside it."""
    config = {"path": str(tmp_path / "qdrant"), "engine": "edge"}
    _killed_then_opened("qdrant", config, at)
    index = tmp_path / "qdrant" / "default_app"
    assert not [p.name for p in index.iterdir() if p.name.startswith(".shard.")], "a purge's leftover stayed"
