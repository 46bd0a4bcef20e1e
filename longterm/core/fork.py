"""What a forked child inherited from its parent: kept for the process's life, never used nor released.

The seam: ``keep(obj)``. In a child of ``os.fork`` (``multiprocessing``'s default on Linux) the
runner (``core.runner``), the side ledger and the engines drop what their parent's process
holds (a pool whose threads are not in this process, a client's sockets, a store's files and
locks) and open their own; what they drop goes here instead of being collected.

Why kept and not closed: its destructor would close, flush or unlock what the parent still
uses. Why a module of its own: the runner, the ledger and the engines all need it, and
none of them should import another for it. Why ``ctypes`` is imported in ``keep``: only a
forked child calls it, and every ``import longterm`` paid for ctypes (about 1.3 ms).
"""

from __future__ import annotations

#: What a forked child inherited and must neither use nor release (see ``keep``).
ORPHANS: list[object] = []


def keep(obj: object) -> None:
    """In a forked child: keep ``obj`` (inherited from the parent) for the process's life, never
    destroyed, not even at exit: its destructor would close, flush or unlock what the parent still
    uses (a client's sockets, a store's files and locks)."""
    if obj is not None:
        import ctypes

        ORPHANS.append(obj)
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
