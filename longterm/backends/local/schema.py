"""The local engine's SQL, as named constants: the schema and every statement.

The seam: ``store.py`` runs these and nothing else. A scope (index, app, user) is a row of
``scopes``; records and the ledger carry its integer id, and rowids its range (below), and
every statement is bound to it. The ledger (events handled without a record: dropped by
the policy, or erased; a record is its own event's entry) and the store's own facts
(``store_meta``: which embedder wrote the vectors) live in the same file.

Why records are keyed by (scope, session, event) and not by their id: the id is derived
from exactly these (``records.record_id``), and a key that grows with the session keeps a
save's inserts on a few B-tree pages, where a unique index on random hashes touched a page
per record (measured: 5 against 15-19 us a record at 100k). The id is kept as 16 bytes.

Why ``records_by_session`` (scope, session, time): a hit's neighbours are two short walks of it
from the hit's entry, whatever the session's length; without it a session's every row is read
(at 100k records, five hits in sessions of 50 turns: 0.40 against 1.0 ms; of 500: 0.39
against 3.0 ms), and a one-turn save costs no more with it that ``bench/neighbours.py`` can see.
A store made before it gets it when first opened.

Why filters read ``record_values`` and not the metadata's JSON: a filter is applied before a
search's cut, a count's or a page's, so the rows that pass must be found without reading every
record; a scan of 100k records' metadata with SQLite's JSON functions cost ~50 ms, against a
few for an index. Each record has a row per scalar at a metadata path and per scalar in a list
at a path (kinds apart: ranges compare scalars only), and a row of kind 0 for a path that holds
no scalar (an object, an empty list); keyed by (scope, path, kind, value), a filter's condition
is a seek, equality and ranges alike, and by record, a candidate's check is one
(``filtering.py``). Rows are written with their record (``rows.put``), go with it (the
trigger), and are filled once for a store made before them (``upgrade.values``). The record's
own fields are its columns: ``records_by_role`` (scope, role, author) finds a role's records,
and an author's without reading the rows (a store made before it gets it when first opened).

Why expiry is two columns and a partial index: every search, count and listing is now made at a
moment (``core.where.living``), and most records never expire. ``records_expiring`` (scope,
expires_at) holds only the records that do, so the scope's expired ones are one seek, nothing
when none expired: a count subtracts them, full text leaves their rowids out before its limit,
the vector arm their positions; a page checks the row it reads anyway. A store made before the
columns gets them (NULL: never expires) and the index when first opened (``upgrade.expiry``).

Why the full-text index is ``FTS_BUCKETS`` tables, and a record's rowid says its scope: FTS5's
BM25 counts, for each query term, the rows that hold it in the whole table (its IDF), on every
query. At a million records a frequent word ("work", "today") cost ~20 ms of such counting,
against ~0.5 ms to find the user's own matches. A scope's rows go to table ``scope % 16``, so
the counting walks a sixteenth of the file (a store with one user: that user's rows, as
before), and every rowid of a scope lies in its own range (``scope << 32`` on: ``row_range``),
which FTS5 seeks to, so a search reads the user's postings and nothing else (no scope token
to intersect with). Rows are inserted into their table by the engine (``rows.py``: no insert
trigger to evaluate sixteen times a row); updates and deletes by the triggers below.
"""

from __future__ import annotations


def stored_id(rid: str) -> bytes | str:
    """What the ``id`` column holds: a derived id's 16 bytes (``record_id``), any other id as it is."""
    if len(rid) == 32 and rid == rid.lower():
        try:
            return bytes.fromhex(rid)
        except ValueError:
            pass
    return rid


#: Full-text tables: a scope's records are indexed in ``records_fts_{scope % FTS_BUCKETS}``.
FTS_BUCKETS = 16
#: Bits of a rowid below its scope's id: a scope's rows are ``scope << ROW_BITS`` plus 1, 2, ...
ROW_BITS = 32
#: The largest scope id a rowid can carry (SQLite rowids are signed 64-bit).
MAX_SCOPE = (1 << (63 - ROW_BITS)) - 1


def bucket(scope: int) -> int:
    """The full-text table ``scope`` is indexed in: ``records_fts_{bucket(scope)}``."""
    return scope % FTS_BUCKETS


def row_range(scope: int) -> tuple[int, int]:
    """The first and last rowid scope ``scope`` may hold."""
    return scope << ROW_BITS, ((scope + 1) << ROW_BITS) - 1


SCHEMA = """
CREATE TABLE IF NOT EXISTS scopes (
    scope      INTEGER PRIMARY KEY,
    index_name TEXT NOT NULL,
    app_name   TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    version    INTEGER NOT NULL DEFAULT 0,
    next_row   INTEGER NOT NULL DEFAULT 0,
    UNIQUE (index_name, app_name, user_id)
);
CREATE TABLE IF NOT EXISTS records (
    rowid       INTEGER PRIMARY KEY,
    scope       INTEGER NOT NULL,
    session_id  TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    id          BLOB NOT NULL,
    author      TEXT NOT NULL,
    role        TEXT NOT NULL,
    event_types TEXT NOT NULL,
    text        TEXT NOT NULL,
    content     TEXT,
    timestamp   REAL NOT NULL,
    metadata    TEXT NOT NULL,
    terms       TEXT,
    expires_at  REAL,
    updated_at  REAL,
    UNIQUE (scope, session_id, event_id)
);
CREATE INDEX IF NOT EXISTS records_by_time ON records (scope, timestamp);
CREATE INDEX IF NOT EXISTS records_by_session ON records (scope, session_id, timestamp);
CREATE INDEX IF NOT EXISTS records_by_role ON records (scope, role, author);
CREATE TABLE IF NOT EXISTS ledger (
    scope      INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    event_id   TEXT NOT NULL,
    PRIMARY KEY (scope, session_id, event_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS records_erased AFTER DELETE ON records BEGIN
    INSERT OR IGNORE INTO ledger VALUES (old.scope, old.session_id, old.event_id);
END;
CREATE TABLE IF NOT EXISTS record_values (
    scope  INTEGER NOT NULL,
    path   TEXT NOT NULL,
    kind   INTEGER NOT NULL,
    value  NOT NULL,
    record INTEGER NOT NULL,
    PRIMARY KEY (scope, path, kind, value, record)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS record_values_by_record ON record_values (record, path, kind, value);
CREATE TRIGGER IF NOT EXISTS record_values_gone AFTER DELETE ON records BEGIN
    DELETE FROM record_values WHERE record = old.rowid;
END;
"""
#: A full-text table and its triggers, made with the first scope that needs it (``_scope``; or by
#: an upgrade, after the rows moved): a store makes only the tables its users use (each costs
#: ~0.7 ms to make; all sixteen doubled the cost of a new store).
BUCKET_DDL = [
    [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS records_fts_{b} USING fts5 ("
        "terms, content='', tokenize='porter unicode61 remove_diacritics 2')",
        f"""CREATE TRIGGER IF NOT EXISTS records_fts_{b}_ad AFTER DELETE ON records
WHEN old.scope % {FTS_BUCKETS} = {b} BEGIN
    INSERT INTO records_fts_{b} (records_fts_{b}, rowid, terms)
    VALUES ('delete', old.rowid, coalesce(old.terms, old.text));
END""",
        f"""CREATE TRIGGER IF NOT EXISTS records_fts_{b}_au AFTER UPDATE OF text, terms ON records
WHEN old.scope % {FTS_BUCKETS} = {b} BEGIN
    INSERT INTO records_fts_{b} (records_fts_{b}, rowid, terms)
    VALUES ('delete', old.rowid, coalesce(old.terms, old.text));
    INSERT INTO records_fts_{b} (rowid, terms) VALUES (new.rowid, coalesce(new.terms, new.text));
END""",
    ]
    for b in range(FTS_BUCKETS)
]

GET_SCOPE = "SELECT scope FROM scopes WHERE index_name = ? AND app_name = ? AND user_id = ?"
ADD_SCOPE = "INSERT OR IGNORE INTO scopes (index_name, app_name, user_id) VALUES (?, ?, ?)"
BUMP_VERSION = "UPDATE scopes SET version = version + 1 WHERE scope = ?"
GET_VERSION = "SELECT version FROM scopes WHERE scope = ?"

COLUMNS = (
    "id, session_id, event_id, author, role, event_types, text, content, timestamp, metadata, expires_at, updated_at"
)
#: What an ``UPSERT`` writes over: every column but the key's.
_CHANGED = (*(c.strip() for c in COLUMNS.split(",") if c.strip() not in ("session_id", "event_id")), "terms")
UPSERT = f"""
INSERT INTO records (scope, {COLUMNS}, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (scope, session_id, event_id) DO UPDATE SET {", ".join(f"{c} = excluded.{c}" for c in _CHANGED)}
WHERE {" OR ".join(f"records.{c} IS NOT excluded.{c}" for c in _CHANGED)}
"""
#: A new record, at the rowid its scope gave it (``TAKE_ROWS``); its full-text row is ``INDEX_ROW``.
INSERT = f"INSERT INTO records (rowid, scope, {COLUMNS}, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
#: The session's events that have a record (which of a save's records are new).
HELD = "SELECT event_id FROM records WHERE scope = ? AND session_id = ?"
#: ``?1`` rowids taken from scope ``?2``: the last one taken (never given again, erased or not).
TAKE_ROWS = "UPDATE scopes SET next_row = next_row + ?1 WHERE scope = ?2 RETURNING next_row"
INDEX_ROW = [f"INSERT INTO records_fts_{b} (rowid, terms) VALUES (?, ?)" for b in range(FTS_BUCKETS)]

_SEARCH = """
SELECT r.rowid{columns}, f.rank FROM (
    SELECT rowid, bm25(records_fts_{b}) AS rank FROM records_fts_{b}
    WHERE records_fts_{b} MATCH ?1 AND rowid BETWEEN ?2 AND ?3{alive} ORDER BY rank LIMIT ?5
) AS f JOIN records AS r ON r.rowid = f.rowid
WHERE r.scope = ?4
ORDER BY f.rank
"""
_RECORD = ", ".join("r." + c.strip() for c in COLUMNS.split(","))
#: A scope's best matches (rowid, the record, rank), per full-text table: (match, first and last
#: rowid of the scope, scope, k). Ranked in the full-text table alone, the records read after
#: the limit (the scope check too, though the rowid range already holds only the scope's rows):
#: a record looked up per match cost a third of a frequent-word search.
SEARCH = [_SEARCH.format(columns=", " + _RECORD, b=b, alive="") for b in range(FTS_BUCKETS)]
#: The same, rowids and ranks only (hybrid search fuses on them before reading a record).
SEARCH_IDS = [_SEARCH.format(columns="", b=b, alive="") for b in range(FTS_BUCKETS)]
BY_ROWID = f"SELECT rowid, {COLUMNS} FROM records WHERE rowid = ? AND scope = ?"
COUNT = "SELECT count(*) FROM records WHERE scope = ?"
SCAN = f"""
SELECT rowid, {COLUMNS} FROM records
WHERE scope = ? AND (session_id, event_id) > (?, ?) ORDER BY session_id, event_id LIMIT ?
"""
#: A page of a scope by time, newest (``NEWEST``) or oldest (``OLDEST``) first, after a cursor
#: (timestamp, rowid): ``records_by_time`` walks it (its entries end in the rowid).
NEWEST = f"""
SELECT rowid, {COLUMNS} FROM records
WHERE scope = ? AND (timestamp, rowid) < (?, ?) ORDER BY timestamp DESC, rowid DESC LIMIT ?
"""
OLDEST = f"""
SELECT rowid, {COLUMNS} FROM records
WHERE scope = ? AND (timestamp, rowid) > (?, ?) ORDER BY timestamp, rowid LIMIT ?
"""
#: A hit's neighbours (``sessions.py``): the anchor by its (scope, session, event), then the
#: rows just before and just after it in session order (time, then rowid: the order saved), each
#: a walk of ``records_by_session`` from the anchor's entry, however long the session.
ANCHOR = "SELECT rowid, id, timestamp FROM records WHERE scope = ? AND session_id = ? AND event_id = ?"
BEFORE = """
SELECT rowid, id, timestamp FROM records WHERE scope = ? AND session_id = ? AND (timestamp, rowid) < (?, ?)
ORDER BY timestamp DESC, rowid DESC LIMIT ?
"""
AFTER = """
SELECT rowid, id, timestamp FROM records WHERE scope = ? AND session_id = ? AND (timestamp, rowid) > (?, ?)
ORDER BY timestamp, rowid LIMIT ?
"""
#: The records of ``{}`` rowids of one scope (the few neighbours a search wants): looked up by
#: rowid (``+scope``: never by walking the scope's time index instead, 4x slower for ten rows).
BY_ROWIDS = f"SELECT rowid, {COLUMNS} FROM records WHERE rowid IN ({{}}) AND +scope = ?"
DELETE_ALL = "DELETE FROM records WHERE scope = ?"
#: Deletes ids of one scope, ``DELETE_BATCH`` at most (``.format`` the placeholders): one read of the scope each.
DELETE_IDS, DELETE_BATCH = "DELETE FROM records WHERE scope = ? AND id IN ({})", 500
DELETE_SESSION = "DELETE FROM records WHERE scope = ? AND session_id = ?"
#: After a delete (or a record's words written over), in its transaction: merge the full-text index
#: into one segment, which drops the deleted rows' terms (FTS5 keeps them, with a delete marker,
#: until segments merge).
PURGE = [f"INSERT INTO records_fts_{b} (records_fts_{b}) VALUES ('optimize')" for b in range(FTS_BUCKETS)]
#: After an erase: the WAL's frames into the file, then the WAL emptied (column 1: 1 if a reader kept it).
TRUNCATE_WAL = "PRAGMA wal_checkpoint(TRUNCATE)"
SCOPES = """
SELECT s.app_name, s.user_id, count(*) FROM records AS r JOIN scopes AS s ON s.scope = r.scope
WHERE s.index_name = ? GROUP BY r.scope
"""
ALIVE_N = "count(*) - (SELECT count(*) FROM records AS x WHERE x.scope = r.scope AND x.expires_at <= ?2)"
SCOPES_ALIVE = SCOPES.replace("?", "?1").replace("count(*)", ALIVE_N, 1)  # records_expiring: as fast as SCOPES
INDICES = """
SELECT DISTINCT s.index_name FROM scopes AS s
WHERE EXISTS (SELECT 1 FROM records AS r WHERE r.scope = s.scope) ORDER BY 1
"""

SELECT_SAVED = """
SELECT event_id FROM ledger WHERE scope = ?1 AND session_id = ?2
UNION ALL SELECT event_id FROM records WHERE scope = ?1 AND session_id = ?2
"""
INSERT_SAVED = "INSERT OR IGNORE INTO ledger VALUES (?, ?, ?)"
GET_META = "SELECT value FROM store_meta WHERE key = ?"
SET_META = "INSERT INTO store_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"

# -- filters (``filtering.py``; ``where`` is a condition on ``r``, the records) --------------------

#: A record's values for filters (``filtering.values_of``); INSERT OR IGNORE: 1 and 1.0 in one list are one.
PUT_VALUE = "INSERT OR IGNORE INTO record_values (scope, path, kind, value, record) VALUES (?, ?, ?, ?, ?)"
DROP_VALUES = "DELETE FROM record_values WHERE record = ?"
#: A record as it is before an ``UPSERT`` writes over it (``rows._overwrite``): its rowid, then
#: what the ``UPSERT`` compares, in ``to_row``'s order.
STORED_OF = (
    "SELECT rowid, id, author, role, event_types, text, content, timestamp, metadata, expires_at, updated_at, terms "
    "FROM records WHERE scope = ? AND session_id = ? AND event_id = ?"
)
_FILTERED_SEARCH = """
SELECT f.rowid{columns}, f.rank FROM (
    SELECT rowid, bm25(records_fts_{b}) AS rank FROM records_fts_{b}
    WHERE records_fts_{b} MATCH ? AND rowid BETWEEN ? AND ?
) AS f JOIN records AS r ON r.rowid = f.rowid
WHERE r.scope = ? AND ({{where}}) ORDER BY f.rank LIMIT ?
"""
#: ``SEARCH`` and ``SEARCH_IDS`` of the records that pass: (match, first and last rowid, scope,
#: the condition's, k); the limit after the condition, checked on each match.
FILTERED_SEARCH = [_FILTERED_SEARCH.format(columns=", " + _RECORD, b=b) for b in range(FTS_BUCKETS)]
FILTERED_SEARCH_IDS = [_FILTERED_SEARCH.format(columns="", b=b) for b in range(FTS_BUCKETS)]
#: A page's condition when few pass: the record among ``{rows}`` (made once per statement).
AMONG = "r.rowid IN ({rows})"
#: Whether ``{rows}`` gives fewer than ``?`` rowids (read no further than that).
BOUNDED_COUNT = "SELECT count(*) FROM (SELECT 1 FROM ({rows}) LIMIT ?)"
#: The rowids ``{rows}`` gives, less the scope's first (shorter), as one text.
FILTERED_ROWIDS = "SELECT group_concat(id - ?) FROM ({rows})"
#: Of the rowids in a JSON array (the vector arm's candidates), those that pass ``{where}``: by
#: their rowids alone (``PASSING``: the values are looked up by record) or, where the condition
#: reads the record's columns, with its row (``PASSING_ROWS``; ``+scope``: never by the scope's index).
PASSING = "SELECT r.rowid FROM (SELECT value AS rowid FROM json_each(?)) AS r WHERE {where}"
PASSING_ROWS = """
SELECT r.rowid FROM records AS r WHERE r.rowid IN (SELECT value FROM json_each(?)) AND +r.scope = ? AND ({where})
"""
FILTERED_SCAN = f"""
SELECT rowid, {COLUMNS} FROM records AS r
WHERE scope = ? AND (session_id, event_id) > (?, ?) AND ({{where}}) ORDER BY session_id, event_id LIMIT ?
"""
FILTERED_NEWEST = f"""
SELECT rowid, {COLUMNS} FROM records AS r
WHERE scope = ? AND (timestamp, rowid) < (?, ?) AND ({{where}}) ORDER BY timestamp DESC, rowid DESC LIMIT ?
"""
FILTERED_OLDEST = f"""
SELECT rowid, {COLUMNS} FROM records AS r
WHERE scope = ? AND (timestamp, rowid) > (?, ?) AND ({{where}}) ORDER BY timestamp, rowid LIMIT ?
"""

# -- vectors (``vectors.py``) -----------------------------------------------------------------

VECTOR_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    rowid     INTEGER PRIMARY KEY REFERENCES records (rowid) ON DELETE CASCADE,
    embedding BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS unembedded (
    rowid INTEGER PRIMARY KEY REFERENCES records (rowid) ON DELETE CASCADE
);
"""
#: Embedding later (``embed_later``): this connection queues what it writes for the background.
EMBED_LATER = """
CREATE TEMP TRIGGER IF NOT EXISTS embed_later_ai AFTER INSERT ON records BEGIN
    INSERT OR IGNORE INTO unembedded VALUES (new.rowid);
END;
CREATE TEMP TRIGGER IF NOT EXISTS embed_later_au AFTER UPDATE ON records BEGIN
    DELETE FROM embeddings WHERE rowid = old.rowid;
    INSERT OR IGNORE INTO unembedded VALUES (new.rowid);
END;
"""
PUT_VECTOR = """
INSERT OR REPLACE INTO embeddings (rowid, embedding)
SELECT rowid, ? FROM records WHERE scope = ? AND session_id = ? AND event_id = ?
"""
UNEMBEDDED = """
SELECT r.rowid, r.text FROM unembedded AS u JOIN records AS r ON r.rowid = u.rowid
WHERE r.scope IN (SELECT scope FROM scopes WHERE index_name = ?) ORDER BY u.rowid LIMIT ?
"""
#: A vector lands only if its record still holds the text it was made from.
PUT_LATE_VECTOR = """
INSERT OR REPLACE INTO embeddings (rowid, embedding)
SELECT rowid, ? FROM records WHERE rowid = ? AND text = ?
"""
DONE = "DELETE FROM unembedded WHERE rowid = ? AND EXISTS (SELECT 1 FROM records WHERE rowid = ? AND text = ?)"
BUMP_ROWS = "UPDATE scopes SET version = version + 1 WHERE scope IN (SELECT scope FROM records WHERE rowid IN ({}))"
#: A scope's vectors of the store's size in bytes (``vectors``: a vector of another size is never read).
LOAD_SCOPE = """
SELECT e.rowid, e.embedding FROM records AS r JOIN embeddings AS e ON e.rowid = r.rowid
WHERE r.scope = ? AND length(e.embedding) = ?
"""
#: Every record of the index (``?1``) without a vector, listed as waiting for one (``longterm reembed``).
LIST_UNEMBEDDED = """
INSERT OR IGNORE INTO unembedded (rowid)
SELECT r.rowid FROM records AS r WHERE r.scope IN (SELECT scope FROM scopes WHERE index_name = ?1)
AND NOT EXISTS (SELECT 1 FROM embeddings AS e WHERE e.rowid = r.rowid)
"""
#: The same, of one scope (``?2``) of the index.
LIST_SCOPE_UNEMBEDDED = """
INSERT OR IGNORE INTO unembedded (rowid)
SELECT r.rowid FROM records AS r WHERE r.scope = ?2 AND r.scope IN (SELECT scope FROM scopes WHERE index_name = ?1)
AND NOT EXISTS (SELECT 1 FROM embeddings AS e WHERE e.rowid = r.rowid)
"""
#: Per index: its records without a vector, and how many of them are listed as waiting for one (``doctor``).
MISSING_VECTORS = """
SELECT s.index_name, count(*), count(u.rowid) FROM records AS r JOIN scopes AS s ON s.scope = r.scope
LEFT JOIN unembedded AS u ON u.rowid = r.rowid
WHERE NOT EXISTS (SELECT 1 FROM embeddings AS e WHERE e.rowid = r.rowid) GROUP BY s.index_name
"""


def meta_key(key: str, index: str) -> str:
    """The ``store_meta`` key of ``key`` for ``index`` (each index keeps its own: its embedder...)."""
    return f"{key}:{index}"


#: The index of every ``embedder`` meta key (``meta_key("embedder", index)``) and its value.
EMBEDDERS = "SELECT substr(key, 10), value FROM store_meta WHERE key LIKE 'embedder:%'"

# -- expiry (``reads.py``: a read made at a moment leaves out what expired by then) ----------------

#: A store's expiry index, made (with the columns, for a store made before them) by ``upgrade.expiry``:
#: only the records that expire are in it, so "did any of this scope's expire by then" is one seek.
EXPIRY_INDEX = "CREATE INDEX IF NOT EXISTS records_expiring ON records (scope, expires_at) WHERE expires_at IS NOT NULL"
#: The record ``r`` is alive at ``?``.
ALIVE = "(r.expires_at IS NULL OR r.expires_at > ?)"
#: The scope's records that expired by ``?`` (rowids; a seek of ``records_expiring``).
EXPIRED = "SELECT rowid FROM records WHERE scope = ? AND expires_at <= ?"
#: The same as one text, less the scope's first rowid (``FILTERED_ROWIDS``): (first, scope, moment).
EXPIRED_ROWIDS = "SELECT group_concat(rowid - ?) FROM records WHERE scope = ? AND expires_at <= ?"
_NOT_EXPIRED = " AND rowid NOT IN (SELECT rowid FROM records WHERE scope = ?4 AND expires_at <= ?6)"
#: ``SEARCH`` and ``SEARCH_IDS`` of the records alive at ``?6``: the expired ones' rowids (none,
#: most often: one seek) left out of the full-text ranking before its limit.
ALIVE_SEARCH = [_SEARCH.format(columns=", " + _RECORD, b=b, alive=_NOT_EXPIRED) for b in range(FTS_BUCKETS)]
ALIVE_SEARCH_IDS = [_SEARCH.format(columns="", b=b, alive=_NOT_EXPIRED) for b in range(FTS_BUCKETS)]
#: How many of the scope's records are alive at ``?2``: all less the expired (two index counts).
ALIVE_COUNT = (
    "SELECT (SELECT count(*) FROM records WHERE scope = ?1) - "
    "(SELECT count(*) FROM records WHERE scope = ?1 AND expires_at <= ?2)"
)
#: A filter's ``{count}`` less its records that expired (scope, moment, ``{where}``'s arguments).
ALIVE_FILTERED_COUNT = (
    "SELECT ({count}) - (SELECT count(*) FROM records AS r WHERE r.scope = ? AND r.expires_at <= ? AND ({where}))"
)
