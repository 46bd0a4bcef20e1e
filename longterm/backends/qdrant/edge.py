"""The embedded Qdrant engine on qdrant-edge: Qdrant's engine in this process, on a directory.

The seam: ``QdrantEdgeBackend`` spells ``common.QdrantEngine``'s hooks with
``qdrant-edge-py`` (an ``EdgeShard`` in ``<path>/<index>/shard``), on one thread; the default
embedded Qdrant, orders of magnitude faster than qdrant-client's local mode.

Why so, in short (at length in docs/backends.md, "qdrant"): the ledger and meta are a
``SideLedger`` file in the store's directory (exact lookups, one SQLite transaction each); an
exclusive ``flock`` refuses a second process at once; a write does not ``flush`` (the shard's
write-ahead log survives kill -9; flushing cost 60% of a save), the flush runs at close.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..._sqlite import SQLITE_RULES
from ...core.errors import Rule
from ...core.ledger import SideLedger
from ...errors import BackendError, require
from ...records import MemoryRecord, Scope
from ...retrieval.fusion import RRF_K
from .common import DENSE, RULES, SCOPE_FIELDS, SPARSE, QdrantEngine, collection_name

LOCK_FILE, SHARD_DIR, LEDGER_FILE = ".longterm.lock", "shard", "ledger.db"
#: What qdrant-edge says of damaged files (its config, WAL, segments), lower case.
DAMAGE = ("corrupt", "failed to deserialize", "can't init wal", "failed to decode", "failed to decompress")
DAMAGED = Rule(
    lambda e: any(s in str(e).lower() for s in DAMAGE),
    BackendError,
    "The store's files are damaged. Restore the directory from a backup, or move it aside to start a new store "
    "(`longterm export` reads what is still readable).",
)
#: Points per write: short enough that the event loop's thread gets the GIL between them.
BATCH = 32


class QdrantEdgeBackend(QdrantEngine):
    unreachable: ClassVar[str] = "Check the path and its permissions."
    packed_payload: ClassVar[bool] = True  # one process per store: no older reader shares it
    rules: ClassVar[Sequence[Rule]] = (*RULES, *SQLITE_RULES, DAMAGED)  # the ledger is SQLite

    def __init__(self, path: str | Path, *, index: str = "default_app", **hybrid: Any) -> None:
        self._e = self._lib = require(
            "qdrant_edge", package="qdrant-edge-py", extra="qdrant", purpose="Embedded Qdrant"
        )
        self.path = Path(path).expanduser()
        self.root = self.path / collection_name("", index)
        super().__init__(where=str(self.root), store_id=f"qdrant-edge:{self.root.resolve()}", **hybrid)
        # Keyed by a constant: the file is inside the store and follows it when moved.
        self.side_ledger = SideLedger(self.root / LEDGER_FILE, "qdrant-edge")
        self._shard: Any = None
        self._lock_fd: int | None = None

    def _open(self) -> None:
        if self._shard is not None:
            return
        e, shard_dir = self._e, self.root / SHARD_DIR
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: see common.RULES
            if shard_dir.exists() and any(shard_dir.iterdir()):
                shard = e.EdgeShard.load(str(shard_dir))
            else:
                dim = self.embedder.dim if self.embedder else 0
                dense = {DENSE: e.EdgeVectorParams(size=dim, distance=e.Distance.Cosine)} if dim else {}
                text = {SPARSE: e.EdgeSparseVectorParams(modifier=e.Modifier.Idf)}
                shard = e.EdgeShard.create(str(shard_dir), e.EdgeConfig(vectors=dense, sparse_vectors=text))
                for field in SCOPE_FIELDS:
                    shard.update(e.UpdateOperation.create_field_index(field, e.PayloadSchemaType.Keyword))
                shard.flush()
        except BaseException:
            os.close(fd)  # releases the lock
            raise
        self._shard, self._lock_fd = shard, fd

    def _close(self) -> None:
        try:
            if self._shard is not None:
                self._shard.flush()
                self._shard.close()
        finally:
            self._side().close()  # before the lock goes: the next process finds it closed
            if self._lock_fd is not None:
                os.close(self._lock_fd)
            self._shard = self._lock_fd = None

    # -- hooks ------------------------------------------------------------------------------

    def _write(self, records: Sequence[MemoryRecord], vectors: np.ndarray | None) -> None:
        points = [self._e.Point(**p) for p in self._points(records, vectors)]
        for start in range(0, len(points), BATCH):  # qdrant-edge holds the GIL while it writes
            self._shard.update(self._e.UpdateOperation.upsert_points(points[start : start + BATCH]))

    def _has_id(self, point_ids: list[str]) -> Any:
        return self._e.HasIdCondition(set(point_ids))

    def _ask(self, **request: Any) -> list[Any]:
        return list(self._shard.query(self._e.QueryRequest(with_payload=True, **request)))

    def _query(self, scope: Scope, vector: Any, using: str, k: int) -> list[Any]:
        return self._ask(limit=k, query=self._e.Query.Nearest(vector, using=using), filter=self._filter(scope))

    def _rrf(self, scope: Scope, sparse: Any, dense: list[float], k: int) -> list[Any]:
        e, flt, depth = self._e, self._filter(scope), self.hybrid.depth(k)
        arms = [(sparse, SPARSE), (dense, DENSE)]
        prefetches = [e.Prefetch(limit=depth, query=e.Query.Nearest(v, using=u), filter=flt) for v, u in arms]
        return self._ask(limit=k, query=e.Fusion.Rrf(k=RRF_K), prefetches=prefetches)

    def _scroll(self, flt: Any, cursor: Any, size: int) -> tuple[list[Any], Any]:
        points, cursor = self._shard.scroll(
            self._e.ScrollRequest(offset=cursor, limit=size, filter=flt, with_payload=True)
        )
        return list(points), cursor

    def _count_where(self, flt: Any) -> int:
        return int(self._shard.count(self._e.CountRequest(exact=True, filter=flt)))

    def _delete_where(self, flt: Any) -> None:
        self._shard.update(self._e.UpdateOperation.delete_points_by_filter(flt))
