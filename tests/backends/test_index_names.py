"""Two index names that make one store name: the store says whose it is, and refuses the other.

Redis, Qdrant (qdrant-edge, and qdrant-client's local mode: the server's code path) and
OpenSearch clean a name they cannot use as it is and add an 8-hex-digit digest, and keep a
clean name as it is: ``"a:b"`` and ``"a_b-6783a31e"`` are one Redis namespace, and two hostile
names of one digest (``HOSTILE``) are found by brute force. Each store keeps its index's name in
its meta (``backends.index_names``); a store of an earlier release without it is claimed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from longterm import ConfigurationError, LongTermMemory
from longterm.backends.opensearch import index_name
from longterm.backends.qdrant import collection_name
from longterm.backends.redis.scripts import INDEX_KEY, namespace

#: Two names of one 32-bit digest prefix (found by brute force in 0.1 s): one Redis namespace,
#: one qdrant-edge directory.
HOSTILE = ("t!!%]{", "t!&#,}")

#: Per engine (test id): the backend name, the provider, and the store name of (config, index).
ENGINES: dict[str, tuple[str, str, Callable[[dict, str], str]]] = {
    "redis": ("redis", "redis", lambda cfg, index: namespace(cfg["prefix"], index)),
    "qdrant-edge": ("qdrant", "qdrant-edge", lambda cfg, index: collection_name("", index)),
    "qdrant-local": ("qdrant", "qdrant-local", lambda cfg, index: collection_name("longterm_", index)),
    "opensearch": ("opensearch", "opensearch", lambda cfg, index: index_name(cfg["prefix"], index)),
}


def _twin(engine: str, cfg: dict, index: str) -> str:
    """A clean index name whose store name is ``index``'s (kept as it is, since it is clean)."""
    store = ENGINES[engine][2](cfg, index)
    twin = store.removeprefix(cfg.get("prefix", "")).removeprefix("longterm_").removesuffix(":")
    assert twin != index and ENGINES[engine][2](cfg, twin) == store
    return twin


async def _texts(memory: LongTermMemory) -> list[str]:
    return [m.text for m in await memory.search("secret", user_id="u")]


@pytest.mark.parametrize("engine", list(ENGINES))
async def test_an_index_meeting_another_in_one_store_is_refused(services, tmp_path: Path, engine: str):
    backend, provider, _ = ENGINES[engine]
    cfg = services(provider).config(tmp_path)
    first = LongTermMemory(app_name="x", index="a:b", backend=backend, backend_config=cfg)
    await first.add("secret", user_id="u")
    await first.close()
    twin = _twin(engine, cfg, "a:b")
    other = LongTermMemory(app_name="x", index=twin, backend=backend, backend_config=cfg)
    with pytest.raises(ConfigurationError) as refused:
        await other.search("secret", user_id="u")
    assert "'a:b'" in str(refused.value) and repr(twin) in str(refused.value)
    assert "another index name" in str(refused.value)
    with pytest.raises(ConfigurationError):  # every call, not the first only
        await other.delete_all(user_id="u")
    await other.close()
    again = LongTermMemory(app_name="x", index="a:b", backend=backend, backend_config=cfg)
    assert await _texts(again) == ["secret"]  # untouched, and its own index opens it as before
    await again.close()


@pytest.mark.parametrize("engine", ["redis", "qdrant-edge"])
async def test_hostile_names_of_one_digest_do_not_share_a_store(services, tmp_path: Path, engine: str):
    backend, provider, store = ENGINES[engine]
    cfg = services(provider).config(tmp_path)
    assert store(cfg, HOSTILE[0]) == store(cfg, HOSTILE[1])
    first = LongTermMemory(app_name="x", index=HOSTILE[0], backend=backend, backend_config=cfg)
    await first.add("secret", user_id="u")
    await first.close()
    other = LongTermMemory(app_name="x", index=HOSTILE[1], backend=backend, backend_config=cfg)
    with pytest.raises(ConfigurationError, match="another index name"):
        await other.search("secret", user_id="u")
    await other.close()


async def test_a_store_of_an_earlier_release_is_claimed_by_the_index_opening_it(services, tmp_path: Path):
    """No name kept (a store of 0.1): the index opening it writes its own, and the other is refused."""
    cfg = services("redis").config(tmp_path)
    first = LongTermMemory(app_name="x", index="a:b", backend="redis", backend_config=cfg)
    await first.add("secret", user_id="u")
    engine = first.backend_instance
    engine._r.hdel(engine.ns + "meta", INDEX_KEY)
    await first.close()
    twin = _twin("redis", cfg, "a:b")
    claimed = LongTermMemory(app_name="x", index=twin, backend="redis", backend_config=cfg)
    assert await _texts(claimed) == ["secret"]  # one store: the name it was opened by is kept
    assert claimed.backend_instance._r.hget(engine.ns + "meta", INDEX_KEY) == twin.encode()
    await claimed.close()
    refused = LongTermMemory(app_name="x", index="a:b", backend="redis", backend_config=cfg)
    with pytest.raises(ConfigurationError, match=repr(twin)):
        await refused.search("secret", user_id="u")
    await refused.close()
