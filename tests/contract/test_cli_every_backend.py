"""``longterm stats``, ``search`` and ``migrate`` on every engine, without ``--app``/``--user``.

Two users are saved through the API into two indices, as ``LongTermMemory(app_name=...)``
saves them (index = app). ``stats`` lists both, each with its index and count; ``search`` finds
a user in the index holding them; ``migrate`` into a fresh local store copies every user of
every index, each index under its own name. Before, ``stats`` and ``migrate`` stopped on
redis, opensearch, qdrant and mem0 ("cannot list users; pass --app and --user"), and the CLI
looked in the default index only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from longterm import LongTermMemory
from longterm.cli import cli
from tests.conftest import make_session

ALICE = [
    ("travel", "alice", "I'm vegetarian and I love Thai food"),
    ("travel", "alice", "My flight leaves on March 3rd"),
]
BOB = [("music", "bob", "I play the cello on Sundays")]
EXPECTED = [
    {"index": "music", "app": "music", "user": "bob", "memories": 1},
    {"index": "travel", "app": "travel", "user": "alice", "memories": 2},
]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def ok(*args: str) -> str:
    r = run(*args)
    assert r.exit_code == 0, f"{args}: {r.output}"
    assert "Traceback" not in r.output
    return r.stdout


def save(name: str, config: dict[str, Any], said: list[tuple[str, str, str]], **where: Any) -> None:
    """Save each (app, user, text) as its own session through the API, then close the store."""
    for i, (app, user, text) in enumerate(said):
        memory = LongTermMemory(backend=name, backend_config=config, **(where or {"app_name": app}))
        try:
            session = make_session(f"s{i}-{user}", app=app, user=user, turns=[("user", text)])
            assert memory.add_session_to_memory_sync(session).saved == 1
        finally:
            memory.close_sync()


def rows(*store: str) -> list[dict[str, Any]]:
    return sorted(json.loads(ok(*store, "stats", "--json")), key=lambda r: (r["index"], r["app"], r["user"]))


def found(*store_and_args: str) -> list[str]:
    return [h["content"]["parts"][0]["text"] for h in json.loads(ok(*store_and_args, "--json"))]


@pytest.fixture
def store(backend_name: str, backend_config: dict[str, Any]) -> tuple[str, ...]:
    """The CLI's options for this test's store, with alice and bob saved into two indices."""
    save(backend_name, backend_config, ALICE + BOB)
    return ("--backend", backend_name, "--config", json.dumps(backend_config))


def test_stats_lists_every_index_with_its_users_and_counts(store: tuple[str, ...]) -> None:
    assert rows(*store) == EXPECTED
    table = ok(*store, "stats")
    assert "total: 3 memories for 2 users in 2 indices" in table
    assert "travel" in table and "alice" in table and "music" in table and "bob" in table
    assert rows(*store, "--index", "music") == EXPECTED[:1]
    searched = found(*store, "search", "Thai food", "--app", "travel", "--user", "alice")
    assert searched[0] == "I'm vegetarian and I love Thai food"


def test_migrate_copies_every_user_of_every_index_into_a_fresh_local_store(
    store: tuple[str, ...], tmp_path: Path
) -> None:
    target = ("--backend", "local", "--config", json.dumps({"path": str(tmp_path / "copy" / "memory.db")}))
    out = ok(*store, "migrate", "--to-backend", "local", "--to-config", target[3])
    assert "copied 3 memories of 2 users from indices 'music', 'travel'" in out
    assert rows(*target) == EXPECTED
    assert found(*target, "search", "cello", "--app", "music", "--user", "bob") == ["I play the cello on Sundays"]
    ok(*store, "migrate", "--to-backend", "local", "--to-config", target[3])  # again: the same ids
    assert rows(*target) == EXPECTED


def test_a_user_in_several_indices_is_named_and_the_index_chosen(
    store: tuple[str, ...], backend_name: str, backend_config: dict[str, Any]
) -> None:
    save(backend_name, backend_config, [("travel", "alice", "My passport expires in August")], index="spare")
    r = run(*store, "search", "passport", "--app", "travel", "--user", "alice")
    assert r.exit_code == 1 and "Traceback" not in r.output
    [line] = r.stderr.splitlines()
    assert line.startswith("error: ") and "'spare', 'travel'" in line and "--index" in line, line
    chosen = found(*store, "--index", "spare", "search", "passport", "--app", "travel", "--user", "alice")
    assert chosen == ["My passport expires in August"]


def test_delete_with_purge_erases_and_says_what_the_engine_did(store: tuple[str, ...]) -> None:
    out = ok(*store, "delete", "--app", "travel", "--user", "alice", "--yes", "--purge")
    assert "deleted 2 memories" in out
    [said] = [line for line in out.splitlines() if line.startswith("purged: ") or "has no purge" in line]
    # each engine says what it did: Redis, OpenSearch and embedded Qdrant (edge) compact their
    # files, the others say why not
    compacts = store[1] in ("redis", "opensearch") or (store[1] == "qdrant" and '"engine": "local"' not in store[-1])
    assert said.endswith("compacted: what erases deleted is gone from its files") == compacts, out
    assert "has no purge" not in said, out
    assert found(*store, "search", "Thai food", "--app", "travel", "--user", "alice") == []
    assert rows(*store) == EXPECTED[:1]
