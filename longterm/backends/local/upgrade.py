"""A local store written by an older longterm version, moved to the current schema when it is opened.

The seam: ``LocalBackend._open`` calls ``local_v1(conn, path)`` with its own connection; it
looks for schema 1 (scopes spelled out in every row, hex ids, the text as 0.1 indexed it)
and moves it over once, in one write transaction, safe against another process doing the
same.

Why apart from the engine: an upgrade reads a layout the engine writes no more, and goes
when that version is no longer supported; the store keeps only the current schema.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from ...core.sqlite import write_transaction
from ...retrieval.text import segment
from .schema import COLUMNS, stored_id

log = logging.getLogger(__name__)

#: A local store written before scopes had ids (schema 1): its tables, moved over on open.
LOCAL_V1_TABLES = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memories'"
LOCAL_V1 = f"""
INSERT OR IGNORE INTO scopes (index_name, app_name, user_id)
    SELECT DISTINCT index_name, app_name, user_id FROM memories
    UNION SELECT DISTINCT index_name, app_name, user_id FROM saved_events;
UPDATE scopes SET version = coalesce((SELECT v.version FROM scope_versions AS v WHERE v.index_name = scopes.index_name
    AND v.app_name = scopes.app_name AND v.user_id = scopes.user_id), 0);
INSERT INTO records (rowid, scope, {COLUMNS}, terms)
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
            for statement in LOCAL_V1.split(";\n"):
                if statement.strip():
                    conn.execute(statement)
