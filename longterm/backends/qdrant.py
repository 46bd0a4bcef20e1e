"""The Qdrant backend: a Qdrant server by URL, or Qdrant's embedded local mode on disk.

The seam: ``QdrantBackend`` implements the backend contract (``base.py``) with the
official ``qdrant-client``: ``AsyncQdrantClient`` for a server (``url``/``host``+``port``,
``api_key``), or the same client's local mode for an embedded store (``path``, default
``<LONGTERM_HOME>/qdrant``, with ``engine="local"``). One collection per ``index``. The
default embedded engine is qdrant-edge (``qdrant_edge.py``), chosen by measurement.

Why it is shaped so:
- Point ids are the record ids read as UUIDs (they are 128-bit hex digests; any other
  string gets a name-based UUID), so upserts stay idempotent; the scope is always a
  structured payload filter on ``app_name`` and ``user_id`` (keyword-indexed on servers),
  never string matching.
- Full text is a sparse BM25 vector (``retrieval.sparse``: our stemming and CJK bigrams,
  IDF applied by Qdrant's ``Modifier.IDF``), which works the same in local mode and on
  servers. With an embedder, a dense arm joins it; the two are fused client-side
  (``convex``, the default, see ``retrieval.fusion``) or by Qdrant's own RRF
  ``FusionQuery`` (``fusion="rrf"``).
- Local mode is synchronous Python under the hood, so it runs on a worker thread: the
  event loop never blocks. It holds a file lock: a second process opening the same path
  gets a clear ``BackendUnavailableError``, not a hang.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Literal, Optional

import numpy as np
from pydantic import ConfigDict

from ..config import env, parse_backend_config
from ..errors import BackendError, BackendUnavailableError, ConfigurationError, LongTermMemoryError, require
from ..records import Hit, MemoryRecord, Scope
from ..retrieval.embedders import Embedder
from ..retrieval.hybrid import Hybrid, HybridSettings
from ..retrieval.sparse import document_vector
from ..retrieval.sparse import query_vector as sparse_query
from ..retrieval.text import query_terms

log = logging.getLogger("longterm.qdrant")

SPARSE, DENSE = "text", "dense"


class QdrantConfig(HybridSettings):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    url: Optional[str] = None
    """A Qdrant server, e.g. ``http://127.0.0.1:6333``; default ``$LONGTERM_QDRANT_URL``."""
    host: Optional[str] = None
    port: int = 6333
    api_key: Optional[str] = None
    path: Optional[str] = None
    """Embedded store directory; used when no server is configured."""
    engine: Literal["edge", "local"] = "edge"
    """Embedded engine: ``edge`` (qdrant-edge-py, Qdrant's engine in-process; fast) or
    ``local`` (qdrant-client's local mode, pure Python). Ignored for servers."""
    prefix: str = "longterm_"
    index: str = "default_app"
    timeout: float = 10.0


def collection_name(prefix: str, index: str) -> str:
    name = f"{prefix}{index}"
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", name)
    if safe != name:  # keep distinct indexes distinct after sanitising
        safe += "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return safe


class QdrantBackend:
    name: ClassVar[str] = "qdrant"

    def __init__(
        self,
        *,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        path: Optional[str] = None,
        prefix: str = "longterm_",
        index: str = "default_app",
        timeout: float = 10.0,
        **hybrid: Any,
    ) -> None:
        self._qc = require("qdrant_client", package="qdrant-client", extra="qdrant", purpose="The qdrant backend")
        self._m = require("qdrant_client.models", package="qdrant-client", extra="qdrant", purpose="The qdrant backend")
        if not url and not path:
            raise ConfigurationError("the qdrant backend needs a server url or an embedded path.")
        self.url, self.api_key, self.path = url, api_key, path
        self.collection = collection_name(prefix, index)
        self.hybrid = Hybrid(**hybrid)
        self.embedder: Optional[Embedder] = self.hybrid.embedder
        self.timeout = timeout
        self._client: Any = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._executor: Optional[ThreadPoolExecutor] = None
        self._ready = False

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> "QdrantBackend":
        cfg = parse_backend_config(QdrantConfig, config, cls.name)
        url = cfg.url or (f"http://{cfg.host}:{cfg.port}" if cfg.host else None)
        path = cfg.path
        if url is None and path is None:
            url = env("LONGTERM_QDRANT_URL")
        if url is None and path is None:
            path = str(root / "qdrant")
        if url is None and cfg.engine == "edge":
            from .qdrant_edge import QdrantEdgeBackend

            return QdrantEdgeBackend(path, index=cfg.index, **cfg.hybrid_kwargs())  # type: ignore[return-value]
        return cls(
            url=url, api_key=cfg.api_key or env("LONGTERM_QDRANT_API_KEY"), path=path if url is None else None,
            prefix=cfg.prefix, index=cfg.index, timeout=cfg.timeout, **cfg.hybrid_kwargs(),
        )  # fmt: skip

    # -- connection ---------------------------------------------------------------------

    @property
    def embedded(self) -> bool:
        return self.url is None

    def _where(self) -> str:
        return f"embedded Qdrant at {self.path}" if self.embedded else f"Qdrant at {self.url}"

    def _error(self, exc: Exception, what: str) -> LongTermMemoryError:
        text = str(exc)
        if "already accessed by another instance" in text or "already locked" in text.lower():
            return BackendUnavailableError(
                f"{self._where()} is open in another process (embedded Qdrant allows one process per "
                "path). Use a Qdrant server (backend_config={'url': ...}) to share it, or another path."
            )
        httpx = require("httpx", package="httpx", extra="qdrant", purpose="qdrant")
        chain, e = [], exc
        while e is not None and len(chain) < 5:
            chain.append(e)
            e = e.__cause__ or e.__context__
        transport = (httpx.TransportError, ConnectionError, OSError, TimeoutError)
        if any(isinstance(x, transport) for x in chain) or "connection attempts failed" in text.lower():
            return BackendUnavailableError(
                f"cannot reach {self._where()} while {what}: {exc}. Start it, or set LONGTERM_QDRANT_URL / "
                "backend_config['url'] (or 'path' for the embedded mode)."
            )
        if "401" in text or "403" in text or "Unauthorized" in text:
            return ConfigurationError(f"{self._where()} refused the API key while {what}: {exc}. Check LONGTERM_QDRANT_API_KEY.")
        return BackendError(f"Qdrant error while {what} on {self._where()}: {exc}")

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A client call after the collection is ready (see ``_raw``)."""
        await self._connect()
        return await self._raw(method, *args, **kwargs)

    async def _connect(self) -> Any:
        loop = asyncio.get_running_loop()
        if self.embedded:
            if self._client is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="longterm-qdrant")
                try:
                    Path(self.path).mkdir(parents=True, exist_ok=True, mode=0o700)
                    self._client = await loop.run_in_executor(self._executor, partial(self._qc.QdrantClient, path=self.path))
                except LongTermMemoryError:
                    raise
                except Exception as exc:
                    raise self._error(exc, "opening the store") from exc
        elif self._client is None or self._loop is not loop:
            self._client = self._qc.AsyncQdrantClient(
                url=self.url, api_key=self.api_key, timeout=int(self.timeout), check_compatibility=False
            )
            self._loop, self._ready = loop, False
        if not self._ready:
            self._ready = True
            try:
                await self._ensure_collection()
            except LongTermMemoryError:
                self._ready = False
                raise
            except Exception as exc:
                self._ready = False
                raise self._error(exc, "preparing the collection") from exc
        return self._client

    async def _raw(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A client call: on the worker thread for the (synchronous) local mode."""
        if self.embedded:
            return await asyncio.get_running_loop().run_in_executor(self._executor, partial(getattr(self._client, method), *args, **kwargs))
        return await getattr(self._client, method)(*args, **kwargs)

    async def _ensure_collection(self) -> None:
        m = self._m
        if not await self._raw("collection_exists", self.collection):
            vectors = {DENSE: m.VectorParams(size=self.embedder.dim, distance=m.Distance.COSINE)} if self.embedder else {}
            try:
                await self._raw(
                    "create_collection", self.collection, vectors_config=vectors,
                    sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
                )  # fmt: skip
            except Exception as exc:
                if "already exists" not in str(exc):
                    raise
            if not self.embedded:
                for field in ("app_name", "user_id"):
                    await self._raw("create_payload_index", self.collection, field_name=field, field_schema=m.PayloadSchemaType.KEYWORD)
            return
        info = await self._raw("get_collection", self.collection)
        dense = info.config.params.vectors or {}
        have = dense.get(DENSE).size if isinstance(dense, dict) and DENSE in dense else None
        want = self.embedder.dim if self.embedder else None
        if want is not None and have != want:
            raise ConfigurationError(
                f"Qdrant collection {self.collection!r} was created with dense vectors of size {have}, but the "
                f"embedder {self.embedder.id!r} makes {want}. Vectors of different embedders never mix: use "
                "another index, or delete the collection."
            )

    # -- contract -------------------------------------------------------------------------

    def _filter(self, scope: Scope, ids: Optional[Sequence[str]] = None) -> Any:
        m = self._m
        must: list[Any] = [
            m.FieldCondition(key="app_name", match=m.MatchValue(value=scope.app_name)),
            m.FieldCondition(key="user_id", match=m.MatchValue(value=scope.user_id)),
        ]
        if ids is not None:
            must.append(m.HasIdCondition(has_id=[_point_id(i) for i in ids]))
        return m.Filter(must=must)

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        if not records:
            return
        m = self._m
        dense = await self.embedder.embed([r.text for r in records], kind="passage") if self.embedder else None
        points = []
        for i, r in enumerate(records):
            idx, vals = document_vector(r.text)
            vector: dict[str, Any] = {SPARSE: m.SparseVector(indices=idx, values=vals)}
            if dense is not None:
                vector[DENSE] = dense[i].astype(np.float32).tolist()
            points.append(m.PointStruct(id=_point_id(r.id), vector=vector, payload=r.model_dump(mode="json", exclude={"embedding"})))
        try:
            await self._call("upsert", self.collection, points=points, wait=True)
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise self._error(exc, "saving memories") from exc

    async def search(
        self,
        scope: Scope,
        query: str,
        top_k: int,
        *,
        query_vector: Optional[Sequence[float]] = None,
    ) -> list[Hit]:
        if not query_terms(query):
            return []
        m = self._m
        idx, vals = sparse_query(query)
        flt = self._filter(scope)
        sparse_q = m.SparseVector(indices=idx, values=vals)
        try:
            if self.embedder is None:
                res = await self._call("query_points", self.collection, query=sparse_q, using=SPARSE, query_filter=flt, limit=top_k, with_payload=True)
                return [Hit(record=_record(p.payload), score=p.score, arms={"fulltext": p.score}) for p in res.points]
            qv, degraded = await self.hybrid.query_vector(query, query_vector, f"qdrant {self.collection}")
            depth = self.hybrid.depth(top_k)
            if self.hybrid.fusion == "rrf" and qv is not None:
                res = await self._call(
                    "query_points", self.collection,
                    prefetch=[m.Prefetch(query=sparse_q, using=SPARSE, filter=flt, limit=depth),
                              m.Prefetch(query=qv.tolist(), using=DENSE, filter=flt, limit=depth)],
                    query=m.FusionQuery(fusion=m.Fusion.RRF), limit=top_k, with_payload=True,
                )  # fmt: skip
                return [Hit(record=_record(p.payload), score=p.score, arms={"rrf": p.score}) for p in res.points]
            text = await self._call("query_points", self.collection, query=sparse_q, using=SPARSE, query_filter=flt, limit=depth, with_payload=True)
            near = []
            if qv is not None:
                near = (await self._call("query_points", self.collection, query=qv.tolist(), using=DENSE, query_filter=flt, limit=depth, with_payload=True)).points
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise self._error(exc, "searching") from exc
        payloads = {str(p.id): p.payload for p in [*text.points, *near]}
        fused = self.hybrid.fuse({"fulltext": [(str(p.id), p.score) for p in text.points], "vector": [(str(p.id), p.score) for p in near]})
        extra = {"degraded": degraded} if degraded else {}
        return [Hit(record=_record(payloads[i]), score=s, arms=arms, extra=extra) for i, s, arms in fused[:top_k]]

    async def delete(self, scope: Scope, ids: Optional[Sequence[str]] = None) -> int:
        m = self._m
        flt = self._filter(scope, ids)
        try:
            n = (await self._call("count", self.collection, count_filter=flt, exact=True)).count
            if n:
                await self._call("delete", self.collection, points_selector=m.FilterSelector(filter=flt), wait=True)
            return n
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise self._error(exc, "deleting memories") from exc

    async def count(self, scope: Scope) -> int:
        try:
            return (await self._call("count", self.collection, count_filter=self._filter(scope), exact=True)).count
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise self._error(exc, "counting memories") from exc

    async def scan(self, scope: Scope, batch_size: int = 500) -> AsyncIterator[MemoryRecord]:
        offset = None
        while True:
            try:
                points, offset = await self._call(
                    "scroll", self.collection, scroll_filter=self._filter(scope), limit=batch_size, offset=offset, with_payload=True
                )
            except LongTermMemoryError:
                raise
            except Exception as exc:
                raise self._error(exc, "reading memories") from exc
            for p in points:
                yield _record(p.payload)
            if offset is None:
                return

    async def close(self) -> None:
        if self._client is None:
            return
        try:
            if self.embedded:
                await asyncio.get_running_loop().run_in_executor(self._executor, self._client.close)
                self._executor.shutdown(wait=False)
            else:
                await self._client.close()
        except Exception:  # closing: nothing left to do with a failure
            log.debug("closing qdrant client", exc_info=True)
        self._client = None


_FOREIGN_IDS = uuid.UUID("9b1f0c52-5f8e-4a43-9d55-6c0e1f7d2a10")


def _point_id(record_id: str) -> str:
    """The point id of a record: its id read as a UUID (ours are 128-bit hex digests).

    Any other string (a record id from elsewhere, or whatever a caller passes to delete)
    maps to a name-based UUID of its own, so it can neither fail nor meet one of ours.
    """
    try:
        return str(uuid.UUID(hex=record_id))
    except ValueError:
        return str(uuid.uuid5(_FOREIGN_IDS, record_id))


def _record(payload: dict[str, Any]) -> MemoryRecord:
    return MemoryRecord.model_validate(payload)
