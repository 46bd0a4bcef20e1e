"""``--purge`` on embedded Qdrant (qdrant-edge) leaves none of an erased user's words in its files.

The seam: a user saves memories holding made-up words, another user saves their own (enough
points that one erased user is far under the optimizer's fifth of a segment); the user is
erased through the public API and the store purged (``Engine.purge``, what ``longterm delete
--purge`` runs), then every file under the store's path is read for the words, with the memory
open and after it closed. The other user's memories are still found, before and after a reopen.

Before, an erased point's words stayed in the segment until the optimizer's vacuum (a fifth of
a segment deleted) and in the write-ahead log's preallocated 32 MB file until it is recycled;
purging rebuilds the shard from what it holds (``QdrantEdgeBackend._purge``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from longterm import LongTermMemory

APP = "diary"
SECRET = "Qzorbelline said her PIN is 8061739 and she lives in Vruxhaven"
NEEDLES = (b"Qzorbelline", b"8061739", b"Vruxhaven")


def holding(root: Path) -> dict[str, list[bytes]]:
    """Every file under ``root`` holding one of ``NEEDLES``, and which."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if hits := [n for n in NEEDLES if n in data]:
                found[str(path.relative_to(root))] = hits
    return found


@pytest.mark.asyncio
async def test_purge_leaves_no_erased_words_in_embedded_qdrant_files(tmp_path: Path):
    config = {"path": str(tmp_path / "qdrant"), "engine": "edge"}
    async with LongTermMemory(backend="qdrant", backend_config=config, app_name=APP) as memory:
        for i in range(60):
            await memory.add(
                f"note {i}: the tomatoes in the greenhouse need water", user_id="keeper", session_id=f"k{i // 20}"
            )
        await memory.add(SECRET, user_id="gone", session_id="g1")
        await memory.add("my dentist moved to Thursday", user_id="gone", session_id="g2")
        assert holding(tmp_path), "the words were never written: the test proves nothing"
        assert await memory.delete_all(user_id="gone") == 2
        said = await memory.backend_instance.purge()
        left = holding(tmp_path)
        assert left == {}, f"purged ({said!r}), these files still hold the erased words: {left}"
        assert len(await memory.search("tomatoes greenhouse", user_id="keeper")) > 0
        await memory.add("the greenhouse door sticks", user_id="keeper", session_id="k9")
    assert holding(tmp_path) == {}
    async with LongTermMemory(backend="qdrant", backend_config=config, app_name=APP) as memory:
        assert len((await memory.get_all(user_id="keeper", limit=100)).memories) == 61
        assert await memory.search("Vruxhaven", user_id="gone") == []
        assert len(await memory.search("door sticks", user_id="keeper")) == 1
