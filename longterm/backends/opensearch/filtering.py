"""Filters on OpenSearch: the tree a ``Where`` carries as bool-query clauses, and stores brought up to it.

The seam: ``clauses(where)`` turns ``where.native`` (``core.where``) into the clauses the engine
adds to its scope's ``bool.filter`` (none for no filter): ``Has`` a ``terms`` on ``TOKENS``,
``Span`` a ``range`` on ``timestamp`` or on ``expires_at`` (``core.where.alive``: a record
without one is in no range), ``And``/``Or``/``Neg`` nested ``bool`` filters. The same list
narrows a BM25 query, the ``filter`` of a k-NN query (Lucene's HNSW search keeps only what
passes, then cuts at ``k``), a count and a page. ``tokens_of(record)`` is what every
write stores in ``TOKENS``. ``add_tokens(client, index, hits)`` brings an index of an earlier
release (no ``TOKENS`` field) up to date: ``OpenSearchBackend._open`` calls it while
``TOKENS_META`` is not in the mapping's ``_meta``, and sets it after.

Why filter context: a filter clause scores nothing, so a filtered search ranks what passes as
the unfiltered one ranks it. Why a conditional update per record: a record rewritten while the
upgrade reads it carries its own tokens, and the update made from the older copy is refused
(``if_seq_no``) rather than writing tokens of metadata the record no longer holds. Two processes
upgrading at once compute the same tokens, and each skips what the other filled.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ...core.where import EVERYTHING, And, Has, Node, Or, Span, Where, record_tokens
from ...records import MemoryRecord
from .bulk import BULK_DOCS, Chunk, send
from .schema import EXPIRES_AT, KEYWORD, TOKENS

MATCH_ALL: dict[str, Any] = {"match_all": {}}
MATCH_NONE: dict[str, Any] = {"match_none": {}}
#: A ``Span``'s field and the numeric field of the document it ranges over (every record has a
#: ``timestamp``; only one that expires has an ``expires_at``, so no range holds one that does not).
SPANNED = {"timestamp": "timestamp", "expires_at": EXPIRES_AT}


def clauses(where: Where | None) -> list[dict[str, Any]]:
    """The filter clauses of ``where`` (none without one, or when it passes everything)."""
    if where is None or where.native == EVERYTHING:
        return []
    return [clause(where.native)]


def clause(node: Node) -> dict[str, Any]:
    """One ``node`` as a non-scoring query clause (``core.where.holds`` is what it must answer)."""
    if isinstance(node, Has):
        return {"terms": {TOKENS: list(node.tokens)}} if node.tokens else MATCH_NONE
    if isinstance(node, Span):
        bounds: dict[str, float] = {}
        if node.lo is not None:
            bounds["gte" if node.lo_incl else "gt"] = node.lo
        if node.hi is not None:
            bounds["lte" if node.hi_incl else "lt"] = node.hi
        field = SPANNED[node.field]
        if bounds:
            return {"range": {field: bounds}}
        return MATCH_ALL if field == "timestamp" else {"exists": {"field": field}}
    if isinstance(node, And):
        return {"bool": {"filter": [clause(p) for p in node.parts]}} if node.parts else MATCH_ALL
    if isinstance(node, Or):
        if not node.parts:
            return MATCH_NONE
        return {"bool": {"should": [clause(p) for p in node.parts], "minimum_should_match": 1}}
    return {"bool": {"must_not": [clause(node.part)]}}


def tokens_of(record: MemoryRecord) -> list[str]:
    """``record``'s tokens as the engine stores them: sorted, so a record read back with its metadata's
    keys in another order (source filtering rebuilds the object) stores the same list."""
    return sorted(record_tokens(record))


def token_updates(index: str, hits: list[dict[str, Any]]) -> Chunk:
    """Bulk updates setting ``TOKENS`` of each of ``hits`` (with ``doc`` and ``seq_no_primary_term``),
    each only if the document is unchanged since read."""
    chunk: Chunk = []
    for h in hits:
        tokens = tokens_of(MemoryRecord.model_validate(h["_source"]["doc"]))
        cond = {"_index": index, "_id": h["_id"], "if_seq_no": h["_seq_no"], "if_primary_term": h["_primary_term"]}
        line = f"{json.dumps({'update': cond})}\n{json.dumps({'doc': {TOKENS: tokens}})}\n"
        chunk.append((line.encode(), f"tokens of record {h['_id']!r}"))
    return chunk


def add_tokens(client: Any, index: str, hits: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> None:
    """Map ``TOKENS`` in ``index`` if it is not, and write the tokens of every record lacking them
    (its words unchanged), searching with ``hits`` (a search body: its hits); the caller then
    notes it in the ``_meta`` (``TOKENS_META``)."""
    props = next(iter(client.indices.get_mapping(index=index).values()))["mappings"].get("properties", {})
    if TOKENS not in props:
        client.indices.put_mapping(index=index, body={"properties": {TOKENS: KEYWORD}})
    if "record_id" not in props:
        return  # no record was ever written to it
    client.indices.refresh(index=index)
    lacking = {"bool": {"filter": [{"exists": {"field": "record_id"}}], "must_not": [{"exists": {"field": TOKENS}}]}}
    body: dict[str, Any] = {"size": BULK_DOCS, "query": lacking, "_source": ["doc"], "seq_no_primary_term": True}
    body["sort"] = [{"record_id": "asc"}]
    while True:
        found = hits(body)
        if found:
            send(client, token_updates(index, found), tolerate=(404, 409))  # rewritten or erased meanwhile
        if len(found) < BULK_DOCS:
            break
        body["search_after"] = found[-1]["sort"]
    client.indices.refresh(index=index)
