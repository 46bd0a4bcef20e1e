"""The commands that write a store with an embedder, as an operator runs them: ``import`` and
``migrate`` (``--embedder``, else the store's own), ``doctor`` counting memories without vectors,
and ``reembed`` giving them theirs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from longterm import LongTermMemory
from longterm.cli import cli
from longterm.retrieval.embedders import HashingEmbedder, registry
from tests.conftest import make_session

HASHING = {"name": "hashing", "dim": 16}


class Custom(HashingEmbedder):
    """A user's own embedder, registered under a name the CLI resolves (``--embedder custom``)."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__(dim)
        self.id = "custom-e"


@pytest.fixture(autouse=True)
def _custom(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._factories, "custom", Custom)


def run(path: Path, *args: str) -> Result:
    """``longterm --config '{"path": PATH}' ARGS`` in this process."""
    return CliRunner().invoke(cli, ["--config", json.dumps({"path": str(path)}), *args], catch_exceptions=False)


def store(path: Path, embedder: object, *texts: str) -> None:
    memory = LongTermMemory(backend_config={"path": str(path)}, embedder=embedder, app_name="music")
    try:
        turns = [("user", t) for t in texts]
        memory.add_session_to_memory_sync(make_session("s0", app="music", user="ana", turns=turns))
    finally:
        memory.close_sync()


def transcript(tmp_path: Path, *texts: str) -> Path:
    file = tmp_path / "chat.jsonl"
    file.write_text("\n".join(json.dumps({"role": "user", "content": t}) for t in texts))
    return file


def without_vectors(path: Path) -> int:
    missing = "SELECT count(*) FROM records AS r WHERE NOT EXISTS (SELECT 1 FROM embeddings WHERE rowid = r.rowid)"
    with sqlite3.connect(path) as conn:
        return int(conn.execute(missing).fetchone()[0])


def doctor(path: Path, *args: str) -> tuple[int, dict[str, dict[str, str]]]:
    out = run(path, "doctor", "--json", *args)
    return out.exit_code, {r["check"]: r for r in json.loads(out.stdout[out.stdout.index("[") :])}


def test_import_into_a_store_with_a_built_in_embedder_gives_each_memory_its_vector(tmp_path: Path):
    path = tmp_path / "memory.db"
    store(path, HASHING, "I play the cello")
    out = run(
        path,
        "import",
        str(transcript(tmp_path, "My cello teacher is Ines", "I practise daily")),
        "--app",
        "music",
        "--user",
        "ana",
    )
    assert out.exit_code == 0, out.output
    assert "2 memories saved" in out.output and "pending" not in out.output
    assert without_vectors(path) == 0
    code, rows = doctor(path)
    assert code == 0 and rows["vectors"]["status"] == "ok", rows


def test_import_with_embedder_makes_a_new_store_with_vectors(tmp_path: Path):
    path = tmp_path / "memory.db"
    chat = transcript(tmp_path, "My cello teacher is Ines")
    out = run(path, "import", str(chat), "--app", "music", "--user", "ana", "--embedder", json.dumps(HASHING))
    assert out.exit_code == 0, out.output
    assert without_vectors(path) == 0
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM store_meta WHERE key = 'embedder:music'").fetchone() == (
            "hashing-v1-16",
        )


def test_vectors_left_pending_are_counted_by_doctor_and_made_by_reembed(tmp_path: Path):
    path = tmp_path / "memory.db"
    store(path, Custom(), "I play the cello")
    chat = transcript(tmp_path, "My cello teacher is Ines", "I practise daily")
    out = run(path, "import", str(chat), "--app", "music", "--user", "ana")
    assert out.exit_code == 0, out.output
    assert "vectors pending" in out.output and "'custom-e'" in out.output
    assert without_vectors(path) == 2

    code, rows = doctor(path)
    assert code == 0 and rows["vectors"]["status"] == "warn", rows  # waiting: the embedder embeds them when opened
    assert "2 memories have no vector" in rows["vectors"]["found"] and "'custom-e'" in rows["vectors"]["found"]
    assert "longterm reembed" in rows["vectors"]["fix"]

    refused = run(path, "reembed")  # the store's embedder is not built in: it must be named
    assert refused.exit_code == 1 and "'custom-e'" in refused.output and "--embedder" in refused.output
    out = run(path, "reembed", "--embedder", "custom")
    assert out.exit_code == 0, out.output
    assert "index 'music': 2 memories given their vectors" in out.output
    assert without_vectors(path) == 0
    code, rows = doctor(path)
    assert code == 0 and rows["vectors"]["status"] == "ok", rows


def test_memories_an_older_version_left_without_vectors_fail_doctor_until_reembed(tmp_path: Path):
    path = tmp_path / "memory.db"
    store(path, HASHING, "I play the cello", "My cello teacher is Ines", "I practise daily")
    with sqlite3.connect(path) as conn:  # what a save without the embedder left before this version: no vector, no mark
        conn.execute(
            "DELETE FROM embeddings WHERE rowid IN (SELECT rowid FROM records WHERE text != 'I play the cello')"
        )
    code, rows = doctor(path)
    assert code == 1 and rows["vectors"]["status"] == "fail", rows
    assert "2 memories have no vector" in rows["vectors"]["found"]

    out = run(path, "reembed", "--app", "music", "--user", "ana")  # the store's built-in embedder, loaded for it
    assert out.exit_code == 0, out.output
    assert "2 memories given their vectors" in out.output and without_vectors(path) == 0
    code, rows = doctor(path)
    assert code == 0 and rows["vectors"]["status"] == "ok", rows


def test_reembed_says_why_an_engine_that_cannot_list_memories_without_vectors_needs_none(tmp_path: Path):
    config = json.dumps({"path": str(tmp_path / "q"), "engine": "edge", "embedder": HASHING})
    memory = LongTermMemory(backend="qdrant", backend_config=json.loads(config), app_name="music")
    memory.add_session_to_memory_sync(make_session("s0", app="music", user="ana", turns=[("user", "I play the cello")]))
    memory.close_sync()
    out = CliRunner().invoke(cli, ["--backend", "qdrant", "--config", config, "reembed"], catch_exceptions=False)
    assert out.exit_code == 1
    assert "cannot list the memories saved without vectors" in out.output and "never go without" in out.output
    code_rows = CliRunner().invoke(cli, ["--backend", "qdrant", "--config", config, "doctor", "--json"])
    rows = {r["check"]: r for r in json.loads(code_rows.stdout[code_rows.stdout.index("[") :])}
    assert rows["vectors"]["status"] == "ok" and "not counted" in rows["vectors"]["found"]


def test_migrate_embeds_the_target_with_the_embedder_given(tmp_path: Path):
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    store(source, None, "I play the cello", "My cello teacher is Ines")
    to = json.dumps({"path": str(target)})
    out = run(source, "migrate", "--to-backend", "local", "--to-config", to, "--embedder", json.dumps(HASHING))
    assert out.exit_code == 0, out.output
    assert "copied 2 memories" in out.output and without_vectors(target) == 0
    both = json.dumps({"path": str(target), "embedder": "hashing"})
    clash = run(source, "migrate", "--to-backend", "local", "--to-config", both, "--embedder", "hashing")
    assert clash.exit_code == 2 and "not both" in clash.output
