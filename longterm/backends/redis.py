"""The Redis backend: memories as hashes, found with RediSearch (full text, and vectors).

The seam: ``RedisBackend`` implements the backend contract (``base.py``) over Redis Stack
(or any Redis with the RediSearch module) through the official ``redis`` asyncio client,
one connection pool per backend. ``RedisLedger`` keeps the ledger in the same Redis, so
several hosts saving for the same users share one.

Layout, for namespace ``ns = prefix + index + ":"`` (``index`` made one key segment by ``_namespace``):

| key                    | type | holds                                               |
|------------------------|------|-----------------------------------------------------|
| ``ns m:<record id>``   | hash | ``doc`` (the record as JSON), ``terms``, ``scope``, ``timestamp``[, ``embedding``]; indexed |
| ``ns s:<scope digest>``| set  | the record keys of one (app, user): count/scan/erase |
| ``ns l:<digest>``      | set  | ledger: saved event ids of one session              |
| ``ns ls:<scope digest>``| set | ledger: the session keys of one (app, user)         |
| ``ns meta``            | hash | which embedder wrote the vectors                    |
| index ``ns idx``       | FT   | ``terms`` TEXT, ``scope`` TAG, ``timestamp`` NUMERIC, ``embedding`` VECTOR (HNSW, cosine) when an embedder is set |

Why so:
- The scope is a hex digest TAG, so no id ever enters query syntax; query terms come from
  ``retrieval.text`` (letters and digits only) and are escaped anyway.
- Text is CJK-segmented here and stemmed by RediSearch (English), like the local backend.
- Writes go in one Lua script call per batch of up to 1,000 records (``_UPSERT``): such a
  save lands whole or not at all, and the client parses one reply instead of two per record.
- Hybrid search runs BM25 and KNN (both pre-filtered on the scope TAG) and fuses them
  (convex by default, or RRF; see ``retrieval.fusion``). If the vector arm fails, the
  answer comes from full text and says so in each hit.
- Every operation runs in ``_op``: our semaphore bounds the connections and one
  ``asyncio.timeout`` bounds the whole call. redis-py's own socket timeout would wrap every
  send in a task of its own and its blocking pool adds a lock dance; together they cost
  about 50 us per call, a quarter of a search (bench/redis_ingest_search.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import re
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Optional
from urllib.parse import quote

import numpy as np
from pydantic import ConfigDict

from ..config import env, parse_backend_config, redact_url
from ..errors import (
    BackendError,
    BackendUnavailableError,
    ConfigurationError,
    LongTermMemoryError,
    require,
)
from ..records import Hit, MemoryRecord, Scope
from ..retrieval.embedders import Embedder
from ..retrieval.hybrid import Hybrid, HybridSettings
from ..retrieval.text import query_terms, segment

log = logging.getLogger("longterm.redis")

DEFAULT_URL = "redis://127.0.0.1:6379/0"
#: Hash fields: what is indexed, plus the whole record as one JSON document (one field to
#: write and return instead of twelve: a third of the client's time per record).
FIELDS = ("doc",)
#: Left out of the document: vectors (their own field), and content that is just the text.
_NO_VECTOR = {"embedding"}
_TEXT_ONLY = {"embedding", "content"}
START_HINT = (
    "Run Redis Stack (`docker run -p 6379:6379 redis/redis-stack-server`), or start redis-server "
    "with `--loadmodule /path/to/redisearch.so`."
)
#: Records per script call: a save of up to this many lands whole or not at all; a larger
#: one is written in several calls (a failure part-way leaves chunks the retry rewrites
#: identically) so that no single call blocks the server for long.
SCRIPT_BATCH = 1000
#: One call writes a batch, scope by scope: each record's hash, then the scope set's
#: members. KEYS: per scope, its set key then its record keys. ARGV: 1 if records carry a
#: vector else 0, then per scope its tag and record count, then per record its doc, terms,
#: timestamp [and embedding]. Field names and the scope tag live in the script, so a record
#: costs four arguments to encode, not ten.
#: (Measured against a MULTI of HSETs: the same server work, but one reply to parse
#: instead of two per record, which more than halved the client's CPU per record.)
_UPSERT = """
local vec = ARGV[1] == '1'
local k, a = 1, 2
while k <= #KEYS do
  local set, tag, count = KEYS[k], ARGV[a], tonumber(ARGV[a + 1])
  k, a = k + 1, a + 2
  local members = {}
  for i = 1, count do
    local key = KEYS[k]
    if vec then
      redis.call('HSET', key, 'doc', ARGV[a], 'terms', ARGV[a + 1], 'scope', tag, 'timestamp', ARGV[a + 2], 'embedding', ARGV[a + 3])
      a = a + 4
    else
      redis.call('HSET', key, 'doc', ARGV[a], 'terms', ARGV[a + 1], 'scope', tag, 'timestamp', ARGV[a + 2])
      a = a + 3
    end
    members[#members + 1] = key
    if #members == 500 then redis.call('SADD', set, unpack(members)); members = {} end
    k = k + 1
  end
  if #members > 0 then redis.call('SADD', set, unpack(members)) end
end
return k - 1
"""
_DELETE_ONE = """
if redis.call('SREM', KEYS[1], KEYS[2]) == 1 then redis.call('DEL', KEYS[2]) return 1 end
return 0
"""


class RedisConfig(HybridSettings):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    url: Optional[str] = None
    """``redis://[user:password@]host:port/db``; default ``$LONGTERM_REDIS_URL``."""
    host: Optional[str] = None
    port: Optional[int] = None
    username: Optional[str] = None
    password: Optional[str] = None
    db: Optional[int] = None
    prefix: str = "longterm:"
    index: str = "default_app"
    socket_timeout: float = 10.0
    """Seconds any one operation may take (waiting for a free connection included)."""
    max_connections: int = 32
    """Connections per memory; more concurrent calls wait for one."""


@functools.lru_cache(maxsize=8192)
def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def _namespace(index: str) -> str:
    """``index`` as one key segment: without ``:``, so no index's keys can fall under
    another's RediSearch PREFIX (index ``a`` indexes ``<prefix>a:m:``, which index ``a:m``
    would otherwise write under). Names of letters, digits, ``_``, ``-`` and ``.`` stay as
    they are; any other gets them replaced and a digest of the original appended."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", index)
    if safe != index:
        safe += "-" + hashlib.sha256(index.encode()).hexdigest()[:8]
    return safe


#: Python 3.11+ bounds each operation with ``asyncio.timeout`` (cheap); 3.10 falls back to
#: the client's per-socket timeout, which wraps every send in a task of its own.
_DEADLINES = sys.version_info >= (3, 11)


def resolve_url(cfg: RedisConfig) -> str:
    if cfg.url:
        return cfg.url
    host = cfg.host or env("DATABASE_REDIS_HOST")
    if host is None:
        url = env("LONGTERM_REDIS_URL", "REDIS_URL")
        if url:
            return url
    host = host or "127.0.0.1"
    port = cfg.port or int(env("DATABASE_REDIS_PORT") or 6379)
    db = cfg.db if cfg.db is not None else int(env("DATABASE_REDIS_DB") or 0)
    user = cfg.username or env("DATABASE_REDIS_USERNAME") or ""
    password = cfg.password or env("DATABASE_REDIS_PASSWORD") or ""
    auth = f"{quote(user)}:{quote(password)}@" if (user or password) else ""
    return f"redis://{auth}{host}:{port}/{db}"


_QUERY_ESCAPE = re.compile(r"([^\w]|_)", re.UNICODE)


def _escape(term: str) -> str:
    if term.isalnum() and term.isascii():
        return term
    return _QUERY_ESCAPE.sub(r"\\\1", term)


class RedisBackend:
    name: ClassVar[str] = "redis"

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        prefix: str = "longterm:",
        index: str = "default_app",
        socket_timeout: float = 10.0,
        max_connections: int = 32,
        **hybrid: Any,
    ) -> None:
        self._redis_mod = require("redis.asyncio", package="redis", extra="redis", purpose="The redis backend")
        self._exc = require("redis.exceptions", package="redis", extra="redis", purpose="The redis backend")
        self.url = url
        self.index = index
        self.ns = f"{prefix}{_namespace(index)}:"
        self.index_name = f"{self.ns}idx"
        self.hybrid = Hybrid(**hybrid)
        self.embedder: Optional[Embedder] = self.hybrid.embedder
        self._socket_timeout = socket_timeout
        self._max_connections = max_connections
        self._client: Any = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._ready = False
        self._delete_one: Any = None
        self._upsert: Any = None
        self._gate: Optional[asyncio.Semaphore] = None

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> "RedisBackend":
        cfg = parse_backend_config(RedisConfig, config, cls.name)
        return cls(
            resolve_url(cfg), prefix=cfg.prefix, index=cfg.index, socket_timeout=cfg.socket_timeout,
            max_connections=cfg.max_connections, **cfg.hybrid_kwargs(),
        )  # fmt: skip

    # -- connection and errors --------------------------------------------------------------

    def _errors(self, exc: Exception, what: str) -> LongTermMemoryError:
        exceptions = self._exc
        where = redact_url(self.url)
        if isinstance(exc, TimeoutError) and not str(exc):  # our deadline
            return BackendUnavailableError(
                f"Redis at {where} did not answer within {self._socket_timeout:g} s while {what}. "
                "Check that it is up and not overloaded, or raise backend_config['socket_timeout']."
            )
        if isinstance(exc, exceptions.AuthenticationError):
            return ConfigurationError(f"Redis at {where} refused the credentials: {exc}. Check the password in the URL or backend_config.")
        if isinstance(exc, (exceptions.ConnectionError, exceptions.TimeoutError, OSError)):
            return BackendUnavailableError(
                f"cannot reach Redis at {where} while {what}: {exc}. Start it, or point "
                "LONGTERM_REDIS_URL / backend_config['url'] at a running Redis Stack."
            )
        if isinstance(exc, exceptions.ResponseError) and "unknown command" in str(exc).lower() and "ft." in str(exc).lower():
            return BackendUnavailableError(f"Redis at {where} has no RediSearch module ({exc}). {START_HINT}")
        return BackendError(f"Redis error while {what} at {where}: {exc}")

    async def _conn(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            # Pools are bound to the loop that made them; a new loop gets a new pool.
            # Our semaphore (see _op) bounds the connections: a burst of concurrent calls
            # waits for a free one instead of failing with "Too many connections". (redis-py's
            # BlockingConnectionPool does the same, measured 50 us slower per call.)
            pool = self._redis_mod.ConnectionPool.from_url(
                self.url,
                max_connections=self._max_connections,
                socket_timeout=None if _DEADLINES else self._socket_timeout,
                socket_connect_timeout=self._socket_timeout,
                health_check_interval=30,
                protocol=2,  # RESP2 replies on every server and client version (redis-py 8 defaults to RESP3)
            )
            self._client = self._redis_mod.Redis(connection_pool=pool)
            self._gate = asyncio.Semaphore(self._max_connections)
            self._loop, self._ready = loop, False
            self._delete_one = self._client.register_script(_DELETE_ONE)
            self._upsert = self._client.register_script(_UPSERT)
        if not self._ready:
            try:
                await self._ensure_index(self._client)
            except LongTermMemoryError:
                raise
            except Exception as exc:
                raise self._errors(exc, "preparing the index") from exc
            self._ready = True
        return self._client

    @contextlib.asynccontextmanager
    async def _op(self, what: str) -> AsyncIterator[Any]:
        """The client, for one operation: at most ``max_connections`` at once, bounded by
        ``socket_timeout`` (waiting for a connection included), errors made ours.

        A deadline that fires mid-reply makes redis-py drop that connection, so no later
        call can read a stale reply.
        """
        r = await self._conn()
        assert self._gate is not None
        deadline = asyncio.timeout(self._socket_timeout) if _DEADLINES else contextlib.nullcontext()  # type: ignore[attr-defined]
        try:
            async with deadline:
                async with self._gate:
                    yield r
        except LongTermMemoryError:
            raise
        except Exception as exc:
            raise self._errors(exc, what) from exc

    def _schema(self) -> list[Any]:
        schema: list[Any] = ["terms", "TEXT", "scope", "TAG", "timestamp", "NUMERIC", "SORTABLE"]
        if self.embedder is not None:
            schema += ["embedding", "VECTOR", "HNSW", "6", "TYPE", "FLOAT32", "DIM", str(self.embedder.dim), "DISTANCE_METRIC", "COSINE"]
        return schema

    async def _ensure_index(self, r: Any) -> None:
        meta_key = self.ns + "meta"
        want = self.embedder.id if self.embedder else ""
        stored = await r.hget(meta_key, "embedder")
        if stored is not None and stored.decode() != want:
            had, has = stored.decode() or "no embedder", want or "no embedder"
            raise ConfigurationError(
                f"Redis index {self.index_name!r} was written with {had!r}, but this memory is "
                f"configured with {has!r}. Vectors of different "
                "embedders never mix: use another index name, or erase the index first."
            )
        try:
            info = await r.execute_command("FT.INFO", self.index_name)
        except self._exc.ResponseError as exc:
            msg = str(exc).lower()
            if "unknown index" not in msg and "no such index" not in msg and "not found" not in msg:
                raise
            try:
                await r.execute_command(
                    "FT.CREATE", self.index_name, "ON", "HASH", "PREFIX", "1", self.ns + "m:",
                    "LANGUAGE", "english", "STOPWORDS", "0", "SCHEMA", *self._schema(),
                )  # fmt: skip
            except self._exc.ResponseError as exc2:
                if "already exists" not in str(exc2).lower():
                    raise
            await r.hset(meta_key, "embedder", want)
            return
        self._check_schema(info)
        await r.hsetnx(meta_key, "embedder", want)

    def _check_schema(self, info: list[Any]) -> None:
        fields = dict(zip(info[::2], info[1::2]))
        attrs = fields.get(b"attributes") or fields.get("attributes") or []
        names = set()
        for a in attrs:
            d = dict(zip(a[::2], a[1::2]))
            names.add((d.get(b"attribute") or d.get(b"identifier") or b"").decode())
        want = {"terms", "scope", "timestamp"} | ({"embedding"} if self.embedder else set())
        if names != want:
            raise ConfigurationError(
                f"the RediSearch index {self.index_name!r} exists with fields {sorted(names)}, but this "
                f"configuration needs {sorted(want)}. Use another index name, or drop it with "
                f"`FT.DROPINDEX {self.index_name}` (the memories stay) and reconnect."
            )

    # -- contract -----------------------------------------------------------------------------

    def _scope_set(self, app_name: str, user_id: str) -> str:
        return self._scope_set_of(_digest(app_name, user_id))

    def _scope_set_of(self, tag: str) -> str:
        return f"{self.ns}s:{tag}"

    def _key(self, record_id: str) -> str:
        return f"{self.ns}m:{record_id}"

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        if not records:
            return
        vectors = None
        if self.embedder is not None:
            vectors = await self.embedder.embed([r.text for r in records], kind="passage")
        for start in range(0, len(records), SCRIPT_BATCH):
            keys, args = self._upsert_args(records, vectors, start, min(start + SCRIPT_BATCH, len(records)))
            async with self._op("saving memories"):
                await self._upsert(keys=keys, args=args)

    def _upsert_args(self, records: Sequence[MemoryRecord], vectors: Optional[np.ndarray], start: int, end: int) -> tuple[list[str], list[Any]]:
        """KEYS and ARGV of ``_UPSERT`` for ``records[start:end]`` (layout in its comment)."""
        groups: dict[tuple[str, str], list[int]] = {}
        for i in range(start, end):
            groups.setdefault((records[i].app_name, records[i].user_id), []).append(i)
        keys: list[str] = []
        args: list[Any] = [0 if vectors is None else 1]
        for (app_name, user_id), members in groups.items():
            tag = _digest(app_name, user_id)
            keys.append(self._scope_set_of(tag))
            args += (tag, len(members))
            for i in members:
                rec = records[i]
                keys.append(self._key(rec.id))
                args += (rec.model_dump_json(exclude=_TEXT_ONLY if rec.text_only_content() else _NO_VECTOR), segment(rec.text), repr(rec.timestamp))
                if vectors is not None:
                    args.append(vectors[i].astype(np.float32).tobytes())
        return keys, args

    @staticmethod
    def _record(values: Sequence[Optional[bytes]]) -> MemoryRecord:
        return MemoryRecord.model_validate_json(values[0])

    def _parse_search(self, reply: list[Any], with_scores: bool) -> list[tuple[MemoryRecord, float]]:
        out = []
        step = 3 if with_scores else 2
        for i in range(1, len(reply), step):
            score = float(reply[i + 1]) if with_scores else 0.0
            fields = reply[i + step - 1]
            d = dict(zip(fields[::2], fields[1::2]))
            values = [d.get(f.encode()) for f in FIELDS]
            if not with_scores and b"vscore" in d:
                score = 1.0 - float(d[b"vscore"])
            out.append((self._record(values), score))
        return out

    async def _fulltext(self, r: Any, scope_tag: str, terms: list[str], k: int) -> list[tuple[MemoryRecord, float]]:
        q = f"@scope:{{{scope_tag}}} @terms:({'|'.join(_escape(t) for t in terms)})"
        reply = await r.execute_command(
            "FT.SEARCH", self.index_name, q, "WITHSCORES", "SCORER", "BM25",
            "RETURN", str(len(FIELDS)), *FIELDS, "LIMIT", "0", str(k), "DIALECT", "2",
        )  # fmt: skip
        return self._parse_search(reply, True)

    async def _vector(self, r: Any, scope_tag: str, vector: np.ndarray, k: int) -> list[tuple[MemoryRecord, float]]:
        q = f"(@scope:{{{scope_tag}}})=>[KNN {k} @embedding $vec AS vscore]"
        reply = await r.execute_command(
            "FT.SEARCH", self.index_name, q, "PARAMS", "2", "vec", vector.astype(np.float32).tobytes(),
            "SORTBY", "vscore", "RETURN", str(len(FIELDS) + 1), *FIELDS, "vscore",
            "LIMIT", "0", str(k), "DIALECT", "2",
        )  # fmt: skip
        return self._parse_search(reply, False)

    async def search(
        self,
        scope: Scope,
        query: str,
        top_k: int,
        *,
        query_vector: Optional[Sequence[float]] = None,
    ) -> list[Hit]:
        terms = query_terms(query, stem=False)
        if not terms:
            return []
        tag = _digest(scope.app_name, scope.user_id)
        fetch = self.hybrid.depth(top_k)
        async with self._op("searching") as r:
            text_hits = await self._fulltext(r, tag, terms, fetch)
        if self.embedder is None:
            return [Hit(record=rec, score=s, arms={"fulltext": s}) for rec, s in text_hits[:top_k]]
        vec_hits: list[tuple[MemoryRecord, float]] = []
        qv, degraded = await self.hybrid.query_vector(query, query_vector, f"redis {self.index_name}")
        if qv is not None:
            try:
                async with self._op("searching by vector") as r:
                    vec_hits = await self._vector(r, tag, qv, fetch)
            except LongTermMemoryError as exc:  # degrade visibly: full text still answers
                cause = exc.__cause__ or exc
                degraded = f"vector search failed ({type(cause).__name__}: {cause}); results are full text only"
                log.warning("redis %s: %s", self.index_name, degraded)
        by_id = {rec.id: rec for rec, _ in text_hits + vec_hits}
        fused = self.hybrid.fuse({"fulltext": [(rec.id, s) for rec, s in text_hits], "vector": [(rec.id, s) for rec, s in vec_hits]})
        extra = {"degraded": degraded} if degraded else {}
        return [Hit(record=by_id[i], score=s, arms=arms, extra=extra) for i, s, arms in fused[:top_k]]

    async def delete(self, scope: Scope, ids: Optional[Sequence[str]] = None) -> int:
        members = self._scope_set(scope.app_name, scope.user_id)
        n = 0
        if ids is not None:
            for i in ids:
                async with self._op("deleting memories"):
                    n += int(await self._delete_one(keys=[members, self._key(i)]))
            return n
        while True:
            async with self._op("deleting memories") as r:
                batch = await r.spop(members, 500)
                if not batch:
                    return n
                n += await r.delete(*batch)

    async def count(self, scope: Scope) -> int:
        async with self._op("counting memories") as r:
            return int(await r.scard(self._scope_set(scope.app_name, scope.user_id)))

    async def scan(self, scope: Scope, batch_size: int = 500) -> AsyncIterator[MemoryRecord]:
        members = self._scope_set(scope.app_name, scope.user_id)
        cursor = 0
        while True:
            async with self._op("reading memories") as r:  # one batch per operation: the
                cursor, keys = await r.sscan(members, cursor=cursor, count=batch_size)  # consumer may be slow
                async with r.pipeline(transaction=False) as pipe:
                    for key in keys:
                        pipe.hmget(key, *FIELDS)
                    rows = await pipe.execute()
            for values in rows:
                if values and values[0] is not None:
                    yield self._record(values)
            if cursor == 0:
                return

    def make_ledger(self) -> "RedisLedger":
        return RedisLedger(self)

    async def close(self) -> None:
        if self._client is not None:
            try:
                await self._client.aclose(close_connection_pool=True)
            except Exception:  # closing a pool whose loop is gone: nothing left to release
                log.debug("closing redis client", exc_info=True)
            self._client = None


class RedisLedger:
    """The ledger in the backend's Redis: hosts saving for the same users share it."""

    def __init__(self, backend: RedisBackend) -> None:
        self._b = backend

    def _key(self, scope: Scope, session_id: str) -> str:
        return f"{self._b.ns}l:{_digest(scope.app_name, scope.user_id, session_id)}"

    def _sessions(self, scope: Scope) -> str:
        return f"{self._b.ns}ls:{_digest(scope.app_name, scope.user_id)}"

    async def saved(self, scope: Scope, session_id: str) -> set[str]:
        async with self._b._op("reading the ledger") as r:
            return {m.decode() for m in await r.smembers(self._key(scope, session_id))}

    async def mark_saved(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        if not event_ids:
            return
        key = self._key(scope, session_id)
        async with self._b._op("writing the ledger") as r:
            async with r.pipeline(transaction=True) as pipe:
                pipe.sadd(key, *event_ids)
                pipe.sadd(self._sessions(scope), key)
                await pipe.execute()

    async def forget(self, scope: Scope) -> None:
        async with self._b._op("erasing the ledger") as r:
            keys = await r.smembers(self._sessions(scope))
            if keys:
                await r.delete(*keys)
            await r.delete(self._sessions(scope))

    async def close(self) -> None:
        return None
