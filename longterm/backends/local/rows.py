"""The local store's rows: a record as the ``records`` table holds it and back, and FTS5 queries.

The seam: ``to_row(scope_id, record)`` is the ``UPSERT`` row of a record (``schema``), and
``to_record(row, scope)`` the record of a row read back (``survivors``: those of a fused
list of row ids); ``match(scope_id, terms)`` is the FTS5 expression of a search, built only
from quoted terms (never FTS5 syntax) and, unless told otherwise, intersected with the
scope's own token.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from ...records import Hit, MemoryRecord, Scope
from ...retrieval.text import segment
from .schema import BY_ROWID, stored_id

#: Distinct query terms searched at most: each costs a walk of its posting list, so a pasted
#: page (up to 256 terms) would cost several times what a long question does.
MAX_QUERY_TERMS = 32
_COMPACT: dict[str, Any] = {"ensure_ascii": False, "separators": (",", ":")}


@functools.cache
def _types(event_types: tuple[str, ...]) -> str:
    return json.dumps(event_types, separators=(",", ":"))


def to_record(row: Sequence[Any], scope: Scope) -> MemoryRecord:
    rid, role, text = row[0], row[4], row[6]
    return MemoryRecord(
        id=rid.hex() if isinstance(rid, bytes) else rid,
        app_name=scope.app_name,
        user_id=scope.user_id,
        session_id=row[1],
        event_id=row[2],
        author=row[3],
        role=role,
        event_types=json.loads(row[5]),
        text=text,
        content=json.loads(row[7]) if row[7] is not None else {"role": role or "user", "parts": [{"text": text}]},
        timestamp=row[8],
        metadata=json.loads(row[9]),
    )


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 expression matching any of the first ``MAX_QUERY_TERMS`` distinct ``terms``, each
    quoted (never FTS5 syntax)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in list(dict.fromkeys(terms))[:MAX_QUERY_TERMS])


def to_row(scope: int, r: MemoryRecord) -> tuple[Any, ...]:
    """The ``UPSERT`` row of ``r`` in scope ``scope``: compact JSON, the terms where they differ from the text."""
    content = None if r.text_only_content() else json.dumps(r.content, **_COMPACT)
    metadata, terms = json.dumps(r.metadata, **_COMPACT) if r.metadata else "{}", segment(r.text)
    row = (scope, stored_id(r.id), r.session_id, r.event_id, r.author, r.role, _types(tuple(r.event_types)))
    return (*row, r.text, content, r.timestamp, metadata, None if terms == r.text else terms)


def match(scope_id: int, terms: Sequence[str], *, token: bool = True) -> str:
    """The FTS5 expression of a search of ``terms`` in scope ``scope_id`` (``token``: by its scope token too)."""
    text = f"terms : ({fts_query(terms)})"
    return f'scope : "s{scope_id}" AND {text}' if token else text


def survivors(
    conn: sqlite3.Connection,
    fused: list[tuple[int, float, dict[str, float]]],
    scope: Scope,
    scope_id: int,
    k: int,
    degraded: str | None,
) -> list[Hit]:
    """The first ``k`` hits of ``fused`` (row ids, best first), each record read and parsed only
    now; a row deleted since its vector was cached is left out."""
    extra = {"degraded": degraded} if degraded else {}
    hits = []
    for rowid, score, arms in fused:
        row = conn.execute(BY_ROWID, (rowid, scope_id)).fetchone()
        if row is None:
            continue
        hits.append(Hit(record=to_record(row[1:], scope), score=score, arms=arms, extra=extra))
        if len(hits) == k:
            break
    return hits
