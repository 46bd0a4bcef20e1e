"""Qdrant's names and ids: a collection's name, a record's point id, a meta key's or ledger entry's id.

The seam: ``collection_name(prefix, index)`` names an index's collection (and qdrant-edge's
directory), ``point_id(record_id)`` a record's point, ``name_id(*parts)`` a ledger entry's or a
meta key's point.

Why: a point id is a UUID or an integer, so a record's id is read as one. Every spelling of one
UUID reads as the same point, while a record is found by its id exactly, as on every engine (a
delete by ``id.upper()`` must not erase it): a lookup by a caller's id checks the id of the
record the point holds (``common.QdrantEngine._exactly``), and stored points keep their ids.
"""

from __future__ import annotations

import json
import re
import uuid

from ...core.scope import safe_name

_NAMES = uuid.UUID("9b1f0c52-5f8e-4a43-9d55-6c0e1f7d2a10")


def collection_name(prefix: str, index: str) -> str:
    """``prefix + index`` in ``[A-Za-z0-9_-]``, at most 200 characters (Qdrant allows 255, and a
    directory name as many bytes; the ledger's name is longer); distinct indexes stay distinct."""
    return safe_name(f"{prefix}{index}", "A-Za-z0-9_-", sep="_", limit=200)


def point_id(record_id: str) -> str:
    """A record's point id: its id read as a UUID (ours are 128-bit hex digests). Any other
    string (a foreign id, whatever a caller passes to delete) gets a name-based UUID of its
    own, so it can neither fail nor meet one of ours. Other spellings of one UUID (upper case,
    dashes, braces, ``urn:uuid:``) read as the same point: a lookup by a caller's id checks the
    record's (``common.QdrantEngine._exactly``)."""
    try:
        return str(uuid.UUID(hex=record_id))
    except ValueError:
        return str(uuid.uuid5(_NAMES, record_id))


def name_id(*parts: str) -> str:
    """A name-based UUID of ``parts`` (a ledger entry's, a meta key's)."""
    return str(uuid.uuid5(_NAMES, json.dumps(parts)))


def physical_prefix(prefix: str) -> str:
    """How ``prefix`` begins the collection names ``collection_name`` makes of it."""
    return re.sub("[^A-Za-z0-9_-]", "_", prefix)


__all__ = ["collection_name", "name_id", "physical_prefix", "point_id"]
