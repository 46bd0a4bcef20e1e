"""Qdrant-specific behaviour: embedded mode's single-process lock, hybrid fusion modes,
embedder checks, configuration. (No Qdrant server runs on this machine: the url path is
exercised only against a closed port; see README.)"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from longterm import BackendUnavailableError, ConfigurationError, LongTermMemory
from longterm.backends.qdrant import QdrantBackend, collection_name
from longterm.backends.qdrant_edge import QdrantEdgeBackend
from longterm.retrieval.embedders import HashingEmbedder
from tests.conftest import make_session
from tests.services.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]


async def test_second_process_gets_a_clear_error_not_a_hang(tmp_path: Path):
    path = str(tmp_path / "q")
    memory = LongTermMemory(backend="qdrant", backend_config={"path": path})
    await memory.add_session_to_memory(make_session())
    code = (
        "import sys; from longterm import LongTermMemory, BackendUnavailableError\n"
        f"m = LongTermMemory(backend='qdrant', backend_config={{'path': {path!r}}})\n"
        "try:\n    m.count_sync(app_name='app', user_id='u1')\nexcept BackendUnavailableError as e:\n    print(e); sys.exit(3)"
    )
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, out.stderr
    assert "open in another process" in out.stdout and "url" in out.stdout
    assert time.monotonic() - start < 30
    await memory.close()


async def test_unreachable_server_is_a_clear_error():
    memory = LongTermMemory(backend="qdrant", backend_config={"url": f"http://127.0.0.1:{free_port()}", "timeout": 2})
    with pytest.raises(BackendUnavailableError, match=r"cannot reach Qdrant at http://127\.0\.0\.1:\d+"):
        await memory.search_memory(app_name="a", user_id="u", query="hello")
    await memory.close()


@pytest.mark.parametrize("engine", ["edge", "local"])
@pytest.mark.parametrize("fusion", ["convex", "rrf"])
async def test_hybrid_search(tmp_path: Path, fusion: str, engine: str):
    cfg = {"path": str(tmp_path / "q"), "fusion": fusion, "engine": engine}
    memory = LongTermMemory(backend="qdrant", backend_config=cfg, embedder=HashingEmbedder(64))
    await memory.add_session_to_memory(make_session(turns=[("user", "bees make honey in summer"), ("user", "my car is blue")]))
    await memory.add_session_to_memory(make_session(user="other", turns=[("user", "other user's bees and honey")]))
    res = await memory.search_memory(app_name="app", user_id="u1", query="honey bees")
    assert res.memories[0].content.parts[0].text == "bees make honey in summer"
    assert all("other user" not in m.content.parts[0].text for m in res.memories)
    await memory.close()


@pytest.mark.parametrize("engine", ["edge", "local"])
async def test_embedder_dimension_is_checked(tmp_path: Path, engine: str):
    cfg = {"path": str(tmp_path / "q"), "engine": engine}
    m = LongTermMemory(backend="qdrant", backend_config=cfg, embedder=HashingEmbedder(64))
    await m.add_session_to_memory(make_session())
    await m.close()
    other = LongTermMemory(backend="qdrant", backend_config=cfg, embedder=HashingEmbedder(32))
    with pytest.raises(ConfigurationError, match="Vectors of different embedders never mix"):
        await other.count(app_name="app", user_id="u1")
    await other.close()


def test_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LONGTERM_QDRANT_URL", raising=False)
    b = QdrantBackend.from_config({"index": "x"}, root=tmp_path)
    assert isinstance(b, QdrantEdgeBackend) and b.path == tmp_path / "qdrant"
    b = QdrantBackend.from_config({"index": "x", "engine": "local"}, root=tmp_path)
    assert b.embedded and b.path == str(tmp_path / "qdrant")
    monkeypatch.setenv("LONGTERM_QDRANT_URL", "http://qdrant:6333")
    monkeypatch.setenv("LONGTERM_QDRANT_API_KEY", "k")
    b = QdrantBackend.from_config({"index": "x"}, root=tmp_path)
    assert (b.url, b.api_key, b.embedded) == ("http://qdrant:6333", "k", False)
    assert QdrantBackend.from_config({"host": "h", "port": 1}, root=tmp_path).url == "http://h:1"
    assert collection_name("longterm_", "shop") == "longterm_shop"
    assert collection_name("longterm_", "a/b") != collection_name("longterm_", "a_b")
    with pytest.raises(ConfigurationError, match="'pth'"):
        LongTermMemory(backend="qdrant", backend_config={"pth": "x"})
