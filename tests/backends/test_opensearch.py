"""OpenSearch-specific behaviour against the real node the test setup starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from longterm import BackendUnavailableError, ConfigurationError, LongTermMemory
from longterm.backends.opensearch import OpenSearchBackend, OpenSearchConfig, index_name, resolve_hosts
from longterm.retrieval.embedders import HashingEmbedder
from tests.conftest import make_session
from tests.services.redis_server import free_port


@pytest.fixture
def os_cfg(services, tmp_path: Path) -> dict:
    return services("opensearch").config(tmp_path)


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
async def test_hybrid_search_with_knn(os_cfg: dict, fusion: str):
    memory = LongTermMemory(backend="opensearch", backend_config={**os_cfg, "fusion": fusion}, embedder=HashingEmbedder(64))
    await memory.add_session_to_memory(make_session(turns=[("user", "bees make honey in summer"), ("user", "my car is blue")]))
    await memory.add_session_to_memory(make_session(user="other", turns=[("user", "other user's bees and honey")]))
    res = await memory.search_memory(app_name="app", user_id="u1", query="honey bees")
    assert res.memories[0].content.parts[0].text == "bees make honey in summer"
    assert set(res.memories[0].custom_metadata["arms"]) == {"fulltext", "vector"}
    assert all("other user" not in m.content.parts[0].text for m in res.memories)
    await memory.close()


async def test_any_user_id_shares_one_index(os_cfg: dict):
    memory = LongTermMemory(backend="opensearch", backend_config=os_cfg)
    for user in ["Alice", "a@b.com", "user 1", "ÜNÏCØDÉ"]:
        await memory.add_session_to_memory(make_session(user=user, turns=[("user", f"note of {user}")]))
    for user in ["Alice", "a@b.com", "user 1", "ÜNÏCØDÉ"]:
        res = await memory.search_memory(app_name="app", user_id=user, query="note")
        assert [m.content.parts[0].text for m in res.memories] == [f"note of {user}"]
    await memory.close()


async def test_embedder_change_is_refused(os_cfg: dict):
    m = LongTermMemory(backend="opensearch", backend_config=os_cfg, embedder=HashingEmbedder(64))
    await m.add_session_to_memory(make_session())
    await m.close()
    other = LongTermMemory(backend="opensearch", backend_config=os_cfg, embedder=HashingEmbedder(32))
    with pytest.raises(ConfigurationError, match="Vectors of different embedders never mix"):
        await other.count(app_name="app", user_id="u1")
    await other.close()


async def test_unreachable_cluster_is_a_clear_error():
    memory = LongTermMemory(backend="opensearch", backend_config={"url": f"http://127.0.0.1:{free_port()}", "timeout": 2})
    with pytest.raises(BackendUnavailableError, match=r"cannot reach OpenSearch at http://127\.0\.0\.1:\d+"):
        await memory.search_memory(app_name="a", user_id="u", query="hello")
    await memory.close()


def test_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    for var in ("LONGTERM_OPENSEARCH_URL", "DATABASE_OPENSEARCH_HOST", "DATABASE_OPENSEARCH_PORT"):
        monkeypatch.delenv(var, raising=False)
    assert resolve_hosts(OpenSearchConfig()) == ["http://127.0.0.1:9200"]
    monkeypatch.setenv("DATABASE_OPENSEARCH_HOST", "search.internal")
    assert resolve_hosts(OpenSearchConfig()) == ["https://search.internal:9200"]
    monkeypatch.setenv("LONGTERM_OPENSEARCH_URL", "https://os:9243")
    assert resolve_hosts(OpenSearchConfig()) == ["https://os:9243"]
    monkeypatch.setenv("DATABASE_OPENSEARCH_USERNAME", "admin")
    b = OpenSearchBackend.from_config({"password": "pw"}, root=tmp_path)
    assert b.auth == ("admin", "pw") and b.verify_certs is True
    assert index_name("longterm-", "shop") == "longterm-shop"
    assert index_name("longterm-", "My App") != index_name("longterm-", "my_app")
    assert index_name("longterm-", "My App").islower()
