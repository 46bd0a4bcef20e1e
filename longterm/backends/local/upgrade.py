"""A local store written by an older longterm version, moved to the current schema when it is opened.

The seam: ``LocalBackend._open`` calls ``upgrade(conn, path)`` with its own connection. It
looks for schema 1 (scopes spelled out in every row, hex ids, the text as 0.1 indexed it) and
schema 2 (one full-text table for every scope, rowids in the order saved), and moves either
over once, in one write transaction, safe against another process doing the same: each
record renumbered into its scope's rowid range, its vector with it, and the full-text tables
filled from the records (``schema``, "Why the full-text index is ..."): the tables of the
buckets in use, and their triggers, made after the rows moved, so that moving them fires none.
Then, once per store (``values``, behind the ``record_values`` mark in ``store_meta``), the
values filters find records by, from each record's metadata (a store made before filters has
the table empty; the records' words and rowids are left as they are); once, the columns of
a record's life (``expiry``: a record of an older store never expires) and their index; and once
(``vector_sizes``, behind the ``vector_sizes`` mark), each index's vectors checked against its
dimension: recorded where only the embedder's id was (the size its vectors have, most of them),
and a vector of another size (written before the core refused them, it failed every search of its
user) dropped, its record listed as waiting for a vector (``unembedded``).

Why apart from the engine: an upgrade reads a layout the engine writes no more, and goes
when that version is no longer supported; the store keeps only the current schema.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from ...core.identity import DIM_KEY, EMBEDDER_KEY
from ...core.sqlite import write_transaction
from ...retrieval.text import segment
from .filtering import values_of
from .schema import BUCKET_DDL, EXPIRY_INDEX, FTS_BUCKETS, GET_META, PUT_VALUE, ROW_BITS, SET_META, meta_key, stored_id

log = logging.getLogger(__name__)

#: The columns a record of schema 1 fills (those of later versions are NULL in it).
_V1_COLUMNS = "id, session_id, event_id, author, role, event_types, text, content, timestamp, metadata"
#: A local store written before scopes had ids (schema 1): its tables, moved over on open.
LOCAL_V1_TABLES = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memories'"
LOCAL_V1 = f"""
INSERT OR IGNORE INTO scopes (index_name, app_name, user_id)
    SELECT DISTINCT index_name, app_name, user_id FROM memories
    UNION SELECT DISTINCT index_name, app_name, user_id FROM saved_events;
UPDATE scopes SET version = coalesce((SELECT v.version FROM scope_versions AS v WHERE v.index_name = scopes.index_name
    AND v.app_name = scopes.app_name AND v.user_id = scopes.user_id), 0);
INSERT INTO records (rowid, scope, {_V1_COLUMNS}, terms)
    SELECT m.rowid, s.scope, longterm_id(m.id), m.session_id, m.event_id, m.author, m.role, m.event_types,
           m.text, m.content, m.timestamp, m.metadata, longterm_terms(m.text)
    FROM memories AS m JOIN scopes AS s USING (index_name, app_name, user_id);
INSERT INTO ledger SELECT s.scope, e.session_id, e.event_id
    FROM saved_events AS e JOIN scopes AS s USING (index_name, app_name, user_id);
INSERT INTO embeddings SELECT rowid, embedding FROM vectors;
DROP TABLE memories_fts;
DROP TABLE vectors;
DROP TABLE memories;
DROP TABLE scope_versions;
DROP TABLE saved_events;
"""


def _local_terms(text: str) -> str | None:
    """What the local store keeps in ``terms``: the segmented text, where it differs from the text."""
    terms = segment(text)
    return None if terms == text else terms


def local_v1(conn: sqlite3.Connection, path: Path) -> None:
    """Move a local store of schema 1 (scopes spelled out in every row, hex ids) to this one."""
    if not conn.execute(LOCAL_V1_TABLES).fetchone():
        return
    log.warning("local %s: moving the store to the compact schema (once; it may take a while)", path)
    conn.create_function("longterm_id", 1, stored_id, deterministic=True)
    # The terms again, by this version's text processing (0.1 did not fold Chinese, dates, full width).
    conn.create_function("longterm_terms", 1, _local_terms, deterministic=True)
    with write_transaction(conn):
        if conn.execute(LOCAL_V1_TABLES).fetchone():  # another process may have moved it
            for statement in _statements(LOCAL_V1):
                conn.execute(statement)
            _cluster(conn)


#: A store of schema 2: one full-text table, and its triggers.
LOCAL_V2_TABLES = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'records_fts'"
LOCAL_V2 = """
DROP TRIGGER IF EXISTS records_ai;
DROP TRIGGER IF EXISTS records_ad;
DROP TRIGGER IF EXISTS records_au;
DROP TABLE records_fts
"""
#: Every record into its scope's rowid range (in the order saved), its vector along, and each
#: scope's count of rowids given; then the full-text tables filled from the records.
CLUSTER = f"""
CREATE TEMP TABLE remap (old INTEGER PRIMARY KEY, new INTEGER NOT NULL);
INSERT INTO remap SELECT rowid, (scope << {ROW_BITS}) + row_number() OVER (PARTITION BY scope ORDER BY rowid)
    FROM records;
UPDATE records SET rowid = (SELECT new FROM remap WHERE old = records.rowid);
UPDATE embeddings SET rowid = (SELECT new FROM remap WHERE old = embeddings.rowid);
UPDATE unembedded SET rowid = (SELECT new FROM remap WHERE old = unembedded.rowid);
UPDATE scopes SET next_row = (SELECT count(*) FROM records WHERE scope = scopes.scope);
DROP TABLE temp.remap;
"""
#: The full-text tables of the buckets that have scopes, filled from the records.
BUCKETS = f"SELECT DISTINCT scope % {FTS_BUCKETS} FROM scopes"
FILL = (
    "INSERT INTO records_fts_{b} (rowid, terms) SELECT rowid, coalesce(terms, text) FROM records "
    "WHERE scope % {n} = {b}"
)


def _statements(script: str) -> list[str]:
    return [s for s in script.split(";\n") if s.strip()]


def _cluster(conn: sqlite3.Connection) -> None:
    """Inside the caller's write transaction: ``CLUSTER`` (foreign keys checked at its commit)."""
    conn.execute("PRAGMA defer_foreign_keys = ON")
    for statement in _statements(CLUSTER):
        conn.execute(statement)
    for (bucket,) in conn.execute(BUCKETS).fetchall():
        for statement in BUCKET_DDL[bucket]:
            conn.execute(statement)
        conn.execute(FILL.format(b=bucket, n=FTS_BUCKETS))


def local_v2(conn: sqlite3.Connection, path: Path) -> None:
    """Move a local store of schema 2 (one full-text table, rowids in the order saved) to this one."""
    if not conn.execute(LOCAL_V2_TABLES).fetchone():
        return
    log.warning("local %s: moving the store to per-scope rowids and full-text tables (once; it may take a while)", path)
    with write_transaction(conn):
        if conn.execute(LOCAL_V2_TABLES).fetchone():  # another process may have moved it
            for statement in _statements(LOCAL_V2):
                conn.execute(statement)
            if "next_row" not in {r[1] for r in conn.execute("PRAGMA table_info(scopes)")}:
                conn.execute("ALTER TABLE scopes ADD COLUMN next_row INTEGER NOT NULL DEFAULT 0")
            _cluster(conn)


#: A store whose records all have their ``record_values`` (new ones get them as they are written).
VALUED = "SELECT 1 FROM store_meta WHERE key = 'record_values'"
MARK_VALUED = "INSERT OR IGNORE INTO store_meta (key, value) VALUES ('record_values', '1')"
#: Records to give values, a batch at a time in rowid order (after the last rowid done).
UNVALUED = "SELECT rowid, scope, metadata FROM records WHERE rowid > ? ORDER BY rowid LIMIT ?"
BATCH = 5000


def values(conn: sqlite3.Connection, path: Path) -> None:
    """Give each record of a store made before filters its ``record_values``, once (``VALUED``)."""
    if conn.execute(VALUED).fetchone():
        return
    with write_transaction(conn):
        if conn.execute(VALUED).fetchone():  # another process did it
            return
        if conn.execute("SELECT 1 FROM records LIMIT 1").fetchone():
            log.warning("local %s: indexing the records' metadata for filters (once; it may take a while)", path)
        conn.execute("DELETE FROM record_values")  # none: written only with the mark, in one transaction
        last = -1
        while rows := conn.execute(UNVALUED, (last, BATCH)).fetchall():
            conn.executemany(PUT_VALUE, [(s, *v, rowid) for rowid, s, m in rows for v in values_of(m)])
            last = rows[-1][0]
        conn.execute(MARK_VALUED)


#: The columns of a record's life, added to a store made before them (NULL: it never expires).
EXPIRY_COLUMNS = ("expires_at", "updated_at")
HAS_EXPIRY = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'records_expiring'"


def expiry(conn: sqlite3.Connection, path: Path) -> None:
    """Give a store made before expiry its columns (``EXPIRY_COLUMNS``) and ``records_expiring``,
    once (the index is made last: where it is, both are); a new store, the index."""
    if conn.execute(HAS_EXPIRY).fetchone():
        return
    with write_transaction(conn):
        if conn.execute(HAS_EXPIRY).fetchone():  # another process did it
            return
        have = {r[1] for r in conn.execute("PRAGMA table_info(records)")}
        for column in EXPIRY_COLUMNS:
            if column not in have:
                log.info("local %s: adding %s to the records", path, column)
                conn.execute(f"ALTER TABLE records ADD COLUMN {column} REAL")
        conn.execute(EXPIRY_INDEX)


#: A store whose vectors were checked against their index's dimension (``vector_sizes``).
SIZED = "SELECT 1 FROM store_meta WHERE key = 'vector_sizes'"
MARK_SIZED = "INSERT OR IGNORE INTO store_meta (key, value) VALUES ('vector_sizes', '1')"
#: Per index, the sizes of its vectors in bytes and how many have each (most first).
SIZES = """
SELECT s.index_name, length(e.embedding) AS size, count(*) AS n FROM embeddings AS e
JOIN records AS r ON r.rowid = e.rowid JOIN scopes AS s ON s.scope = r.scope
GROUP BY s.index_name, size ORDER BY s.index_name, n DESC, size
"""
#: The vectors of index ``?1`` not of size ``?2``: their records listed, the scopes' caches moved, the vectors dropped.
_MISSIZED = """
SELECT e.rowid FROM embeddings AS e JOIN records AS r ON r.rowid = e.rowid
WHERE r.scope IN (SELECT scope FROM scopes WHERE index_name = ?1) AND length(e.embedding) != ?2
"""
MISSIZED = (
    f"INSERT OR IGNORE INTO unembedded (rowid) {_MISSIZED}",
    f"UPDATE scopes SET version = version + 1 WHERE scope IN (SELECT scope FROM records WHERE rowid IN ({_MISSIZED}))",
    f"DELETE FROM embeddings WHERE rowid IN ({_MISSIZED})",
)


def vector_sizes(conn: sqlite3.Connection, path: Path) -> None:
    """Once (``SIZED``): each index's dimension recorded where only its embedder's id was (the size of
    most of its vectors), and its vectors of another size dropped, their records listed for new ones."""
    if conn.execute(SIZED).fetchone():
        return
    with write_transaction(conn):
        if conn.execute(SIZED).fetchone():  # another process did it
            return
        by_index: dict[str, list[int]] = {}
        for index, size, _ in conn.execute(SIZES).fetchall():
            by_index.setdefault(index, []).append(int(size or 0))
        for index, sizes in by_index.items():
            embedder = conn.execute(GET_META, (meta_key(EMBEDDER_KEY, index),)).fetchone()
            dim = conn.execute(GET_META, (meta_key(DIM_KEY, index),)).fetchone()
            if dim is not None and str(dim[0]).isdigit():
                right = 4 * int(dim[0])
            else:
                right = sizes[0]  # the size most of its vectors have
                if embedder and embedder[0] and right and right % 4 == 0:
                    conn.execute(SET_META, (meta_key(DIM_KEY, index), str(right // 4)))
            wrong = [size for size in sizes if size != right]
            if wrong:
                for statement in MISSIZED:
                    conn.execute(statement, (index, right))
                log.warning(
                    "local %s: index %r held vectors of another size than its embedder's (%d dimensions); they "
                    "were dropped and their memories wait for new ones (`longterm reembed`, or open the memory "
                    "with its embedder)",
                    path,
                    index,
                    right // 4,
                )
        conn.execute(MARK_SIZED)


def upgrade(conn: sqlite3.Connection, path: Path) -> None:
    """Move an older store to this schema (``local_v1``, ``local_v2``, ``values``, ``expiry``, then
    ``vector_sizes``)."""
    local_v1(conn, path)
    local_v2(conn, path)
    values(conn, path)
    expiry(conn, path)
    vector_sizes(conn, path)
