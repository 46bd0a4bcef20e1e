"""An update written while an erase is under way (its mark written, its deletes not yet done) is
erased with it, on every engine that erases in marked steps.

The erase marks first and deletes later (``core.erasures``); an update that read the memory
before the mark writes it over afterwards. Its write keeps the stamp the memory had, so the
mark still covers it: the erase, finished (here, or by the next open after a crash), takes it.
A write stamped anew would count as saved after the erase began and outlive it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from longterm import LongTermMemory
from longterm.core.engine import Engine
from longterm.core.erasures import Erasure
from longterm.memory.correcting import Corrector

APP, USER = "mid-erase-app", "mid-erase-user"


@pytest.mark.parametrize("provider_id", ["redis", "opensearch", "mem0"])
def test_an_update_written_after_an_erase_marked_itself_goes_with_that_erase(
    open_memory: Callable[..., LongTermMemory], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = open_memory(app_name=APP)
    (mid,) = memory.add_sync("my locker code is 4417", user_id=USER).memory_ids
    engine = memory.backend_instance
    assert isinstance(engine, Engine) and engine.erasing is not None
    real = Corrector._found

    async def read_then_marked(self: Corrector, scope: object, memory_id: str, at: float) -> object:
        record = await real(self, scope, memory_id, at)  # type: ignore[arg-type]
        await engine._run("marking an erase", engine._erasure_begin, Erasure(APP, USER))  # a worker's erase begins
        return record

    monkeypatch.setattr(Corrector, "_found", read_then_marked)
    memory.update_sync(mid, user_id=USER, text="my locker code is 9921")
    monkeypatch.undo()
    assert memory.get_sync(mid, user_id=USER) is None, "the erase under way hides the memory"
    memory.portal.call(engine._run("finishing erases", engine.erasing.finish))  # as the next open does
    assert memory.portal.call(memory.count(app_name=APP, user_id=USER)) == 0
    assert not memory.search_sync("locker code 9921", user_id=USER)
    assert memory.get_all_sync(user_id=USER).memories == []
