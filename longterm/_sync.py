"""Blocking wrappers for scripts: run coroutines on one private event loop thread.

The seam: ``SyncPortal().call(coro)`` blocks until ``coro`` finished on the portal's loop.

Why a loop in a thread of its own instead of ``asyncio.run`` per call: it lets the wrappers
work even where a loop is already running (Jupyter, an async web handler calling a sync
helper). Engines bind nothing to a loop (``core.engine``), so the wrappers and async code
may use one memory at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class SyncPortal:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="longterm-sync", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._ensure()
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a longterm *_sync method was called from its own loop; await the async method instead")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def stop(self) -> None:
        with self._lock:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                if self._thread is not None:
                    self._thread.join(timeout=5)
                self._loop.close()
                self._loop = self._thread = None
