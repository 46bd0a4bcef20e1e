"""Stores written by older longterm versions, moved to the current layout when an engine opens them.

The seam: an engine's ``_open`` calls its upgrade with its own connection (``local_v1``
with the SQLite connection, ``redis_v1`` with the client and namespace). Each looks for
its old layout and moves it over once, safe against another process doing the same.
(Qdrant points of 0.1 hold the record spread out; ``qdrant.common.to_record`` reads both.)

Why apart from the engines: an upgrade reads a layout no engine writes any more, and goes
when that version is no longer supported; the engines keep only the current layout.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from pathlib import Path
from typing import Any

from ._sqlite import write_transaction
from .backends.local.schema import COLUMNS, stored_id
from .retrieval.text import index_terms, segment

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


#: KEYS: record keys; ARGV: their terms. Sets them on the records that still exist.
REDIS_RETERM = """
for i, k in ipairs(KEYS) do if redis.call('EXISTS', k) == 1 then redis.call('HSET', k, 'terms', ARGV[i]) end end
"""
#: Records re-indexed per script call.
REDIS_BATCH = 500


def redis_v1(r: Any, ns: str) -> None:
    """Index every record by our terms, then drop ``ns idx``: the index of 0.1, where RediSearch stemmed the text."""
    if (old := f"{ns}idx".encode()) not in r.execute_command("FT._LIST"):
        return
    reterm = r.register_script(REDIS_RETERM)
    keys = list(r.scan_iter(match=re.sub(r"([\\*?[\]])", r"\\\1", ns) + "m:*", count=1000))
    for i in range(0, len(keys), REDIS_BATCH):
        batch = keys[i : i + REDIS_BATCH]
        with r.pipeline(transaction=False) as pipe:
            for key in batch:
                pipe.hget(key, "doc")
            docs = pipe.execute()
        found = [(key, json.loads(doc)["text"]) for key, doc in zip(batch, docs, strict=True) if doc is not None]
        reterm(keys=[key for key, _ in found], args=[" ".join(index_terms(text)) for _, text in found])
    r.execute_command("FT.DROPINDEX", old)
