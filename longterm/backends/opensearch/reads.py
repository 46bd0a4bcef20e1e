"""The OpenSearch engine's reads beside its searches: a hit's neighbours by time, and listings.

The seam: ``OpenSearchReads``, a base of ``OpenSearchBackend``, implements ``core.windows``'
``_time_windows`` (every ask of a search in one ``_msearch``: a session's records on one side of a
time, nearest first, at most a few), ``_session_rows`` (a session whole, for the rare window that
cannot be exact), ``_scopes`` and ``_indices``; each asked through the erasure marks (``erasing``:
a neighbour an erase under way covers is never returned; a scope it empties is not listed). Why
by time: reading each hit's whole session cost what the session holds; a window costs what the
question asks for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import override

from ...core.erasures import Erasure
from ...core.neighbours import Sessions, scan_sessions
from ...core.selection import Page
from ...core.where import Where, living
from ...core.windows import Ask, TimeWindows
from ...records import MemoryRecord, Scope
from .filtering import clauses
from .schema import INDEX_META, LEDGER_SUFFIX, PREFIX_META


class OpenSearchReads(TimeWindows):
    """Neighbours by time and the listings of ``OpenSearchBackend`` (see the module docstring)."""

    if TYPE_CHECKING:  # ``OpenSearchBackend``'s
        client: Any
        index: str
        cfg: Any

        @staticmethod
        def _scope(scope: Scope, *more: dict[str, Any], hide: Sequence[dict[str, Any]] = ()) -> dict[str, Any]: ...

        def _sorted(self, scope: Scope, more: Sequence[dict[str, Any]], cursor: Any, size: int) -> Page: ...

        def _searches(
            self, scope: Scope, bodies: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
        ) -> list[dict[str, Any]]: ...

        def _erasures_pending(self) -> list[Erasure]: ...

        def _count(self, scope: Scope, where: Any = None) -> int: ...

    @override
    def _time_windows(self, scope: Scope, asks: Sequence[Ask]) -> list[list[MemoryRecord]]:
        """One ``_msearch``: per ask, the session's records on its side of its time, nearest first."""

        def bodies(hide: list[dict[str, Any]]) -> list[dict[str, Any]]:
            out = []
            for a in asks:
                span = {"range": {"timestamp": {"lte" if a.before else "gte": a.at}}}
                query = self._scope(scope, {"term": {"session_id": a.session_id}}, span, hide=hide)
                order = "desc" if a.before else "asc"
                out.append({"size": a.limit, "query": query, "sort": [{"timestamp": order}], "_source": ["doc"]})
            return out

        out = []
        for a, answer in zip(asks, self._searches(scope, bodies), strict=True):
            records = [MemoryRecord.model_validate(h["_source"]["doc"]) for h in answer["hits"]["hits"]]
            out.append([r for r in records if r.session_id == a.session_id])
        return out

    @override
    def _session_rows(self, scope: Scope, session_ids: Sequence[str]) -> Sessions:
        """One search of the scope's records of ``session_ids`` (a ``terms`` filter), paged when larger."""
        only = {"terms": {"session_id": list(session_ids)}}
        return scan_sessions(lambda s, at, n: self._sorted(s, [only], at, n), scope, session_ids)

    def _scopes(self, at: float | None = None) -> list[tuple[str, str, int]]:
        """(app, user, count) by a composite aggregation (of the records alive ``at``); a scope with
        erasure marks counted through them."""
        marked = {(m.app_name, m.user_id) for m in self._erasures_pending()}
        alive = None if at is None else living(None, at)
        found = []
        for app, user, n in self._aggregated(alive):
            if (app, user) in marked:
                n = self._count(Scope.stored(app, user), alive)  # as stored: an older store's ids may not be NFC
            if n:
                found.append((app, user, n))
        return found

    def _aggregated(self, where: Where | None) -> list[tuple[str, str, int]]:
        sources = [{"a": {"terms": {"field": "app_name"}}}, {"u": {"terms": {"field": "user_id"}}}]
        composite: dict[str, Any] = {"size": 1000, "sources": sources}
        query = {"bool": {"filter": [{"exists": {"field": "record_id"}}, *clauses(where)]}}
        found: list[tuple[str, str, int]] = []
        while True:
            body = {"size": 0, "query": query, "aggs": {"s": {"composite": composite}}}
            resp = self.client.search(index=self.index, body=body, allow_partial_search_results=False)
            agg = resp["aggregations"]["s"]
            found += [(b["key"]["a"], b["key"]["u"], int(b["doc_count"])) for b in agg["buckets"]]
            if not agg["buckets"] or "after_key" not in agg:
                return found
            composite["after"] = agg["after_key"]

    def _indices(self) -> list[str]:
        """This prefix's data indices holding a record, named as the caller named them: from the
        mapping's ``_meta``; an index of an earlier release (no name kept) by its name less the
        prefix (lower-cased, and ending in a digest where ``index_name`` changed it)."""
        head = re.sub("[^a-z0-9_-]", "_", self.cfg.prefix.lower()).lstrip("_-+")
        pattern = f"{head}*,-*{LEDGER_SUFFIX}"
        mappings = self.client.indices.get_mapping(index=pattern, allow_no_indices=True, ignore_unavailable=True)
        names: dict[str, str] = {}
        for physical, value in mappings.items():
            mapping = value.get("mappings", {})
            meta, props = mapping.get("_meta", {}), mapping.get("properties", {})
            ours = "record_id" in props and "doc" in props and meta.get(PREFIX_META, self.cfg.prefix) == self.cfg.prefix
            if not ours:
                continue  # not a longterm data index, or one of a longer prefix
            names[physical] = str(meta.get(INDEX_META) or physical[len(head) :])
        if not names:
            return []
        body = {
            "size": 0,
            "query": {"exists": {"field": "record_id"}},
            "aggs": {"i": {"terms": {"field": "_index", "size": len(names)}}},
        }
        resp = self.client.search(index=",".join(names), body=body, allow_partial_search_results=False)
        return sorted(names[b["key"]] for b in resp["aggregations"]["i"]["buckets"] if b["doc_count"])
