"""A store's vectors match the store on every engine (``tests.services.PROVIDERS``).

What a user notices: an embedder whose id stayed while its dimension changed (32 -> 48) is
refused before anything is written, the message naming the embedder and both dimensions, and
the store answers as before with the right one; a memory opened without the store's embedder
(one of the user's own, not built in) never saves without its vectors: the local engine keeps
them pending, every other refuses the save, naming the embedder to open it with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from longterm import LongTermMemory
from longterm.core.capabilities import capabilities
from longterm.errors import ConfigurationError
from longterm.retrieval.embedders import HashingEmbedder
from tests.conftest import make_session


class Custom(HashingEmbedder):
    """A user's own embedder: its id names no built-in one."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.id = "custom-e"


Opener = Callable[[object], LongTermMemory]


@pytest.fixture
def open_with(backend_name: str, backend_config: dict[str, Any]) -> Callable[[object], LongTermMemory]:
    """A memory on the test's store opened with an embedder (None: none; mem0 then keeps the one it
    was made with), for the app ``app``."""

    def _open(embedder: object) -> LongTermMemory:
        config = {k: v for k, v in backend_config.items() if k != "embedder"}
        config |= {} if embedder is None else {"embedder": embedder}
        return LongTermMemory(backend=backend_name, backend_config=config, app_name="app")

    return _open


async def save(memory: LongTermMemory, sid: str, text: str) -> None:
    await memory.add_session_to_memory(make_session(sid, turns=[("user", text)]))


async def texts(memory: LongTermMemory, query: str) -> list[str]:
    res = await memory.search_memory(app_name="app", user_id="u1", query=query)
    return [m.content.parts[0].text for m in res.memories]


async def test_an_embedder_of_another_dimension_under_the_same_id_is_refused(open_with: Opener):
    made = open_with(Custom(32))
    await save(made, "s1", "I bought a red bicycle")
    await made.close()

    changed = open_with(Custom(48))
    with pytest.raises(ConfigurationError) as refused:
        await save(changed, "s2", "my puppy chews shoes")
    await changed.close()
    message = str(refused.value)
    assert "'custom-e'" in message and "32-dimensional" in message and "48-dimensional" in message, message

    right = open_with(Custom(32))  # the store answers as before, and takes its own embedder's vectors
    assert await texts(right, "red bicycle") == ["I bought a red bicycle"]
    await save(right, "s3", "the bicycle has a bell")
    assert set(await texts(right, "bicycle")) == {"I bought a red bicycle", "the bicycle has a bell"}
    await right.close()


async def test_a_save_without_the_stores_own_embedder_never_goes_without_its_vectors(open_with: Opener):
    made = open_with(Custom(32))
    await save(made, "s1", "I bought a red bicycle")
    await made.close()

    plain = open_with(None)
    if capabilities(plain.backend_instance).embeds_later:  # local: text now, the vectors pending
        await save(plain, "s2", "my puppy chews shoes")
        await plain.close()
        again = open_with(Custom(32))
        await again.backend_instance.embed_backlog()  # what its background embedder has not done yet
        res = await again.search_memory(app_name="app", user_id="u1", query="puppy shoes")
        assert res.memories[0].content.parts[0].text == "my puppy chews shoes"
        assert res.memories[0].custom_metadata["arms"]["vector"] > 0.4  # it has its vector now
        await again.close()
    else:
        with pytest.raises(ConfigurationError, match="custom-e"):
            await save(plain, "s2", "my puppy chews shoes")
        await plain.close()


async def test_a_save_without_an_embedder_embeds_with_the_stores_built_in_one(open_with: Opener):
    made = open_with({"name": "hashing", "dim": 16})
    await save(made, "s1", "I bought a red bicycle")
    await made.close()

    plain = open_with(None)  # as `LongTermMemory()` in another script, or `longterm import`
    if capabilities(plain.backend_instance).embeds_itself:  # mem0 picks its own model: another one is refused
        with pytest.raises(ConfigurationError, match="hashing-v1-16"):
            await save(plain, "s2", "my puppy chews shoes")
        await plain.close()
        return
    await save(plain, "s2", "my puppy chews shoes")
    assert await texts(plain, "puppy") == ["my puppy chews shoes"]  # it still reads by full text alone
    await plain.close()

    again = open_with({"name": "hashing", "dim": 16})
    res = await again.search_memory(app_name="app", user_id="u1", query="puppy shoes")
    assert res.memories[0].content.parts[0].text == "my puppy chews shoes"
    assert res.memories[0].custom_metadata["arms"]["vector"] > 0.4  # saved with its vector
    await again.close()
