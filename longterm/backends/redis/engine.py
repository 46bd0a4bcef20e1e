"""The Redis engine: memories as hashes, found with RediSearch (full text, and vectors).

The seam: ``RedisBackend`` implements the engine primitives (``core.engine``) over Redis Stack
(or any Redis with RediSearch) with the blocking ``redis.Redis`` client: one connection pool
per memory, used from the core's ``max_connections`` worker threads within ``socket_timeout``;
its reads are ``reads.RedisReads``', its erases ``erasing.RedisErasures``', its records without
vectors ``vectors.RedisVectors``' (``embeds_later``: listed by the save script, embedded later).

Why so, in short (key layout and the longer story: docs/backends.md, "redis"): the scope is a
TAG (a hex digest) and terms are escaped, so no id or user text is query syntax (a record's
session is a TAG digest too: a hit's neighbours are reads by time within it, ``core.windows``);
full text ranks as local's (our terms, NOSTEM, BM25STD); a filter is a clause of the same query over
``timestamp`` and the ``ftags`` TAG each record carries (``filtering``; an older store's and an older
process's records given theirs by ``tokens``); a save is one Lua call per ``SCRIPT_BATCH``
records with its ledger marks (leaving out events the ledger holds, and records stored exactly so),
each with its ``expires`` when it has one (removed when rewritten without; what a read at a moment
compares, ``reads``); an erase of a user or session marks itself first, then goes one call per
batch (``core.erasures``). An overwrite of an id (a correction) replaces its hash's fields in place:
the old words stay where an erase leaves them, in RediSearch's index until its GC and in the AOF and
RDB files until a purge (``_purge``).
With ``sentinels`` the client follows the primary Sentinel names; ``wait_replicas`` makes each save's
script wait (``WAIT``) for that many replicas, on the script's own connection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from typing_extensions import override

from ...config import parse_backend_config, redact_url
from ...config.backends import RedisConfig, resolve_url
from ...core.aliases import Ids, Records, Vectors
from ...core.engine import Engine
from ...core.errors import Rule
from ...core.scope import scope_key
from ...core.where import living
from ...errors import BackendError, BackendUnavailableError, ConfigurationError, require
from ...records import Scope, parse_record
from ...retrieval.text import index_terms
from .erasing import RedisErasures
from .filtering import expiry, tags
from .purge import purge
from .reads import RedisReads
from .scripts import (
    ALL,
    ERASE,
    FAILOVER_HINT,
    INDEX_KEY,
    INDEX_ON,
    MARK,
    NEW_ONLY,
    NO_INDEX,
    OVER,
    SAVE,
    SCHEMA,
    SCRIPT_BATCH,
    SEGMENT,
    START_HINT,
    UNEMBEDDED,
    UNMARK,
    VECTOR,
    claim_index,
    namespace,
    session_tag,
)
from .tokens import redis_tokens
from .upgrade import (
    redis_expiry,
    redis_ids,
    redis_listed,
    redis_saved,
    redis_sessions,
    redis_v1,
    redis_vector_sizes,
    sessions_of,
)
from .vectors import LIST_UNEMBEDDED, WRITE_VECTORS, RedisVectors

if TYPE_CHECKING:
    pass


class RedisBackend(RedisReads, RedisErasures, RedisVectors, Engine):
    name: ClassVar[str] = "redis"
    unreachable: ClassVar[str] = "Start it, or point LONGTERM_REDIS_URL or backend_config['url'] at a Redis Stack."
    timeout_key: ClassVar[str] = "socket_timeout"
    atomic_save = True  # records and ledger marks in one script
    embeds_later = True  # saved without a vector: listed by the same script (``vectors``)
    purges = True
    marks_erasures = True  # an erase of a user is many script calls: its mark first (``core.erasures``)
    rewrites_alive = True  # ``SAVE`` in mode ``OVER``: the check and the write in one script

    def __init__(self, config: RedisConfig | None = None, **options: Any) -> None:
        """``RedisBackend(url=..., index=...)``: the keys of ``RedisConfig``, or one."""
        self._redis = require("redis", package="redis", extra="redis", purpose="The redis backend")
        cfg = config or parse_backend_config(RedisConfig, options, self.name)
        self.cfg, self.index, self.prefix = cfg, cfg.index, cfg.prefix
        self.url = None if cfg.sentinels else resolve_url(cfg)
        self.ns = namespace(cfg.prefix, cfg.index)
        self.legacy = cfg.prefix.count(":") == 1
        """The previous release's key layout and scope tags (a one-segment prefix)."""
        self.index_name = f"{self.ns}search"
        if cfg.sentinels:
            nodes = ",".join(f"{h}:{p}" for h, p in cfg.sentinels)
            where = f"sentinel://{nodes}/{cfg.service_name}"
        else:
            assert self.url is not None
            where = redact_url(self.url)
        t, n = cfg.socket_timeout, cfg.max_connections
        store_id, later = f"redis:{where}#{self.ns}", cfg.embed_later
        super().__init__(where=where, store_id=store_id, workers=n, timeout=t, embed_later=later, **cfg.hybrid_kwargs())
        self._met: dict[str, float] = {}
        self._orphans: list[Any] = []
        """Clients inherited from a parent process (``_forget_after_fork``): kept, never closed."""
        self._connect()

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> RedisBackend:
        return cls(parse_backend_config(RedisConfig, config, cls.name))

    def _connect(self) -> None:
        """A client with a connection pool of its own (a URL's, or the primary Sentinel names)."""
        cfg, t, n = self.cfg, self.cfg.socket_timeout, self.cfg.max_connections
        # One thread per connection. Sockets wait a little longer than a caller does, so a caller hears
        # "did not answer within t s" and the thread is free soon after; RESP2: the same replies everywhere.
        timeouts = {"socket_timeout": t + 1, "socket_connect_timeout": t + 1}
        if cfg.sentinels:
            from redis.sentinel import Sentinel

            # The connections' options, of mixed types (redis 8 types Sentinel's own parameters).
            conn: dict[str, Any] = {**timeouts, "username": cfg.username, "password": cfg.password, "db": cfg.db or 0}
            sentinel = Sentinel(cfg.sentinels, sentinel_kwargs=timeouts, protocol=2, **conn)
            self._r = sentinel.master_for(cfg.service_name, max_connections=n)
        else:
            try:
                pool = self._redis.BlockingConnectionPool.from_url(
                    self.url, max_connections=n, protocol=2, timeout=t + 1, **timeouts
                )
            except ValueError as exc:  # a scheme or a port redis-py cannot read
                raise ConfigurationError(
                    f"the redis url {self.where!r} is not valid ({exc}); {RedisConfig.URL_FORM}"
                ) from None
            self._r = self._redis.Redis(connection_pool=pool)
        self._save, self._erase, self._mark, self._unmark, self._fill, self._listing = (
            self._r.register_script(s) for s in (SAVE, ERASE, MARK, UNMARK, WRITE_VECTORS, LIST_UNEMBEDDED)
        )

    @override
    def _forget_after_fork(self) -> None:
        # redis-py closes a connection's socket without shutting it down in another pid, but kept
        # here nothing is closed at all: the parent's connections stay exactly as they were.
        self._orphans.append(self._r)
        self._connect()

    @override
    def _rules(self) -> Sequence[Rule]:
        x = require("redis.exceptions", package="redis", extra="redis", purpose="The redis backend")
        return (
            Rule(x.AuthenticationError, ConfigurationError, "Check the password in the URL or backend_config."),
            Rule(x.TimeoutError, BackendUnavailableError, "Check that it is not overloaded, or raise socket_timeout."),
            Rule(x.ConnectionError, BackendUnavailableError, self.unreachable),
            Rule(x.ReadOnlyError, BackendUnavailableError, FAILOVER_HINT),
            *(Rule(s, BackendUnavailableError, FAILOVER_HINT) for s in ("masterdown", "loading redis", "noreplicas")),
            Rule("unknown command 'ft.", BackendUnavailableError, f"This Redis has no RediSearch module. {START_HINT}"),
            *(Rule(s, BackendError, "Its index is gone (restarted empty?).", reopen=True) for s in NO_INDEX),
        )

    def _tag(self, app_name: str, user_id: str) -> str:
        """The scope's TAG (and set key): salted with the namespace outside the legacy layout (see ``namespace``)."""
        return scope_key(app_name, user_id) if self.legacy else scope_key(self.ns, app_name, user_id)

    def _set(self, scope: Scope) -> str:
        return f"{self.ns}s:{self._tag(scope.app_name, scope.user_id)}"

    def _marks_key(self, tag: str) -> str:
        """The hash of a scope's erasure marks (``Erasure.spec`` -> the clock at its start)."""
        return f"{self.ns}e:{tag}"

    def _ledger_key(self, scope: Scope, session_id: str) -> str:
        return f"{self.ns}l:{scope_key(scope.app_name, scope.user_id, session_id)}"

    def _sessions_key(self, scope: Scope) -> str:
        """The set of the scope's ledger sessions (``SAVE`` adds to it; ``upgrade.sessions_of``)."""
        return f"{self.ns}ls:{self._tag(scope.app_name, scope.user_id)}"

    @override
    def _open(self) -> None:
        vector = () if self.embedder is None else (*VECTOR, self.embedder.dim)
        # A store never opened (no ``ns meta``, no index of 0.1) has no record to scan: its index skips
        # RediSearch's initial scan, which walks the server's whole keyspace and re-indexed the first
        # records saved meanwhile (BM25's statistics moved under two reads of one question).
        opened = claim_index(self._r, self.ns, self.index, self.where)  # refuses another index's store
        fresh = not opened and f"{self.ns}idx".encode() not in self._r.execute_command("FT._LIST")
        skip = ("SKIPINITIALSCAN",) if fresh else ()
        try:
            made = bool(
                self._r.execute_command(
                    "FT.CREATE", self.index_name, *INDEX_ON, self.ns + "m:", *skip, *SCHEMA, *vector
                )
            )
        except Exception as exc:
            if "already exists" not in str(exc).lower():
                raise
            made = False
        upgraded = redis_v1(self._r, self.ns)
        redis_sessions(self._r, self.ns, self.index_name, empty=made and not upgraded)
        redis_saved(self._r, self.ns, self.index_name, empty=made and not upgraded)
        redis_expiry(self._r, self.ns, self.index_name, empty=made and not upgraded)
        redis_ids(self._r, self.ns, self.index_name, empty=made and not upgraded)
        redis_tokens(self._r, self.ns, self.index_name, empty=made and not upgraded)
        redis_listed(self._r, self.ns, empty=made and not upgraded)
        redis_vector_sizes(self._r, self.ns, self.index_name, empty=made and not upgraded)

    @override
    def _meta_get(self, key: str) -> str | None:
        return None if (value := self._r.hget(self.ns + "meta", key)) is None else value.decode()

    @override
    def _meta_set(self, key: str, value: str) -> None:
        self._r.hset(self.ns + "meta", key, value)

    @override
    def _write(self, records: Records, vectors: Vectors) -> None:
        self._put(records, vectors, None, [])

    @override
    def _rewrite(self, records: Records, vectors: Vectors) -> list[str]:
        """``SAVE`` in mode ``OVER``: the check and the write in one script."""
        prefix = len(f"{self.ns}m:")
        return [key.decode()[prefix:] for key in self._put(records, vectors, None, [], OVER)]

    @override
    def _commit(
        self, records: Records, vectors: Vectors, scope: Scope, session_id: str, event_ids: Ids, new_only: bool = False
    ) -> None:
        """One ``SAVE`` per batch, the marks with the last; ``new_only`` is read inside the script."""
        self._put(records, vectors, (scope, session_id), event_ids, NEW_ONLY if new_only else ALL)

    @override
    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        self._put((), None, (scope, session_id), event_ids)

    def _put(
        self,
        records: Records,
        vectors: Vectors,
        of: tuple[Scope, str] | None,
        marks: Ids,
        kind: int = ALL,
    ) -> list[bytes]:
        """One ``SAVE`` call per ``SCRIPT_BATCH`` records (``kind``: ``scripts.ALL``, ``NEW_ONLY`` or
        ``OVER``); ``marks`` go into the ledger of session ``of`` (scope, session id) with the last, and
        that session into the scope's ledger sessions. The keys written over (``OVER``)."""
        meta = self.ns + "meta"
        ledger, listed, sid = meta, meta, ""
        if of is not None:
            ledger, listed, sid = self._ledger_key(*of), self._sessions_key(of[0]), of[1]
        vecs = None if vectors is None else vectors.astype("float32", copy=False)
        written: list[bytes] = []
        for start in range(0, len(records), SCRIPT_BATCH) or (0,):
            batch = range(start, min(start + SCRIPT_BATCH, len(records)))
            now = marks if batch.stop == len(records) else ()
            keys: list[str] = [meta, ledger, listed, self.ns + UNEMBEDDED]
            args: list[Any] = [self._vectors_mode(vecs), kind, len(now), sid, *now]
            groups: dict[str, list[int]] = {}
            for i in batch:
                groups.setdefault(self._tag(records[i].app_name, records[i].user_id), []).append(i)
            for tag, members in groups.items():
                keys += (f"{self.ns}s:{tag}", self._marks_key(tag))
                args += (tag, len(members))
                for i in members:
                    rec = records[i]
                    keys.append(f"{self.ns}m:{rec.id}")
                    doc = rec.model_dump_json(exclude={"content"} if rec.text_only_content() else None)
                    terms, session = " ".join(index_terms(rec.text)), session_tag(rec.session_id)
                    args += (rec.event_id, doc, terms, repr(rec.timestamp), session, tags(rec), expiry(rec))
                    if vecs is not None:
                        args.append(vecs[i].tobytes())
            if len(keys) > 4 or now:
                written += self._script(keys, args)
        return written

    def _script(self, keys: list[str], args: list[Any]) -> list[bytes]:
        """One ``SAVE`` call (what it returns); with ``wait_replicas``, then ``WAIT`` on the same
        connection (a pipeline)."""
        want = self.cfg.wait_replicas
        if not want:
            return list(self._save(keys=keys, args=args) or [])
        with self._r.pipeline(transaction=False) as pipe:
            self._save(keys=keys, args=args, client=pipe)
            pipe.execute_command("WAIT", want, int(self.cfg.wait_timeout * 1000))
            replies = pipe.execute()
            acked = int(replies[-1])
        if acked < want:
            raise BackendUnavailableError(
                f"redis at {self.where}: a save reached the primary, but {acked} of the {want} replicas asked for "
                f"(backend_config['wait_replicas']) acknowledged it within {self.cfg.wait_timeout:g} s, so it could "
                "be lost with the primary. Retry the save (a retry writes nothing twice); check the replicas' "
                "link, or raise wait_timeout."
            )
        return list(replies[0] or [])

    @override
    def _scopes(self, at: float | None = None) -> list[tuple[str, str, int]]:
        """``_listed``; at a moment where anything expired by it, each scope counted again (``_count``)."""
        listed = self._listed(self.ns)
        ask = ("FT.SEARCH", f"{self.ns}search", f"@expires:[-inf {at!r}]", "DIALECT", 2, "LIMIT", 0, 0)
        if at is None or not int(self._r.execute_command(*ask)[0]):
            return listed
        alive = living(None, at)
        counted = [(a, u, self._count(Scope.stored(a, u), alive)) for a, u, _ in listed]
        return [(a, u, n) for a, u, n in counted if n]

    def _listed(self, ns: str, first: bool = False) -> list[tuple[str, str, int]]:
        """(app, user, count) of the scopes of namespace ``ns``: its index's scope tags (``FT.TAGVALS``,
        which may still list emptied ones), each set's size (less what an erase under way covers), and
        one record naming (app, user). ``first``: stop at the first scope with records."""
        tags = [t.decode() for t in self._r.execute_command("FT.TAGVALS", f"{ns}search", "scope")]
        with self._r.pipeline(transaction=False) as pipe:
            for tag in tags:
                pipe.scard(f"{ns}s:{tag}")
                pipe.srandmember(f"{ns}s:{tag}")
            pipe.smembers(f"{ns}erasing")
            *sizes, erasing = pipe.execute()
        out = []
        for tag, count, key in zip(tags, sizes[::2], sizes[1::2], strict=True):
            if count and tag.encode() in erasing:
                count = self._visible_count(ns, tag)
            doc = self._r.hget(key, "doc") if count else None
            if doc is not None:
                rec = parse_record(doc)
                out.append((rec.app_name, rec.user_id, int(count)))
                if first:
                    break
        return out

    @override
    def _indices(self) -> list[str]:
        found = []
        for raw in self._r.execute_command("FT._LIST"):
            ns = (raw.decode() if isinstance(raw, bytes) else str(raw)).removesuffix("search")
            segment = self._segment_of(ns)
            if segment is None or not self._listed(ns, first=True):
                continue
            name = self._r.hget(ns + "meta", INDEX_KEY)
            found.append(segment if name is None else name.decode())  # a store of 0.x: its key segment
        return sorted(found)

    def _segment_of(self, ns: str) -> str | None:
        """The index segment of namespace ``ns`` when it is one of this prefix's, in this layout."""
        if not ns.startswith(self.prefix):
            return None
        rest = ns[len(self.prefix) :]
        form = rf"([{SEGMENT}]+):" if self.legacy else rf"\{{([{SEGMENT}]+)\}}:"
        m = re.fullmatch(form, rest)
        return None if m is None else m.group(1)

    @override
    def _purge(self) -> None:
        purge(self._r, self.where)  # ``purge``: the AOF and RDB rewritten without what erases deleted

    @override
    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        return {m.decode() for m in self._r.smembers(self._ledger_key(scope, session_id))}

    @override
    def _ledger_sessions(self, scope: Scope) -> list[str]:
        return sessions_of(self._r, self.ns, self._sessions_key(scope), self._set(scope))

    @override
    def _close(self) -> None:
        self._r.connection_pool.disconnect()
