"""The local engine's SQL, as named constants: the schema and every statement.

The seam: ``store.py`` runs these and nothing else. The scope (index, app, user) is in
every statement's WHERE clause, and an FTS5 column holds a per-scope digest token (see
``store.py`` for why). The ledger (``saved_events``) and the store's own facts
(``store_meta``: which embedder wrote the vectors) live in the same file, per index.
"""

from __future__ import annotations

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    rowid       INTEGER PRIMARY KEY,
    index_name  TEXT NOT NULL,
    id          TEXT NOT NULL,
    app_name    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    author      TEXT NOT NULL,
    role        TEXT NOT NULL,
    event_types TEXT NOT NULL,
    text        TEXT NOT NULL,
    content     TEXT,
    timestamp   REAL NOT NULL,
    metadata    TEXT NOT NULL,
    digest      TEXT NOT NULL,
    scope_key   TEXT NOT NULL,
    terms       TEXT,
    UNIQUE (index_name, id)
);
CREATE INDEX IF NOT EXISTS memories_scope ON memories (index_name, app_name, user_id, timestamp);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5 (
    scope_key, terms, content='memories', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, scope_key, terms) VALUES (new.rowid, new.scope_key, coalesce(new.terms, new.text));
END;
CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, scope_key, terms)
    VALUES ('delete', old.rowid, old.scope_key, coalesce(old.terms, old.text));
END;
CREATE TRIGGER IF NOT EXISTS memories_au AFTER UPDATE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, scope_key, terms)
    VALUES ('delete', old.rowid, old.scope_key, coalesce(old.terms, old.text));
    INSERT INTO memories_fts (rowid, scope_key, terms) VALUES (new.rowid, new.scope_key, coalesce(new.terms, new.text));
END;
"""

COLUMNS = "id, app_name, user_id, session_id, event_id, author, role, event_types, text, content, timestamp, metadata"

UPSERT = f"""
INSERT INTO memories (index_name, {COLUMNS}, digest, scope_key, terms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (index_name, id) DO UPDATE SET
    author = excluded.author, role = excluded.role, event_types = excluded.event_types,
    text = excluded.text, content = excluded.content, timestamp = excluded.timestamp,
    metadata = excluded.metadata, digest = excluded.digest, terms = excluded.terms
WHERE memories.digest != excluded.digest
"""

_M_COLUMNS = ", ".join("m." + c.strip() for c in COLUMNS.split(","))
SEARCH = f"""
SELECT m.rowid, {_M_COLUMNS}, bm25(memories_fts, 0.0, 1.0) AS rank
FROM memories_fts JOIN memories AS m ON m.rowid = memories_fts.rowid
WHERE memories_fts MATCH ? AND m.index_name = ? AND m.app_name = ? AND m.user_id = ?
ORDER BY rank LIMIT ?
"""

SEARCH_IDS = """
SELECT m.rowid, bm25(memories_fts, 0.0, 1.0) AS rank
FROM memories_fts JOIN memories AS m ON m.rowid = memories_fts.rowid
WHERE memories_fts MATCH ? AND m.index_name = ? AND m.app_name = ? AND m.user_id = ?
ORDER BY rank LIMIT ?
"""
BY_ROWID = (
    f"SELECT m.rowid, {_M_COLUMNS} FROM memories AS m "
    "WHERE m.rowid = ? AND m.index_name = ? AND m.app_name = ? AND m.user_id = ?"
)
MAX_ROWID = "SELECT max(rowid) FROM memories"
COUNT = "SELECT count(*) FROM memories WHERE index_name = ? AND app_name = ? AND user_id = ?"
SCAN = f"""
SELECT rowid, {COLUMNS} FROM memories
WHERE index_name = ? AND app_name = ? AND user_id = ? AND rowid > ?
ORDER BY rowid LIMIT ?
"""
DELETE_ALL = "DELETE FROM memories WHERE index_name = ? AND app_name = ? AND user_id = ?"
DELETE_ONE = "DELETE FROM memories WHERE index_name = ? AND app_name = ? AND user_id = ? AND id = ?"
DELETE_SESSION = "DELETE FROM memories WHERE index_name = ? AND app_name = ? AND user_id = ? AND session_id = ?"
SCOPES = "SELECT app_name, user_id, count(*) FROM memories WHERE index_name = ? GROUP BY app_name, user_id"

LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS saved_events (
    index_name TEXT NOT NULL,
    app_name   TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    event_id   TEXT NOT NULL,
    PRIMARY KEY (index_name, app_name, user_id, session_id, event_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
"""
SELECT_SAVED = (
    "SELECT event_id FROM saved_events WHERE index_name = ? AND app_name = ? AND user_id = ? AND session_id = ?"
)
INSERT_SAVED = "INSERT OR IGNORE INTO saved_events VALUES (?, ?, ?, ?, ?)"
GET_META = "SELECT value FROM store_meta WHERE key = ?"
SET_META = "INSERT INTO store_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
