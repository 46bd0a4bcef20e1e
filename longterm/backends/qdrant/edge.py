"""The embedded Qdrant engine on qdrant-edge: Qdrant's engine in this process, on a directory.

The seam: ``QdrantEdgeBackend`` spells ``common.QdrantEngine``'s hooks with
``qdrant-edge-py`` (an ``EdgeShard`` in ``<path>/<index>/shard``), on one thread; the default
embedded Qdrant, orders of magnitude faster than qdrant-client's local mode. A hit's neighbours
are read a few points each side of it (``windows.EdgeWindows``) where the store indexes its
points' time (a store made since: ``_load`` makes the indexes); an older one reads sessions whole.
Filters are a payload condition on the keyword-indexed tokens (``tags``), in the same query; a
store made before them gets the index and each point its tokens at open, once (by id: the lock
keeps other processes out). A record's expiry is a range-indexed float (``tags.EXPIRY``); a store
made before it gets the (empty) index at open: its points never expire.

Why so, in short (at length in docs/backends.md, "qdrant"): the ledger and meta are a
``SideLedger`` file in the store's directory (exact lookups, one SQLite transaction each); an
exclusive ``flock`` refuses a second process at once; a write does not ``flush`` (the shard's
write-ahead log survives kill -9; flushing cost 60% of a save), the flush runs at close, or
when a memory that was never closed is dropped (a ``weakref.finalize`` flushes, closes and
unlocks: a notebook cell run twice opens the same path again); a second memory of this process on
a store another holds is told so (``common.OpenHere``), not "another process". Each index's
directory keeps its logical name in its ledger's meta, for ``_indices``; one naming another index
refuses this one before anything is read (``index_names``).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from typing_extensions import Unpack, override

from ...config import parse_backend_config, private_dir
from ...config.backends import QdrantConfig
from ...config.hybrid import HybridOptions
from ...core import making
from ...core.aliases import Records, Vectors
from ...core.errors import Rule
from ...core.fork import keep
from ...core.ledger import SideLedger
from ...core.sqlite import SQLITE_RULES
from ...errors import BackendError, require
from ...retrieval.fusion import RRF_K
from .common import DENSE, INDEX_KEY, RULES, SCOPE_FIELDS, SPARSE, OpenHere, QdrantEngine
from .ids import collection_name
from .shared import let_go
from .tags import EXPIRING, EXPIRY, MARKER, TAGS
from .windows import WINDOW_INDEXES, EdgeWindows, windows_ready

LOCK_FILE, SHARD_DIR, LEDGER_FILE = ".longterm.lock", "shard", "ledger.db"
#: What qdrant-edge writes first when it makes a shard, and loads a shard by.
CONFIG_FILE = "edge_config.json"
log = logging.getLogger(__name__)

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


class QdrantEdgeBackend(EdgeWindows, QdrantEngine):
    unreachable: ClassVar[str] = "Check the path and its permissions."
    packed_payload: ClassVar[bool] = True  # one process per store: no older reader shares it
    range_type: ClassVar[str] = "RangeFloat"
    rules: ClassVar[Sequence[Rule]] = (*RULES, *SQLITE_RULES, DAMAGED)  # the ledger is SQLite
    keeps_ledger = False  # a SideLedger file in the store's directory
    purges = True  # ``_purge`` makes the shard again from what it holds

    def __init__(self, path: str | Path, *, index: str = "default_app", **hybrid: Unpack[HybridOptions]) -> None:
        self._e = self._lib = require(
            "qdrant_edge", package="qdrant-edge-py", extra="qdrant", purpose="Embedded Qdrant"
        )
        self.path = Path(path).expanduser()
        self.index = index
        self.root = self.path / collection_name("", index)
        super().__init__(where=str(self.root), store_id=f"qdrant-edge:{self.root.resolve()}", **hybrid)
        # Keyed by a constant: the file is inside the store and follows it when moved.
        self.side_ledger = SideLedger(self.root / LEDGER_FILE, "qdrant-edge")
        self._shard: Any = None
        self._lock_fd: int | None = None
        self._release: weakref.finalize[Any, Any] | None = None
        """``_release(shard, fd, ledger)`` on close, or once the engine is dropped unclosed."""
        self._expiring = True
        """The store may hold a record that expires (``common._may_expire``), read at open."""

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> QdrantEdgeBackend:
        """The store on ``path`` (default ``<LONGTERM_HOME>/qdrant``); server keys are not for it."""
        cfg = parse_backend_config(QdrantConfig, config, cls.name)
        return cls(cfg.path or root / "qdrant", index=cfg.index, **cfg.hybrid_kwargs())

    @override
    def _open(self) -> None:
        self._refuse_in_child()
        if self._shard is not None:
            return
        private_dir(self.root)
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            _lock(fd, self.root)
            self._claim(self._side().meta_get(INDEX_KEY), self.where)  # another index's store: refused untouched
            shard = self._load(self.root / SHARD_DIR)
        except BaseException:
            self._side().close()
            os.close(fd)  # releases the lock
            raise
        self._shard, self._lock_fd = shard, fd
        _HELD[_key(self.root)] = os.getpid()
        self._release = weakref.finalize(self, _release, shard, fd, self._side(), _key(self.root))
        schema = shard.info().payload_schema
        if EXPIRY not in schema:  # a store made before expiry: its points have none, the index is empty
            shard.update(self._e.UpdateOperation.create_field_index(EXPIRY, self._e.PayloadSchemaType.Float))
        if not self._side().meta_get(MARKER):  # a store made before the filter tokens: their index first
            if TAGS not in schema:
                shard.update(self._e.UpdateOperation.create_field_index(TAGS, self._e.PayloadSchemaType.Keyword))
            self._tag_old_points()
        self.windowed = windows_ready(self._e, shard)
        self._expiring = bool(self._side().meta_get(EXPIRING))  # the store's lock: no other process writes

    def _load(self, shard_dir: Path) -> Any:
        """The shard in ``shard_dir``, made first when there is none (call with the lock held).

        A new shard is made aside and moved into place whole (``core.making``). A directory
        without its config is one an earlier release was killed while making: it holds nothing
        (no save ran before the making ended), so it is made again; one that holds points is kept."""
        e = self._e
        making.clear_leftovers(shard_dir)
        if (shard_dir / CONFIG_FILE).exists():
            return e.EdgeShard.load(str(shard_dir))
        if shard_dir.exists() and any(shard_dir.iterdir()):
            shard = self._half_made(shard_dir)
            if shard is not None:
                return shard
        making.made_whole(shard_dir, self._make)
        return e.EdgeShard.load(str(shard_dir))

    def _config(self) -> Any:
        e, dim = self._e, self.embedder.dim if self.embedder else 0
        dense = {DENSE: e.EdgeVectorParams(size=dim, distance=e.Distance.Cosine)} if dim else {}
        return e.EdgeConfig(vectors=dense, sparse_vectors={SPARSE: e.EdgeSparseVectorParams(modifier=e.Modifier.Idf)})

    def _make(self, place: Path, source: Any = None) -> None:
        """A new shard in ``place``: its config, the payload indexes, ``source``'s points (a shard),
        flushed and closed."""
        e = self._e
        shard = e.EdgeShard.create(str(place), self._config())
        try:
            making.step("created")
            indexes = [(field, "Keyword") for field in (*SCOPE_FIELDS, TAGS)] + [*WINDOW_INDEXES, (EXPIRY, "Float")]
            for field, kind in indexes:
                shard.update(e.UpdateOperation.create_field_index(field, getattr(e.PayloadSchemaType, kind)))
                making.step(f"indexed {field}")
            cursor = None
            while source is not None:
                request = e.ScrollRequest(offset=cursor, limit=BATCH * 8, with_payload=True, with_vector=True)
                points, cursor = source.scroll(request)
                copies = [e.Point(id=p.id, vector=p.vector, payload=p.payload) for p in points]
                if copies:
                    shard.update(e.UpdateOperation.upsert_points(copies))
                if cursor is None:
                    break
            shard.flush()
            making.step("flushed")
        finally:
            shard.close()

    def _half_made(self, shard_dir: Path) -> Any:
        """A shard directory with no config (an earlier release killed while making it): loaded with
        this store's config when it holds points; None once removed when it holds none."""
        try:
            shard = self._e.EdgeShard.load(str(shard_dir), self._config())
        except Exception as exc:
            raise BackendError(
                f"the embedded Qdrant store at {self.root} was left half-made (no {CONFIG_FILE}: a process stopped "
                f"while creating it) and its files cannot be read ({exc}). If it never held memories, remove "
                f"{shard_dir} and open it again; otherwise move the directory aside and restore it from a backup."
            ) from exc
        if int(shard.count(self._e.CountRequest(exact=True))):
            return shard
        shard.close()
        log.warning("%s: made again, left half-made and empty by a process that stopped while making it", self.root)
        shutil.rmtree(shard_dir)
        return None

    @override
    def _purge(self) -> None:
        """The shard made again from its points, beside it, and swapped in (``core.making``): an erased
        point's words stay in the old segments until the optimizer vacuums them (a fifth of a segment
        deleted) and in the write-ahead log's preallocated file until it is recycled; the new shard's
        files never held them. Costs a copy of the store, as an operator's command may."""
        old, shard_dir, fd = self._shard, self.root / SHARD_DIR, self._lock_fd
        assert fd is not None, "purged while not open"
        old.flush()
        if self._release is not None:
            self._release.detach()  # the old shard is closed below, the lock kept
        swapped = []

        def release() -> None:
            old.close()
            swapped.append(True)

        try:
            making.replaced_whole(shard_dir, lambda place: self._make(place, old), release)
        finally:
            shard = self._load(shard_dir) if swapped else old
            self._shard = shard
            self._release = weakref.finalize(self, _release, shard, fd, self._side(), _key(self.root))
            self.windowed = windows_ready(self._e, shard)

    @override
    def _close(self) -> None:
        if self._release is not None:
            self._release()
        else:
            self._side().close()
        self._shard = self._lock_fd = self._release = None

    @override
    def _forget_after_fork(self) -> None:
        """The parent's shard is kept unclosed (closing or flushing it here would write the parent's
        files) and this child refuses from here on (``common.FORKED``); the child's copies of the
        store's descriptors, its locks' included, are let go (``common.let_go``): the parent's close
        then frees the path, even while this child lives."""
        if self._shard is None:
            return
        if self._release is not None:
            self._release.detach()
        keep(self._shard)
        let_go(self.root)
        self._shard = self._lock_fd = self._release = None
        self._forked = self._forked_error()

    @override
    def _indices(self) -> list[str]:
        """Every index directory under the path holding points, by the logical name its ledger keeps
        (one made before it kept one: by its directory's name)."""
        found = []
        for root in sorted(p for p in self.path.iterdir() if (p / SHARD_DIR).is_dir()):
            ledger = root / LEDGER_FILE
            side = SideLedger(ledger, "qdrant-edge") if ledger.exists() else None
            try:
                if root == self.root:
                    held = self._count_where(None) > 0
                else:
                    held = self._holds(root, side)
                name = side.meta_get(INDEX_KEY) if side is not None else None
            finally:
                if side is not None and side is not self.side_ledger:
                    side.close()
            if held:
                found.append(name or root.name)
        return found

    def _holds(self, root: Path, side: SideLedger | None) -> bool:
        """Whether another index holds points: counted when its lock is free; when it is open (here or
        in another process) its shard cannot be read, and its ledger holding entries answers."""
        fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return side is not None and side.holds()
            shard = self._e.EdgeShard.load(str(root / SHARD_DIR))
            try:
                return int(shard.count(self._e.CountRequest(exact=True))) > 0
            finally:
                shard.close()
        finally:
            os.close(fd)

    # -- hooks ------------------------------------------------------------------------------

    @override
    def _may_expire(self) -> bool:
        return self._expiring

    @override
    def _now_expiring(self) -> None:
        self._expiring = True

    @override
    def _stored(self, point_ids: list[str], dense: bool) -> list[Any]:
        return list(self._shard.retrieve(point_ids, with_payload=True, with_vector=[DENSE] if dense else False))

    @override
    def _write(self, records: Records, vectors: Vectors) -> None:
        records, vectors = self._changed(records, vectors)
        self._note_expiring(records)
        points = [self._e.Point(**p) for p in self._points(records, vectors)]
        for start in range(0, len(points), BATCH):  # qdrant-edge holds the GIL while it writes
            self._shard.update(self._e.UpdateOperation.upsert_points(points[start : start + BATCH]))

    @override
    def _update_only(self, points: list[dict[str, Any]]) -> None:
        e = self._e
        for start in range(0, len(points), BATCH):
            batch = [e.Point(**p) for p in points[start : start + BATCH]]
            self._shard.update(e.UpdateOperation.upsert_points(batch, update_mode=e.UpdateMode.UpdateOnly))

    @override
    def _has_id(self, point_ids: list[str]) -> Any:
        return self._e.HasIdCondition(set(point_ids))

    def _ask(self, **request: Any) -> list[Any]:
        return list(self._shard.query(self._e.QueryRequest(with_payload=True, **request)))

    @override
    def _query(self, flt: Any, vector: Any, using: str, k: int) -> list[Any]:
        return self._ask(limit=k, query=self._e.Query.Nearest(vector, using=using), filter=flt)

    @override
    def _rrf(self, flt: Any, sparse: Any, dense: list[float], k: int) -> list[Any]:
        e, depth = self._e, self.hybrid.depth(k)
        arms = [(sparse, SPARSE), (dense, DENSE)]
        prefetches = [e.Prefetch(limit=depth, query=e.Query.Nearest(v, using=u), filter=flt) for v, u in arms]
        return self._ask(limit=k, query=e.Fusion.Rrf(k=RRF_K), prefetches=prefetches)

    @override
    def _scroll(self, flt: Any, cursor: Any, size: int) -> tuple[list[Any], Any]:
        points, cursor = self._shard.scroll(
            self._e.ScrollRequest(offset=cursor, limit=size, filter=flt, with_payload=True)
        )
        return list(points), cursor

    @override
    def _count_where(self, flt: Any) -> int:
        return int(self._shard.count(self._e.CountRequest(exact=True, filter=flt)))

    @override
    def _delete_where(self, flt: Any) -> None:
        self._shard.update(self._e.UpdateOperation.delete_points_by_filter(flt))

    @override
    def _set_payloads(self, changes: list[tuple[Any, dict[str, Any]]]) -> None:
        """By id, one update each (the store's lock keeps every other process out)."""
        for pid, payload in changes:
            self._shard.update(self._e.UpdateOperation.set_payload([pid], payload))


#: The stores this process holds the lock of (real path of the index's directory -> pid), from
#: ``_open`` to ``_release``: a second memory of this process on one is told so (``common.OpenHere``),
#: not that another process has it. By pid: a forked child's copy names its parent's.
_HELD: dict[str, int] = {}


def _key(root: Path) -> str:
    return os.path.realpath(root)


def _lock(fd: int, root: Path) -> None:
    """The store's exclusive lock on ``fd``, at once: ``common.OpenHere`` when another memory of this
    process holds it, else the lock's ``BlockingIOError`` (another process: ``common.RULES``)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if _HELD.get(_key(root)) == os.getpid():
            raise OpenHere(f"its lock is held by this process (pid {os.getpid()})") from None
        raise


def _release(shard: Any, fd: int, ledger: SideLedger, key: str) -> None:
    """Flush and close the shard, close the ledger, then unlock (the next opener finds all closed)."""
    try:
        shard.flush()
        shard.close()
    finally:
        try:
            ledger.close()
        finally:
            _HELD.pop(key, None)
            os.close(fd)
