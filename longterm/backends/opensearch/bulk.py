"""OpenSearch bulk requests: bounded, confirmed, and a failed item fails the request, named.

The seam: ``chunks(index, rows, op)`` cuts documents into bulk bodies of at most
``BULK_BYTES`` and ``BULK_DOCS``; ``send(client, chunk)`` sends one (``refresh=wait_for``: a
save that returned is searchable) and returns each item's status, raising ``Incomplete``
for a failed item unless its status is one the caller tolerates (a ``create`` whose id
exists, a conditional write whose document changed); ``tombstones(index, hits)`` is an
erase's body.

Why bounded: a large session never meets a 413 (AWS allows 10 MB a request), and no one
request holds the cluster long.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from .schema import SAVED

#: One bulk request carries at most this much: a large session never meets a 413 (AWS allows 10 MB).
BULK_BYTES = 5 * 1024 * 1024
BULK_DOCS = 1_000

#: A bulk body's lines and what they are, for the error naming a failed item.
Chunk = list[tuple[bytes, str]]


#: What an erase leaves in a record's place: no text, no scope, nothing a query or an aggregation
#: matches; a create of that id (a save planned before the erase) fails on it and is left out.
TOMBSTONE: dict[str, Any] = {"erased": True}


class Incomplete(Exception):
    """OpenSearch did part of a request: some writes, shards or deletions failed."""


def chunks(index: str, rows: Sequence[tuple[str, dict[str, Any], str]], op: str = "index") -> Iterator[Chunk]:
    """``rows`` (id, document, what it is) as bulk bodies of at most ``BULK_BYTES`` and ``BULK_DOCS``."""
    chunk: Chunk = []
    size = 0
    for doc_id, doc, label in rows:
        action = json.dumps({op: {"_index": index, "_id": doc_id}})
        data = f"{action}\n{json.dumps(doc, ensure_ascii=False)}\n".encode()
        if chunk and (size + len(data) > BULK_BYTES or len(chunk) == BULK_DOCS):
            yield chunk
            chunk, size = [], 0
        chunk.append((data, label))
        size += len(data)
    if chunk:
        yield chunk


def send(client: Any, chunk: Chunk, tolerate: tuple[int, ...] = (409,)) -> list[int]:
    """One bulk request; each item's status. Items failing with a status in ``tolerate`` are the caller's."""
    resp = client.bulk(body=b"".join(data for data, _ in chunk), refresh="wait_for")
    items: list[dict[str, Any]] = [next(iter(item.values()), {}) for item in resp["items"]]
    statuses = [int(item.get("status", 200)) for item in items]
    if not resp.get("errors"):
        return statuses
    failed = [
        (label, item["error"])
        for (_, label), item, status in zip(chunk, items, statuses, strict=True)
        if item.get("error") and status not in tolerate
    ]
    if not failed:
        return statuses
    label, err = failed[0]
    raise Incomplete(
        f"{len(failed)} of {len(chunk)} writes failed; first: {label}: {err.get('type')}: {err.get('reason')}. "
        "What failed is not marked saved: the next save retries it"
    )


def tombstones(index: str, hits: list[dict[str, Any]]) -> Chunk:
    """A ``TOMBSTONE`` over each of ``hits`` (search hits with ``seq_no_primary_term``), each written
    only if the document is unchanged since read (``if_seq_no``)."""
    chunk: Chunk = []
    for h in hits:
        cond = {"_index": index, "_id": h["_id"], "if_seq_no": h["_seq_no"], "if_primary_term": h["_primary_term"]}
        chunk.append((f"{json.dumps({'index': cond})}\n{json.dumps(TOMBSTONE)}\n".encode(), f"record {h['_id']!r}"))
    return chunk


def changed(
    client: Any, index: str, rows: Sequence[tuple[str, dict[str, Any], str]]
) -> list[tuple[str, dict[str, Any], str]]:
    """Of ``rows`` (id, document, what it is), those ``index`` does not hold exactly so (one ``mget`` per
    ``BULK_DOCS``; the stored stamp ``SAVED`` aside): a second import of the same export writes nothing,
    as on the local store."""
    out: list[tuple[str, dict[str, Any], str]] = []
    for start in range(0, len(rows), BULK_DOCS):
        part = rows[start : start + BULK_DOCS]
        found = client.mget(index=index, body={"ids": [doc_id for doc_id, _, _ in part]}, realtime=True)["docs"]
        stored = {d["_id"]: _unstamped(d.get("_source")) for d in found if d.get("found")}
        out += [row for row in part if stored.get(row[0]) != json.loads(json.dumps(row[1]))]
    return out


def _unstamped(source: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if source is None else {k: v for k, v in source.items() if k != SAVED}
