"""A storage backend in Python dicts: a TEMPLATE for writing one for your engine.

Copy this file and replace the dicts with your engine's client. ``DictBackend`` subclasses
``longterm.core.engine.Engine`` and implements only its blocking primitives, with the default
capability flags (it keeps its ledger, applies filters whole and rewrites only what is there); the core runs them on the
engine's own thread, applies the deadline (``timeout``), embeds, fuses, writes the records
and then the ledger on a save (an engine with transactions declares ``atomic_save = True``
and implements ``_commit`` to do both in one), and turns errors into
``LongTermMemoryError``s with the ``Rule``s of ``rules`` (guide, with the table of flags:
docs/backends.md). Full text is a small BM25 over the terms of ``longterm.retrieval.text``,
which every engine shares (stemming, accent folding, CJK bigrams); there are no vectors.
A filter (``where``) is applied whole, in Python, before the cut (``filters_exact``); an engine
with a query language translates ``where.native`` instead (``longterm.core.where``).

A store is a location (``backend_config["store"]``, else the ``LONGTERM_HOME`` directory)
that lives in this process's memory (``STORES``): reopening finds it, another process never
does. Its ledger and meta sit beside its records, per index, so another index, location or
home is another store, with a ledger of its own. ``tests/test_kit_example.py`` runs the
whole contract suite on it.

    python examples/dict_backend.py    # registers it as "dict", saves a session, searches it
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from longterm.config import parse_backend_config
from longterm.core.engine import Engine, Query
from longterm.core.errors import Rule
from longterm.core.where import Where
from longterm.errors import BackendError
from longterm.records import MemoryRecord, Scope
from longterm.retrieval.text import index_terms, query_terms

K1, B = 1.2, 0.75  # BM25's usual constants


class DictConfig(BaseModel):
    """The ``backend_config`` keys; an unknown one (``embedder``: no vectors here) is an error naming it."""

    model_config = ConfigDict(extra="forbid")
    store: str | None = None
    index: str = "default_app"
    timeout: float | None = None


@dataclass
class Doc:
    record: MemoryRecord
    terms: Counter[str]
    length: int


@dataclass
class Store:
    """One location's data; several memories may use it at once, hence the lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    docs: dict[tuple[str, str, str], dict[str, Doc]] = field(default_factory=dict)  # (index, app, user): id -> doc
    ledger: dict[tuple[str, str, str, str], set[str]] = field(default_factory=dict)  # ... session: event ids
    meta: dict[tuple[str, str], str] = field(default_factory=dict)  # (index, key): value


#: Every store of this process, by location.
STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()


def _doc(record: MemoryRecord) -> Doc:
    terms = Counter(index_terms(record.text))
    return Doc(record, terms, sum(terms.values()))


class DictBackend(Engine):
    name: ClassVar[str] = "dict"
    filters_exact: ClassVar[bool] = True  # applies ``where`` whole: the core need not look again
    rewrites_alive: ClassVar[bool] = True  # an update writes only over a record still there (``_rewrite``)
    unreachable: ClassVar[str] = "It lives in this process; there is nothing to reach."
    rules: ClassVar[Sequence[Rule]] = (
        Rule(MemoryError, BackendError, "It holds every memory in RAM; use a real engine."),
    )

    def __init__(self, store: str, *, index: str = "default_app", timeout: float | None = None) -> None:
        self.location, self.index = store, index
        super().__init__(where=f"store {store!r}", store_id=f"dict:{store}#{index}", timeout=timeout)
        self._store: Store | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any], *, root: Path) -> DictBackend:
        cfg = parse_backend_config(DictConfig, config, cls.name)
        return cls(cfg.store or str(root.resolve()), index=cfg.index, timeout=cfg.timeout)

    @property
    def store(self) -> Store:
        assert self._store is not None, "used before _open"
        return self._store

    def _key(self, scope: Scope | MemoryRecord) -> tuple[str, str, str]:
        return (self.index, scope.app_name, scope.user_id)

    def _open(self) -> None:
        with _STORES_LOCK:
            self._store = STORES.setdefault(self.location, Store())

    def _close(self) -> None:
        self._store = None  # the data stays in STORES, for the next memory on this store

    def _meta_get(self, key: str) -> str | None:
        with self.store.lock:
            return self.store.meta.get((self.index, key))

    def _meta_set(self, key: str, value: str) -> None:
        with self.store.lock:
            self.store.meta[(self.index, key)] = value

    def _write(self, records: Sequence[MemoryRecord], vectors: Any) -> None:
        docs = [_doc(r) for r in records]
        with self.store.lock:
            for d in docs:
                self.store.docs.setdefault(self._key(d.record), {})[d.record.id] = d

    def _rewrite(self, records: Sequence[MemoryRecord], vectors: Any) -> list[str]:
        """An update's write: only over a record the store still holds, checked under the same lock
        as the write (an erase in between wins); the ids written."""
        docs = [_doc(r) for r in records]
        with self.store.lock:
            held = [d for d in docs if d.record.id in self.store.docs.get(self._key(d.record), {})]
            for d in held:
                self.store.docs[self._key(d.record)][d.record.id] = d
        return [d.record.id for d in held]

    def _ledger_saved(self, scope: Scope, session_id: str) -> set[str]:
        with self.store.lock:
            return set(self.store.ledger.get((*self._key(scope), session_id), ()))

    def _ledger_mark(self, scope: Scope, session_id: str, event_ids: Sequence[str]) -> None:
        with self.store.lock:
            self.store.ledger.setdefault((*self._key(scope), session_id), set()).update(event_ids)

    def _ledger_sessions(self, scope: Scope) -> list[str]:
        """The sessions the ledger holds for ``scope``: moves, and events given without their session."""
        with self.store.lock:
            return sorted(key[3] for key in self.store.ledger if key[:3] == self._key(scope))

    def _docs(self, scope: Scope, where: Where | None) -> list[Doc]:
        """The scope's docs that pass ``where`` (all without it), read under the lock."""
        with self.store.lock:
            docs = list(self.store.docs.get(self._key(scope), {}).values())
        return docs if where is None else [d for d in docs if where.admits(d.record)]

    def _fulltext(
        self, scope: Scope, query: Query, k: int, where: Where | None = None
    ) -> list[tuple[MemoryRecord, float]]:
        terms = query_terms(query.text)  # stemmed like index_terms (query.terms are for engines that stem)
        docs = self._docs(scope, where)  # filtered before the cut
        if not docs:
            return []
        n, avg = len(docs), (sum(d.length for d in docs) / len(docs)) or 1.0
        df = {t: sum(1 for d in docs if t in d.terms) for t in terms}
        idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items() if f}
        hits = []
        for d in docs:
            norm = K1 * (1 - B + B * d.length / avg)
            score = sum(idf[t] * d.terms[t] * (K1 + 1) / (d.terms[t] + norm) for t in idf if t in d.terms)
            if score > 0:
                hits.append((d.record, score))
        return sorted(hits, key=lambda h: -h[1])[:k]

    def _remove(self, scope: Scope, ids: Sequence[str] | None, session_id: str | None) -> int:
        with self.store.lock:  # the ledger stays: what a user erased stays erased
            docs = self.store.docs.get(self._key(scope), {})
            if ids is not None:
                gone = [i for i in set(ids) if i in docs]
            elif session_id is not None:
                gone = [i for i, d in docs.items() if d.record.session_id == session_id]
            else:
                gone = list(docs)
            for i in gone:
                del docs[i]
            return len(gone)

    def _count(self, scope: Scope, where: Where | None = None) -> int:
        return len(self._docs(scope, where))

    def _page(self, scope: Scope, cursor: Any, size: int, where: Where | None = None) -> tuple[list[MemoryRecord], Any]:
        docs = {d.record.id: d for d in self._docs(scope, where)}
        ids = sorted(i for i in docs if cursor is None or i > cursor)[:size]
        return [docs[i].record for i in ids], (ids[-1] if len(ids) == size else None)

    def _scopes(self) -> list[tuple[str, str, int]]:
        with self.store.lock:
            return [
                (app, user, len(d)) for (index, app, user), d in self.store.docs.items() if index == self.index and d
            ]

    def _indices(self) -> list[str]:
        with self.store.lock:
            return sorted({index for (index, _, _), d in self.store.docs.items() if d})


if __name__ == "__main__":
    import asyncio

    from longterm import LongTermMemory
    from longterm.backends import register

    register("dict", DictBackend)  # a package would use the ``longterm.backends`` entry point

    async def demo() -> None:
        memory = LongTermMemory(backend="dict")
        text = "I moved to Lisbon last spring"
        event = {"id": "e1", "author": "user", "content": {"role": "user", "parts": [{"text": text}]}}
        result = await memory.add_session_to_memory(
            {"id": "s1", "app_name": "demo", "user_id": "ada", "events": [event]}
        )
        print(f"saved {result.saved} of {result.new_events} new events")
        found = await memory.search_memory(app_name="demo", user_id="ada", query="Where did I move?")
        for m in found.memories:
            print("found:", m.content.parts[0].text)
        await memory.close()

    asyncio.run(demo())
