"""One string for a store (``longterm.uri``): every form a ``longterm://`` URI takes, the one clear
error of a malformed one, and the three ways in (``LongTermMemory.from_uri``, ``LONGTERM_URI``,
the CLI's ``--uri``), where explicit arguments win."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from longterm import ConfigurationError, LongTermMemory
from longterm.cli import cli
from longterm.uri import parse_uri

FORMS = [
    ("longterm://", {"backend": "local", "backend_config": {}}),
    ("longterm:", {"backend": "local", "backend_config": {}}),
    ("longterm:///data/memory.db", {"backend": "local", "backend_config": {"path": "/data/memory.db"}}),
    ("longterm://localhost/data/m.db", {"backend": "local", "backend_config": {"path": "/data/m.db"}}),
    ("longterm:memory.db", {"backend": "local", "backend_config": {"path": "memory.db"}}),
    ("longterm:///my%20memories/m.db", {"backend": "local", "backend_config": {"path": "/my memories/m.db"}}),
    (
        "longterm:///m.db?app=travel&index=shared&timeout=5",
        {
            "backend": "local",
            "app_name": "travel",
            "index": "shared",
            "backend_config": {"path": "/m.db", "timeout": "5"},
        },
    ),
    (
        "longterm+redis://u:p%40ss@cache:6380/2?prefix=myapp:",
        {"backend": "redis", "backend_config": {"url": "redis://u:p%40ss@cache:6380/2", "prefix": "myapp:"}},
    ),
    ("longterm+rediss://cache", {"backend": "redis", "backend_config": {"url": "rediss://cache"}}),
    (
        "longterm+opensearch://admin:secret@search:9200?index=travel",
        {
            "backend": "opensearch",
            "index": "travel",
            "backend_config": {"url": "http://search:9200", "username": "admin", "password": "secret"},
        },
    ),
    ("longterm+opensearchs://search:9200", {"backend": "opensearch", "backend_config": {"url": "https://search:9200"}}),
    ("longterm+qdrant:///data/qdrant", {"backend": "qdrant", "backend_config": {"path": "/data/qdrant"}}),
    ("longterm+qdrant://", {"backend": "qdrant", "backend_config": {}}),
    (
        "longterm+qdrant://[::1]:6333?api_key=k",
        {"backend": "qdrant", "backend_config": {"url": "http://[::1]:6333", "api_key": "k"}},
    ),
    ("longterm+qdrants://q.example:6333", {"backend": "qdrant", "backend_config": {"url": "https://q.example:6333"}}),
]
MALFORMED = [
    ("", "non-empty string"),
    ("redis://cache:6379/0", "scheme is 'redis', not a longterm one"),
    ("memory.db", "has no scheme"),
    ("longterm+mongo://db", "scheme is 'longterm+mongo'"),
    ("longterm://data/memory.db", "write longterm:///data/memory.db for an absolute path"),
    ("longterm+redis:///0", "names no host"),
    ("longterm+redis://cache:port/0", "port is not a number"),
    ("longterm+redis://cache/db", "not a Redis database number"),
    ("longterm+opensearch://search/travel", "name the index with ?index="),
    ("longterm+qdrant://u:p@q:6333", "a Qdrant server takes ?api_key="),
    ("longterm:///m.db?colour=blue", "query key 'colour' is not one of the local backend's"),
    ("longterm:///m.db?path=/other.db", "query key 'path'"),
    ("longterm:///m.db?app=a&app=b", "gives 'app' twice"),
    ("longterm:///m.db?app", "not key=value pairs"),
    ("longterm:///m.db#top", "#fragment"),
]


@pytest.mark.parametrize(("uri", "arguments"), FORMS)
def test_every_form_is_read_into_the_facades_arguments(uri: str, arguments: dict) -> None:
    assert parse_uri(uri) == arguments


@pytest.mark.parametrize(("uri", "why"), MALFORMED)
def test_a_malformed_uri_is_one_error_that_says_why_and_shows_the_forms(uri: str, why: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_uri(uri)
    message = str(caught.value)
    assert why in message and "longterm:///path/to/memory.db" in message and "\n" not in message


def test_a_password_never_shows_in_the_error() -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_uri("longterm+redis://user:hunter2@cache:6379/x")
    assert "hunter2" not in str(caught.value) and "***" in str(caught.value)


async def test_from_uri_opens_the_store_named_and_its_arguments_win(tmp_path: Path) -> None:
    memory = LongTermMemory.from_uri(f"longterm://{tmp_path}/a.db?app=travel&timeout=5", backend_config={"timeout": 7})
    assert (memory.app_name, memory.index, memory.backend_config) == (
        "travel",
        "travel",
        {"path": f"{tmp_path}/a.db", "timeout": 7},
    )
    await memory.add("I like tea", user_id="alice")
    await memory.close()
    assert (tmp_path / "a.db").exists()
    with pytest.raises(ConfigurationError, match="timeout"):
        LongTermMemory.from_uri("longterm:///x.db?timeout=soon")  # values are checked as backend_config's


def test_longterm_uri_names_the_store_when_no_backend_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGTERM_URI", f"longterm://{tmp_path}/env.db?index=shared")
    monkeypatch.setenv("LONGTERM_BACKEND", "redis")  # the URI wins over the bare backend name
    memory = LongTermMemory()
    assert (memory.backend, memory.index, memory.backend_config) == ("local", "shared", {"path": f"{tmp_path}/env.db"})
    memory.close_sync()
    given = LongTermMemory(backend="local", backend_config={"path": f"{tmp_path}/mine.db"})  # explicit wins
    assert (given.index, given.backend_config) == ("default_app", {"path": f"{tmp_path}/mine.db"})
    given.close_sync()
    keys = LongTermMemory(backend_config={"timeout": 3}, index="own")  # keys and arguments win, key by key
    assert (keys.index, keys.backend_config) == ("own", {"path": f"{tmp_path}/env.db", "timeout": 3})
    keys.close_sync()
    monkeypatch.setenv("LONGTERM_URI", "longterm+nope://x")
    with pytest.raises(ConfigurationError, match="longterm\\+nope"):
        LongTermMemory()


def test_the_cli_takes_uri_or_longterm_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "chat.json").write_text(json.dumps([{"role": "user", "content": "I like green tea"}]))
    uri = f"longterm://{tmp_path}/cli.db"
    runner = CliRunner()
    done = runner.invoke(cli, ["--uri", uri, "import", str(tmp_path / "chat.json"), "--app", "a", "--user", "u"])
    assert done.exit_code == 0, done.output
    stats = runner.invoke(cli, ["--uri", uri, "stats", "--json"])
    assert json.loads(stats.output) == [{"index": "a", "app": "a", "user": "u", "memories": 1}]
    monkeypatch.setenv("LONGTERM_URI", uri)
    found = runner.invoke(cli, ["search", "green tea", "--app", "a", "--user", "u", "--json"])
    assert found.exit_code == 0 and "I like green tea" in found.output
    other = runner.invoke(cli, ["--backend", "local", "--config", json.dumps({"path": f"{tmp_path}/x.db"}), "stats"])
    assert "x.db" in other.output and "cli.db" not in other.output  # a typed --backend wins over LONGTERM_URI
    both = runner.invoke(cli, ["--uri", uri, "--backend", "local", "stats"])
    assert both.exit_code == 2 and "pass --uri or --backend, not both" in both.output
    bad = runner.invoke(cli, ["--uri", "longterm://host/x.db", "stats"])
    assert bad.exit_code == 1 and bad.output.startswith("error: invalid longterm URI") and bad.output.count("\n") == 1
