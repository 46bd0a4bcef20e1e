"""The local store's rows: a record as the ``records`` table holds it and back, and FTS5 queries.

The seam: ``to_row(scope_id, record)`` is the ``UPSERT`` row of a record (``schema``), and
``to_record(row, scope)`` the record of a row read back (``survivors``: those of a fused
list of row ids); ``fts_query(terms)`` is the FTS5 expression of a search, built only from
quoted terms (never FTS5 syntax; the scope is the rowid range, ``schema.row_range``);
``put(conn, rows)`` writes rows in the caller's transaction: a new
record at the next rowid of its scope, with its full-text row in its scope's table
(``schema``, "Why the full-text index is ..."), a record that exists by the ``UPSERT``; each
with the values filters find it by (``filtering.values_of``), a record that exists with its
values made again.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from ...records import Hit, MemoryRecord, Scope
from ...retrieval.text import segment
from .filtering import values_of
from .schema import (
    BY_ROWID,
    DROP_VALUES,
    HELD,
    INDEX_ROW,
    INSERT,
    MAX_SCOPE,
    PURGE,
    PUT_VALUE,
    STORED_OF,
    TAKE_ROWS,
    UPSERT,
    bucket,
    row_range,
    stored_id,
)

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
        expires_at=row[10],
        updated_at=row[11],
    )


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 expression matching any of the first ``MAX_QUERY_TERMS`` distinct ``terms``, each
    quoted (never FTS5 syntax)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in list(dict.fromkeys(terms))[:MAX_QUERY_TERMS])


#: Whether the record (scope, session, event, id) is still there: what ``_rewrite`` writes over.
ALIVE = "SELECT 1 FROM records WHERE scope = ? AND session_id = ? AND event_id = ? AND id = ?"


def to_row(scope: int, r: MemoryRecord) -> tuple[Any, ...]:
    """The ``UPSERT`` row of ``r`` in scope ``scope``: compact JSON, the terms where they differ from the text."""
    content = None if r.text_only_content() else json.dumps(r.content, **_COMPACT)
    metadata, terms = json.dumps(r.metadata, **_COMPACT) if r.metadata else "{}", segment(r.text)
    row = (scope, stored_id(r.id), r.session_id, r.event_id, r.author, r.role, _types(tuple(r.event_types)))
    life = (r.expires_at, r.updated_at)
    return (*row, r.text, content, r.timestamp, metadata, *life, None if terms == r.text else terms)


#: Per (scope, session): which events have a record (``put``'s ``held``).
Held = dict[tuple[int, str], set[str]]


def put(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]], held: Held | None = None) -> bool:
    """Write ``rows`` (``to_row``'s) in the caller's write transaction: those of events without a
    record get the next rowids of their scope and a full-text row; the others go through the
    ``UPSERT`` (the update triggers re-index a changed text). ``held``: per (scope, session), which
    of the rows' events have a record, where the caller read it in this transaction (those keys
    are not read again); it is added to.

    True when a record was written over with something else (``_overwrite``): the caller then
    empties the WAL after its commit, as an erase does, so no old word stays in its frames."""
    held = {} if held is None else held
    fresh: dict[int, list[tuple[Any, ...]]] = {}
    again = []
    for row in rows:
        key = (row[0], row[2])
        if key not in held:
            held[key] = {r[0] for r in conn.execute(HELD, key)}
        if row[3] in held[key]:
            again.append(row)
        else:
            held[key].add(row[3])
            fresh.setdefault(row[0], []).append(row)
    for scope, new in fresh.items():
        if scope > MAX_SCOPE:
            raise OverflowError(f"scope id {scope} is past what a rowid can carry ({MAX_SCOPE})")
        last = conn.execute(TAKE_ROWS, (len(new), scope)).fetchone()[0]
        first = row_range(scope)[0] + last - len(new) + 1
        conn.executemany(INSERT, [(first + i, *row) for i, row in enumerate(new)])
        conn.executemany(
            INDEX_ROW[bucket(scope)],
            [(first + i, row[-1] if row[-1] is not None else row[7]) for i, row in enumerate(new)],
        )
        conn.executemany(PUT_VALUE, [v for i, row in enumerate(new) for v in _values(row, first + i)])
    return _overwrite(conn, again) if again else False


#: Of a ``to_row`` row, what the ``UPSERT`` compares (all but the scope, session and event), the
#: record's words (text and terms), and its metadata, as ``STORED_OF`` reads them.
_KEPT = (1, *range(4, 14))
_WORDS = (7, 13)


def _overwrite(conn: sqlite3.Connection, again: Sequence[tuple[Any, ...]]) -> bool:
    """``again`` (rows of records that exist) through the ``UPSERT``, leaving their old words where
    an erase leaves a deleted record's (``store._remove``): secure delete zeroes the old row's
    bytes and its old values', and where a text changed, its scope's full-text table is merged
    (``PURGE``), which drops the old terms FTS5 keeps until then. Whether anything changed."""
    again = list({(row[0], row[2], row[3]): row for row in again}.values())  # one write twice: the last
    stored = {}
    for row in again:  # as each is now (the rowid stays: the upsert updates in place)
        stored[row[0], row[2], row[3]] = conn.execute(STORED_OF, (row[0], row[2], row[3])).fetchone()
    conn.executemany(UPSERT, again)
    changed, merge = False, set()
    for row in again:
        rowid, *now = stored[row[0], row[2], row[3]]
        if tuple(now) == tuple(row[i] for i in _KEPT):
            continue
        changed = True
        if (now[_KEPT.index(7)], now[-1]) != tuple(row[i] for i in _WORDS):
            merge.add(bucket(row[0]))
        if now[_KEPT.index(10)] != row[10]:  # its values again, as the record now is
            conn.execute(DROP_VALUES, (rowid,))
            conn.executemany(PUT_VALUE, _values(row, rowid))
    for b in sorted(merge):
        conn.execute(PURGE[b])
    return changed


def _values(row: tuple[Any, ...], rowid: int) -> list[tuple[Any, ...]]:
    """The ``record_values`` rows of a ``to_row`` row at ``rowid`` (``filtering.values_of``)."""
    return [(row[0], *v, rowid) for v in values_of(row[10])]


def survivors(
    conn: sqlite3.Connection,
    fused: list[tuple[int, float, dict[str, float]]],
    scope: Scope,
    scope_id: int,
    k: int,
    degraded: str | None,
    alive_at: float | None = None,
) -> list[Hit]:
    """The first ``k`` hits of ``fused`` (row ids, best first), each record read and parsed only
    now; a row deleted since its vector was cached is left out, and, read at ``alive_at``, one
    written meanwhile that had expired by then (the arms left out those they saw)."""
    extra = {"degraded": degraded} if degraded else {}
    hits = []
    for rowid, score, arms in fused:
        row = conn.execute(BY_ROWID, (rowid, scope_id)).fetchone()
        if row is None or (alive_at is not None and row[11] is not None and row[11] <= alive_at):
            continue
        hits.append(Hit(record=to_record(row[1:], scope), score=score, arms=arms, extra=extra))
        if len(hits) == k:
            break
    return hits
