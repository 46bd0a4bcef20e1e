"""A Redis store written by an earlier longterm, moved to the current layout when it is opened.

The seam: ``RedisBackend._open`` calls ``redis_v1(client, ns)``: where the namespace still
has the index of 0.1 (``ns idx``, where RediSearch stemmed the text), every record is indexed
again by our terms, then that index is dropped; safe against another process doing the same
(the terms are the same). Then ``redis_sessions(client, ns, index, empty=...)``: a store whose
records carry no ``session`` TAG yet (written before a hit's neighbours were read by session)
gets the field in its index (``FT.ALTER``) and every record its tag, once (``SESSIONS_KEY`` in
``ns meta`` says it is done); a store just made empty only notes it. A process of the earlier
release still saving into the store meanwhile writes records without the tag: a search finds
them, only no neighbours are read around them.
``redis_ids`` does the same for ``ID_FIELD`` (``rid``, each record's key digest, what a mark of
ids hides; ``IDS_KEY``). ``redis_saved`` and ``redis_expiry`` add a NUMERIC field with no values yet (``saved``,
``expires``), once each (a field of ``ns meta`` says it is done). ``redis_listed`` notes, in a
store just made, that every ledger session is in its scope's sessions set (``SAVE`` adds it);
``sessions_of`` lists a scope's ledger sessions, in a store made before that set from its records
too: a ledger key is a digest of (app, user, session), so a session of such a store whose every
record is gone cannot be found.

``redis_vector_sizes`` checks, once (``VECTORS_KEY``), every record's vector against the index's
dimension: one of another size (an earlier release wrote it; RediSearch then leaves the whole
record out of its index, so not even full text finds it) is dropped and its record listed as
waiting for a vector (``vectors``), found by full text again at once and embedded by the next
memory opened with the store's embedder; the dimension is recorded where only the embedder's id was.

``records_of(client, ns)`` reads every record's ``doc``, a batch at a time (``tokens`` too).

Why apart from the engine: an upgrade reads a layout the engine writes no more, and goes
when that version is no longer supported.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...core.identity import DIM_KEY, EMBEDDER_KEY
from ...retrieval.text import index_terms
from .filtering import EXPIRES_FIELD
from .scripts import ID_FIELD, SAVED_FIELD, SESSION_FIELD, UNEMBEDDED, session_tag
from .vectors import record_keys

if TYPE_CHECKING:
    from redis import Redis

log = logging.getLogger(__name__)

#: KEYS: record keys; ARGV: their terms. Sets them on the records that still exist.
REDIS_RETERM = """
for i, k in ipairs(KEYS) do if redis.call('EXISTS', k) == 1 then redis.call('HSET', k, 'terms', ARGV[i]) end end
"""
#: KEYS: record keys; ARGV: their session tags. Sets them on the records that still exist.
REDIS_SESSIONS = """
for i, k in ipairs(KEYS) do if redis.call('EXISTS', k) == 1 then redis.call('HSET', k, 'session', ARGV[i]) end end
"""
#: KEYS: record keys. Sets the ``rid`` of those that still exist (``scripts.record_tag``).
REDIS_IDS = """
for _, k in ipairs(KEYS) do if redis.call('EXISTS', k) == 1 then redis.call('HSET', k, 'rid', redis.sha1hex(k)) end end
"""
#: KEYS: ``ns unembedded``, then record keys. ARGV: the size in bytes of the index's vectors. A record whose
#: ``embedding`` is of another size loses it and is listed (scored by its ``saved`` clock); how many.
REDIS_RESIZE = """
local n = 0
for i = 2, #KEYS do
  local size = redis.call('HSTRLEN', KEYS[i], 'embedding')
  if size > 0 and size ~= tonumber(ARGV[1]) then
    redis.call('HDEL', KEYS[i], 'embedding')
    redis.call('ZADD', KEYS[1], tonumber(redis.call('HGET', KEYS[i], 'saved')) or 0, KEYS[i]); n = n + 1
  end
end
return n
"""
#: Records re-indexed per script call.
REDIS_BATCH = 500
#: The field of ``ns meta`` saying every record carries its session tag.
SESSIONS_KEY = "sessions"
#: The field of ``ns meta`` saying every record carries its ``rid`` and the index has ``ID_FIELD``.
IDS_KEY = "ids_field"
#: The field of ``ns meta`` saying the index has ``SAVED_FIELD``.
SAVED_KEY = "saved_field"
#: The field of ``ns meta`` saying the index has ``EXPIRES_FIELD``.
EXPIRY_KEY = "expires_field"
#: The field of ``ns meta`` saying every ledger session is in its scope's sessions set (a store made with it).
LISTED_KEY = "ledger_sessions"
#: The field of ``ns meta`` saying every record's vector was checked against the index's dimension.
VECTORS_KEY = "vector_sizes"


def redis_v1(r: Redis, ns: str) -> bool:
    """Index every record by our terms, then drop ``ns idx``: the index of 0.1, where RediSearch stemmed
    the text. Whether there was one."""
    if (old := f"{ns}idx".encode()) not in r.execute_command("FT._LIST"):
        return False
    reterm = r.register_script(REDIS_RETERM)
    for batch, docs in records_of(r, ns):
        found = [(key, json.loads(doc)["text"]) for key, doc in zip(batch, docs, strict=True) if doc is not None]
        reterm(keys=[key for key, _ in found], args=[" ".join(index_terms(text)) for _, text in found])
    r.execute_command("FT.DROPINDEX", old)
    return True


def redis_sessions(r: Redis, ns: str, index: str, *, empty: bool) -> None:
    """Every record of ``ns`` tagged with its session (``SESSION_FIELD``) and the index told of the
    field, unless ``ns meta`` says it was done; with ``empty`` (a store just made) only noted."""
    if r.hget(f"{ns}meta", SESSIONS_KEY) is not None:
        return
    if not empty:
        add_field(r, index, SESSION_FIELD)  # made with it: a fresh index over 0.1's records
        tag = r.register_script(REDIS_SESSIONS)
        for batch, docs in records_of(r, ns):
            found = [(key, json.loads(doc)["session_id"]) for key, doc in zip(batch, docs, strict=True) if doc]
            tag(keys=[key for key, _ in found], args=[session_tag(sid) for _, sid in found])
    r.hset(f"{ns}meta", SESSIONS_KEY, "1")


def redis_ids(r: Redis, ns: str, index: str, *, empty: bool) -> None:
    """Every record of ``ns`` given its ``rid`` and the index told of ``ID_FIELD``, unless ``ns meta``
    says it was done; with ``empty`` only noted. A record an older process writes meanwhile has none:
    an erase of many ids is not hidden for it until it goes (its deletes are as before)."""
    if r.hget(f"{ns}meta", IDS_KEY) is not None:
        return
    if not empty:
        add_field(r, index, ID_FIELD)
        tag = r.register_script(REDIS_IDS)
        for batch in record_keys(r, ns):  # keys only: a record's doc is not read to tag it
            tag(keys=batch)
    r.hset(f"{ns}meta", IDS_KEY, "1")


def add_field(r: Redis, index: str, field: tuple[str, ...]) -> None:
    """``field`` added to ``index``; already there (made with it, or added by another process) is fine."""
    try:
        r.execute_command("FT.ALTER", index, "SCHEMA", "ADD", *field)
    except Exception as exc:
        if "duplicate" not in str(exc).lower():
            raise


def records_of(r: Redis, ns: str) -> Iterator[tuple[list[bytes], list[bytes | None]]]:
    """Every record key of ``ns`` and its ``doc``, ``REDIS_BATCH`` at a time (one round trip each)."""
    keys = list(r.scan_iter(match=re.sub(r"([\\*?[\]])", r"\\\1", ns) + "m:*", count=1000))
    for i in range(0, len(keys), REDIS_BATCH):
        batch = keys[i : i + REDIS_BATCH]
        with r.pipeline(transaction=False) as pipe:
            for key in batch:
                pipe.hget(key, "doc")
            yield batch, pipe.execute()


def redis_saved(r: Redis, ns: str, index: str, *, empty: bool) -> None:
    """The index told of ``SAVED_FIELD`` (an erase's mark compares it; ``erasing``), unless ``ns meta``
    says it was; records written before have none, and count as older than any erase."""
    _field(r, ns, index, SAVED_KEY, SAVED_FIELD, empty=empty)


def redis_expiry(r: Redis, ns: str, index: str, *, empty: bool) -> None:
    """The index told of ``EXPIRES_FIELD`` (what ``alive`` reads), unless ``ns meta`` says it was;
    records written before have none and no ``EXPIRES`` token: they never expire."""
    _field(r, ns, index, EXPIRY_KEY, EXPIRES_FIELD, empty=empty)


def _field(r: Redis, ns: str, index: str, key: str, field: tuple[str, ...], *, empty: bool) -> None:
    """``field`` added to the index (``FT.ALTER``; not to one ``empty``, made with it), then ``key`` set
    in ``ns meta``; nothing when it is set already. No record is read: the field has no values yet."""
    if r.hget(f"{ns}meta", key) is not None:
        return
    if not empty:
        add_field(r, index, field)
    r.hset(f"{ns}meta", key, "1")


def redis_listed(r: Redis, ns: str, *, empty: bool) -> None:
    """In a store just made (``empty``): every ledger session will be in its scope's sessions set."""
    if empty:
        r.hsetnx(f"{ns}meta", LISTED_KEY, "1")


def sessions_of(r: Redis, ns: str, listed: str, scope_set: str) -> list[str]:
    """A scope's ledger sessions: its sessions set (``listed``), and in a store made before it the
    sessions of the scope's records (its set ``scope_set``) too (module docstring)."""
    found = {m.decode() if isinstance(m, bytes) else str(m) for m in r.smembers(listed)}
    if r.hget(f"{ns}meta", LISTED_KEY) is None:
        keys = list(r.sscan_iter(scope_set, count=1000))
        for i in range(0, len(keys), REDIS_BATCH):
            with r.pipeline(transaction=False) as pipe:
                for key in keys[i : i + REDIS_BATCH]:
                    pipe.hget(key, "doc")
                found.update(json.loads(doc)["session_id"] for doc in pipe.execute() if doc)
    return sorted(found)


def redis_vector_sizes(r: Redis, ns: str, index: str, *, empty: bool) -> None:
    """Once (``VECTORS_KEY``): every vector of another size than the index's dimension dropped and its
    record listed as waiting for one; the dimension recorded where only the embedder's id was (module
    docstring). With ``empty`` (a store just made), or an index without vectors, only noted."""
    meta = f"{ns}meta"
    if r.hget(meta, VECTORS_KEY) is not None:
        return
    dim = None if empty else vector_dim(r, index)
    if dim is not None:
        resize = r.register_script(REDIS_RESIZE)
        dropped = sum(int(resize(keys=[ns + UNEMBEDDED, *keys], args=[4 * dim])) for keys in record_keys(r, ns))
        if r.hget(meta, EMBEDDER_KEY) and r.hget(meta, DIM_KEY) is None:
            r.hsetnx(meta, DIM_KEY, str(dim))
        if dropped:
            log.warning(
                "redis %s: %d memories held vectors of another size than the index's (%d dimensions), so "
                "RediSearch left them out of every search; their vectors were dropped and they wait for new "
                "ones (`longterm reembed`, or open the memory with its embedder), found by full text meanwhile",
                index,
                dropped,
                dim,
            )
    r.hset(meta, VECTORS_KEY, "1")


def vector_dim(r: Redis, index: str) -> int | None:
    """The dimension of ``index``'s vector field (``FT.INFO``), None when it has none."""
    info = r.execute_command("FT.INFO", index)
    fields = dict(zip(info[::2], info[1::2], strict=False))
    for attribute in fields.get(b"attributes", []):
        spec = {_text(k).lower(): v for k, v in zip(attribute[::2], attribute[1::2], strict=False)}
        if _text(spec.get("type", b"")).upper() == "VECTOR" and str(_text(spec.get("dim", ""))).isdigit():
            return int(_text(spec["dim"]))
    return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
