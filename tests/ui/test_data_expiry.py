"""What the UI shows follows a memory's life: an expired memory is in no page, no session, no
search, no memory page and no export of the UI, from its moment (the UI's data layer, local store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from longterm import LongTermMemory
from longterm.testing import make_session
from longterm.testing.contract.life import Clock
from longterm.ui.data import Inspector, NotFound


async def test_an_expired_memory_is_nowhere_in_the_ui(tmp_path: Path) -> None:
    clock = Clock()
    path = str(tmp_path / "m.db")

    def factory(index: str) -> LongTermMemory:
        return LongTermMemory(backend_config={"path": path}, index=index, clock=clock)

    writer = factory("app")
    await writer.add_session_to_memory(
        make_session("s", "app", "u", [("user", "gate code 5521 for the lighthouse")]), ttl=60
    )
    await writer.add_session_to_memory(make_session("k", "app", "u", [("user", "the lighthouse keeper is Ada")]))
    await writer.close()
    data = Inspector(factory)
    try:
        texts = lambda rows: sorted(r["text"] for r in rows)  # noqa: E731
        assert len((await data.page("app", "u"))["memories"]) == 2
        clock.now += 61
        assert texts((await data.page("app", "u"))["memories"]) == ["the lighthouse keeper is Ada"]
        assert texts((await data.search("app", "u", "lighthouse"))["hits"]) == ["the lighthouse keeper is Ada"]
        with pytest.raises(NotFound):
            await data.session("app", "u", "s")
        assert not any("5521" in line for line in await data.export("app", "u"))
    finally:
        await data.close()
