"""OpenSearch bulk requests: bounded, confirmed, and a failed item fails the request, named.

The seam: ``chunks(index, rows, op)`` cuts documents into bulk bodies of at most
``BULK_BYTES`` and ``BULK_DOCS``; ``send(client, chunk)`` sends one (``refresh=wait_for``: a
save that returned is searchable) and returns each item's status, raising ``Incomplete``
for a failed item unless its status is one the caller tolerates (a ``create`` whose id
exists, a conditional write whose document changed); ``tombstones(index, hits)`` is an
erase's body, ``conditional(index, rows)`` an update's (both written only over what was read).

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
    return conditional(index, [(h, TOMBSTONE, f"record {h['_id']!r}") for h in hits])


def conditional(index: str, rows: Sequence[tuple[dict[str, Any], dict[str, Any], str]]) -> Chunk:
    """One body of ``rows`` (a document as read, with its ``_id``, ``_seq_no`` and ``_primary_term``;
    what to write in its place; what it is), each written only if the document is unchanged since read."""
    chunk: Chunk = []
    for read, doc, label in rows:
        cond = {
            "_index": index,
            "_id": read["_id"],
            "if_seq_no": read["_seq_no"],
            "if_primary_term": read["_primary_term"],
        }
        chunk.append((f"{json.dumps({'index': cond})}\n{json.dumps(doc, ensure_ascii=False)}\n".encode(), label))
    return chunk


def written_over(client: Any, index: str, rows: Sequence[tuple[str, dict[str, Any], str]]) -> list[str]:
    """Of ``rows`` (id, document, what it is), each written over its document only if that is still the
    record read here (``if_seq_no``: an erase's tombstone in between wins, and this write makes an erase
    read it again), keeping its stamp ``SAVED``, so an erase under way still covers it; the ids written.
    One bulk body: an update's few records."""
    docs = {doc_id: (doc, label) for doc_id, doc, label in rows}
    body = {"ids": list(docs)}
    found = client.mget(index=index, body=body, realtime=True, _source_includes=[SAVED, "record_id"])["docs"]
    kept = []
    for read in found:
        held = read.get("_source") or {}
        if read.get("found") and "record_id" in held:  # a tombstone holds none
            doc, label = docs[read["_id"]]
            kept.append((read, {**doc, **({SAVED: held[SAVED]} if SAVED in held else {})}, label))
    statuses = send(client, conditional(index, kept)) if kept else []
    return [read["_id"] for (read, _, _), status in zip(kept, statuses, strict=True) if status < 300]


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
