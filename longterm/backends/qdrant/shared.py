"""One qdrant-client local-mode client per path in this process, and a forked child letting go of it.

The seam: ``local_client(path)`` gives this process's client of ``path`` (made on first use, a
``Shared`` with its lock and its count of users), ``release_local`` gives one back (the last
closes it), ``Serial`` calls a client's methods under a lock; ``let_go(root)`` points a forked
child's descriptors of a store at /dev/null, and the fork hook disarms every shared client.

Why one per path: qdrant-client's local mode allows one client per path in a process (a second
is refused as another instance), so every index on a path (both Qdrant engines' and mem0's)
shares one, its calls serialised (local mode is not made for threads).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from ...config import private_dir
from ...core.fork import keep
from ...errors import require


class Shared:
    """One qdrant-client local-mode client of a path, shared by this process's engines on it;
    ``lock`` serialises calls (local mode is not made for threads)."""

    def __init__(self, key: str, client: Any) -> None:
        self.key, self.client, self.lock, self.users = key, client, threading.RLock(), 0
        self.expiring: set[str] = set()
        """The collections of this path that may hold a record that expires (their meta said so at
        open, or one was written since): kept here, as every engine of this process on one shares it."""


class Serial:
    """``client``'s methods called one at a time under ``lock``."""

    def __init__(self, client: Any, lock: threading.RLock) -> None:
        self._client, self._lock = client, lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call


_LOCAL: dict[str, Shared] = {}
_LOCAL_LOCK = threading.Lock()


def local_client(path: str | Path) -> Shared:
    """The local-mode client of ``path`` in this process, made on first use; ``release_local`` it."""
    qc = require("qdrant_client", package="qdrant-client", extra="qdrant", purpose="Embedded Qdrant")
    key = os.path.realpath(path)
    with _LOCAL_LOCK:
        shared = _LOCAL.get(key)
        if shared is None:
            private_dir(Path(key))
            shared = _LOCAL[key] = Shared(key, qc.QdrantClient(path=key))
        shared.users += 1
        return shared


def release_local(shared: Shared) -> None:
    """One user fewer; the last one closes the client (and its lock on the path)."""
    with _LOCAL_LOCK:
        shared.users -= 1
        if shared.users > 0:
            return
        if _LOCAL.get(shared.key) is shared:
            del _LOCAL[shared.key]
    with shared.lock:
        shared.client.close()


def let_go(root: str | Path) -> None:
    """In a forked child: every descriptor of this process open on a file under ``root`` now points
    at /dev/null (Linux's /proc/self/fd). A lock goes with the last descriptor of its open file, so
    the child holds none of the store's (the parent's close then frees the path); the objects holding
    the numbers stay valid and never reach the store's files again. Elsewhere: nothing."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        return
    base = os.path.realpath(root)
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for entry in list(fds.iterdir()):
            try:
                target = os.readlink(entry)
            except OSError:  # closed meanwhile (the listing's own descriptor)
                continue
            if target == base or target.startswith(base + os.sep):
                os.dup2(null, int(entry.name), inheritable=False)
    finally:
        os.close(null)


def disarm_local(shared: Shared) -> None:
    """In a forked child: a local-mode client inherited from the parent kept, never closed (its
    destructor would unlock the parent's lock), its files let go (``let_go``)."""
    keep(shared.client)
    let_go(shared.key)


def _after_fork_in_child() -> None:
    global _LOCAL_LOCK
    for shared in _LOCAL.values():
        disarm_local(shared)
    _LOCAL.clear()
    _LOCAL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


__all__ = ["Serial", "Shared", "disarm_local", "let_go", "local_client", "release_local"]
