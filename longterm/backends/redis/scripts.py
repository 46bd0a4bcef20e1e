"""The Redis engine's fixed parts: key layout, RediSearch arguments, the Lua scripts of a save and an erase.

The seam: ``namespace(prefix, index)`` is where every key of a store starts; ``SAVE`` and
``ERASE`` are the scripts that make a save (records with their ledger marks, leaving out
events the ledger holds) and an erase each one step; ``escape`` makes a term safe in
RediSearch's query syntax, ``hits`` reads an ``FT.SEARCH`` reply. The engine (``engine.py``)
only calls them.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from typing import Any

from ...core.erasures import Erasure
from ...core.scope import safe_name, scope_key
from ...core.windows import Ask
from ...errors import BackendError
from ...records import MemoryRecord, parse_record
from ..index_names import refuse_another
from .filtering import EXPIRES_FIELD, FILTER_FIELD

START_HINT = "Run Redis Stack (image redis/redis-stack-server), or start redis-server with --loadmodule redisearch.so."
FAILOVER_HINT = "A failover is under way (or a replica was named as the server); retry in a few seconds."
#: Records per script call: a save of up to this many lands whole or not at all; a larger
#: one is written in several calls (the ledger with the last), so no call blocks the server long.
SCRIPT_BATCH = 1000
#: Records erased per script call.
ERASE_BATCH = 500
#: FT.CREATE and FT.SEARCH arguments: the key prefix follows ``INDEX_ON``, the dim ``VECTOR``, the top k a query's.
INDEX_ON = ("ON", "HASH", "STOPWORDS", 0, "PREFIX", 1)
#: Each record's session as a TAG (a digest: ``session_tag``), so one query finds a session's records.
SESSION_FIELD = ("session", "TAG")
#: Each record's place on the store's clock (``CLOCK``) when it was written: what an erasure's mark
#: compares (``core.erasures``); a record without one was written before the store kept it.
SAVED_FIELD = ("saved", "NUMERIC")
#: Each record's key as a TAG (``record_tag``: a digest, set by ``SAVE``), so an erasure's mark of ids
#: is a clause (``visible``) every read ANDs.
ID_FIELD = ("rid", "TAG")
#: Ids one mark of an erase of ids holds; every mark of an erase is written at once (``MARK``).
MARK_IDS = 5_000
SCHEMA: tuple[str, ...] = ("SCHEMA", "terms", "TEXT", "NOSTEM", "scope", "TAG", "timestamp", "NUMERIC", "SORTABLE")
SCHEMA += (*FILTER_FIELD, *SESSION_FIELD, *SAVED_FIELD, *EXPIRES_FIELD, *ID_FIELD)
#: The field of ``ns meta`` counting the store's writes and erases: its clock (only grows).
CLOCK = "clock"
#: The sorted set (after the namespace) of the record keys saved without a vector, waiting for one, scored
#: by the store's clock when listed (oldest first): ``SAVE`` in mode ``PENDING``, ``vectors``, ``upgrade``.
UNEMBEDDED = "unembedded"
#: ``SAVE``'s first argument: the records carry vectors; they carry none; none, and are listed (``UNEMBEDDED``).
WITH_VECTORS, NO_VECTORS, PENDING = 1, 0, 2
#: ``SAVE``'s second argument: every record; those of events the ledger does not hold; only over records still there.
ALL, NEW_ONLY, OVER = 0, 1, 2
#: The field of ``ns meta`` holding the clock up to which every record written carries its filter
#: tokens (``tokens``); ``SAVE`` and ``MARK`` move it with the clock while the two are equal.
FILTERS_KEY = "filters"
VECTOR = ("embedding", "VECTOR", "HNSW", 6, "TYPE", "FLOAT32", "DISTANCE_METRIC", "COSINE", "DIM")
TEXT_QUERY = ("WITHSCORES", "SCORER", "BM25STD", "RETURN", 1, "doc", "DIALECT", 2, "LIMIT", 0)
KNN_QUERY = ("SORTBY", "vscore", "RETURN", 2, "doc", "vscore", "DIALECT", 2, "LIMIT", 0)
#: A session query's arguments after its PARAMS (``session_records``), then the offset and the page size.
SESSION_QUERY = ("SORTBY", "timestamp", "ASC", "RETURN", 1, "doc", "DIALECT", 2, "LIMIT")
#: Records per page of a session query (one page, one round trip, holds most sessions' records).
SESSION_PAGE = 1000
#: Field of ``ns meta`` holding the index name as the caller gave it (keys hold ``safe_name``'s).
INDEX_KEY = "index"
#: What RediSearch says of a missing index (FT.SEARCH, FT.INFO), and ``SAVE`` of a missing ``ns meta``.
NO_INDEX = ("no such index", "unknown index")
#: A Lua function moving the clock of ``ns meta`` (KEYS[1]), and ``FILTERS_KEY`` with it when they were
#: equal (every record written so far carries its tokens, and so does what this script writes); the clock.
TICK = """
local function tick()
  local now = redis.call('HINCRBY', KEYS[1], 'clock', 1)
  local mark = redis.call('HGET', KEYS[1], 'filters')
  if mark and tonumber(mark) == now - 1 then redis.call('HSET', KEYS[1], 'filters', now) end
  return now
end
"""
#: KEYS: ``ns meta``, the session's ledger set (or ``ns meta``), the set of its scope's ledger sessions (or ``ns
#: meta``), ``ns unembedded`` (``UNEMBEDDED``), then per scope its set key, its erasure marks' key and its record
#: keys. ARGV: the vectors' mode (``WITH_VECTORS``, ``NO_VECTORS`` or ``PENDING``), the write's kind (``ALL``;
#: ``NEW_ONLY``: leave out events the ledger holds; ``OVER``: write only over a record still there, keeping its
#: ``saved``: an update's; the keys found there are returned), the number of event ids to mark, the session id they
#: are of (added to the scope's ledger sessions with them), and those ids, then per scope its tag and record count,
#: then per record its event id, doc, terms, timestamp, session tag, filter tokens, expiry ('': none, the field is
#: removed) [and embedding]. Leaving out (or the check of ``OVER``) inside the script: no erase can slip between a
#: check and a write. A record stored exactly so (doc, terms, tokens, vector) is not written again (a second import
#: writes nothing), unless an erase of its scope is under way (a write after its start keeps it; ``OVER`` keeps the
#: old stamp, still covered). Each record written is stamped ``saved`` with the store's clock (``CLOCK``, moved once
#: a script; ``FILTERS_KEY`` with it when they were equal), and ``rid``, its key's ``record_tag``. With a vector it
#: leaves ``ns unembedded``; ``PENDING``: its old vector (of other words, maybe) dropped, it is listed there, scored
#: by that clock (``vectors``: embedded later), in the same step.
SAVE = (
    TICK
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('no such index: the store is not prepared') end
local function sadd(key, list, from, to)
  for i = from, to, 500 do redis.call('SADD', key, unpack(list, i, math.min(i + 499, to))) end
end
local vec, pend, new, marks = ARGV[1] == '1', ARGV[1] == '2', ARGV[2] == '1', tonumber(ARGV[3])
local over, written = ARGV[2] == '2', {}
local listed = vec and redis.call('EXISTS', KEYS[4]) == 1
local k, a, now = 5, 5 + marks, nil
while k <= #KEYS do
  local tag, count, kept = ARGV[a], tonumber(ARGV[a + 1]), {}
  local erasing = redis.call('EXISTS', KEYS[k + 1]) == 1
  a = a + 2
  for i = k + 2, k + 1 + count do
    local gone = over and redis.call('EXISTS', KEYS[i]) == 0
    if over and not gone then written[#written + 1] = KEYS[i] end
    if not gone and not (new and redis.call('SISMEMBER', KEYS[2], ARGV[a]) == 1) then
      local same = false
      if not erasing then
        local have = redis.call('HMGET', KEYS[i], 'doc', 'terms', 'ftags', 'embedding')
        same = have[1] == ARGV[a + 1] and have[2] == ARGV[a + 2] and have[3] == ARGV[a + 5]
          and (not vec or have[4] == ARGV[a + 7])
      end
      if not same then
        now = now or tick()
        local stamp = now
        if over then stamp = redis.call('HGET', KEYS[i], 'saved') or 0 end
        redis.call('HSET', KEYS[i], 'doc', ARGV[a + 1], 'terms', ARGV[a + 2], 'scope', tag, 'timestamp',
          ARGV[a + 3], 'session', ARGV[a + 4], 'ftags', ARGV[a + 5], 'saved', stamp, 'rid', redis.sha1hex(KEYS[i]))
        if ARGV[a + 6] == '' then redis.call('HDEL', KEYS[i], 'expires')
        else redis.call('HSET', KEYS[i], 'expires', ARGV[a + 6]) end
        if vec then
          redis.call('HSET', KEYS[i], 'embedding', ARGV[a + 7])
          if listed then redis.call('ZREM', KEYS[4], KEYS[i]) end
        elseif pend then
          redis.call('HDEL', KEYS[i], 'embedding'); redis.call('ZADD', KEYS[4], now, KEYS[i])
        end
        kept[#kept + 1] = KEYS[i]
      end
    end
    a = a + (vec and 8 or 7)
  end
  if #kept > 0 then sadd(KEYS[k], kept, 1, #kept) end
  k = k + count + 2
end
if marks > 0 then sadd(KEYS[2], ARGV, 5, 4 + marks); redis.call('SADD', KEYS[3], ARGV[4]) end
return written
"""
)
#: KEYS: a scope's set, then the record keys to erase (none: one SSCAN page of the set). ARGV: the SSCAN
#: cursor and page size, a session id ('': any), and the store's clock at an erase's start ('': none). Erases
#: those of the keys in the set (of that session, saved at or before that time) at once; returns {the next
#: cursor ('0': done), how many went}.
ERASE = """
local page, n, sid, before = {'0', {unpack(KEYS, 2)}}, 0, ARGV[3], tonumber(ARGV[4])
if #page[2] == 0 then page = redis.call('SSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2]) end
for _, key in ipairs(page[2]) do
  local have = redis.call('HMGET', key, 'doc', 'saved')
  local old = not before or not have[2] or tonumber(have[2]) <= before
  local ours = sid == '' or have[1] and cjson.decode(have[1]).session_id == sid
  if old and ours and redis.call('SREM', KEYS[1], key) == 1 then
    redis.call('DEL', key); n = n + 1
  end
end
return {page[1], n}
"""
#: KEYS: ``ns meta``, a scope's erasure marks (a hash: mark -> clock), ``ns erasing`` (the tags of scopes with
#: marks). ARGV: the scope's tag, then the marks. Moves the clock and writes every mark at it, at once (an
#: erase of many ids is several marks: all or none); returns the clock.
MARK = (
    TICK
    + """
local now = tick()
for i = 2, #ARGV do redis.call('HSET', KEYS[2], ARGV[i], now) end
redis.call('SADD', KEYS[3], ARGV[1])
return now
"""
)
#: KEYS: a scope's erasure marks, ``ns erasing``. ARGV: the mark, the scope's tag. Removes the mark.
UNMARK = """
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], ARGV[2]) end
"""


_QUERY_ESCAPE = re.compile(r"([^\w]|_)", re.UNICODE)


def escape(term: str) -> str:
    return term if term.isalnum() and term.isascii() else _QUERY_ESCAPE.sub(r"\\\1", term)


def hits(reply: list[Any], bm25: bool = False) -> list[tuple[MemoryRecord, float]]:
    """(record, score) of an FT.SEARCH reply: WITHSCORES (BM25), else with the KNN distance ``vscore``."""
    out, step = [], 3 if bm25 else 2
    for i in range(1, len(reply), step):
        d = dict(zip(*[iter(reply[i + step - 1])] * 2, strict=True))
        score = float(reply[i + 1]) if bm25 else 1 - float(d[b"vscore"])
        out.append((parse_record(d[b"doc"]), score))
    return out


def session_tag(session_id: str) -> str:
    """A record's ``session`` TAG: a digest (a session id may hold any character, a TAG separator too)."""
    return scope_key("session", session_id)


def record_tag(key: str) -> str:
    """A record's ``rid`` TAG: the SHA-1 of its key (``SAVE`` sets it with ``redis.sha1hex``)."""
    return hashlib.sha1(key.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


def visible(marks: dict[bytes, bytes], records: str) -> tuple[str, tuple[str, ...]]:
    """What a query ANDs to leave out what a scope's erasure marks cover (``marks``: ``HGETALL`` of its
    marks' key, each mark's ``Erasure.spec`` and clock; ``records``: the prefix of record keys), and the
    clause's PARAMS: a record is visible when it was saved after a mark's start, or is of another
    session than a session's erase, or not one of the ids of an erase of ids. The ids' tags are
    written into the clause (40 hex digits each: nothing of an id is query syntax), not sent as
    PARAMS: redis-py packs 10,000 arguments in ~20 ms a query. Kept for the marks last seen."""
    return _visible(tuple(sorted(marks.items())), records)


@functools.lru_cache(maxsize=64)
def _visible(marks: tuple[tuple[bytes, bytes], ...], records: str) -> tuple[str, tuple[str, ...]]:
    parts, params = [], []
    for i, (spec, before) in enumerate(marks):
        erasure = Erasure.of(spec.decode(), float(before))
        spared = [f"@saved:[({float(before)!r} +inf]"]
        if erasure.session_id is not None:
            spared.append(f"-@session:{{$e{i}}}")
            params += [f"e{i}", session_tag(erasure.session_id)]
        ids = marked_ids(erasure)
        if ids:
            spared.append(f"-@rid:{{{'|'.join(record_tag(records + rid) for rid in ids)}}}")
        parts.append(spared[0] if len(spared) == 1 else f"({' | '.join(reversed(spared))})")
    return " ".join(parts), tuple(params)


def marked_ids(erasure: Erasure) -> Sequence[str]:
    """The ids an erase of ids marks (``{"id": {"$in": ids}}``; none: it is not one). Its filter is
    only ever that: an erase by date or filter, or an expiry sweep, is an erase of the ids it read."""
    spec = dict(erasure.filter or {})
    ids = spec.pop("id", {}).get("$in", [])
    if spec:
        raise BackendError(f"an erasure mark's filter on {sorted(spec)} cannot be read here; upgrade longterm.")
    return list(ids)


def session_records(
    r: Any, index: str, scope_tag: str, session_ids: Sequence[str], hide: tuple[str, tuple[str, ...]] = ("", ())
) -> list[MemoryRecord]:
    """The records of ``session_ids`` in scope ``scope_tag``: one ``FT.SEARCH`` by their ``session``
    tags (every tag a parameter: nothing of an id is query syntax), a page of ``SESSION_PAGE`` at a
    time, one round trip for most; only records of those sessions (never trust a digest); ``hide``:
    a clause of ``visible``."""
    names = [f"q{i}" for i in range(len(session_ids))]
    query = f"@scope:{{$s}} @session:{{{' | '.join('$' + n for n in names)}}} {hide[0]}".rstrip()
    values = [v for n, sid in zip(names, session_ids, strict=True) for v in (n, session_tag(sid))]
    params = ("PARAMS", 2 + len(values) + len(hide[1]), "s", scope_tag, *values, *hide[1])
    found: list[MemoryRecord] = []
    while True:
        reply = r.execute_command("FT.SEARCH", index, query, *params, *SESSION_QUERY, len(found), SESSION_PAGE)
        page = [parse_record(dict(zip(*[iter(fields)] * 2, strict=True))[b"doc"]) for fields in reply[2::2]]
        found += page
        if len(page) < SESSION_PAGE:
            return [rec for rec in found if rec.session_id in session_ids]


#: The spans of time (seconds) a window read looks in, narrowest first: RediSearch walks every record
#: its query matches before it sorts, so a read of a 10,000-turn session's whole past cost ~1.5 ms;
#: within an hour it walks the turns of that hour. A read that finds fewer than it asks for looks again
#: in the next span (the last one: all of the session).
WINDOW_SPANS = (600.0, 86_400.0, float("inf"))


def window_query(scope_tag: str, ask: Ask, span: float, hide: tuple[str, tuple[str, ...]]) -> tuple[Any, ...]:
    """``FT.SEARCH``'s arguments after the index for one ``core.windows.Ask`` within ``span`` seconds
    of its time: the session's records at or before (at or after) it, nearest first, at most ``ask.limit``."""
    if span == float("inf"):
        far = "-inf" if ask.before else "+inf"
    else:
        far = repr(ask.at - span) if ask.before else repr(ask.at + span)
    low, high = (far, repr(ask.at)) if ask.before else (repr(ask.at), far)
    query = f"@scope:{{$s}} @session:{{$q}} @timestamp:[{low} {high}] {hide[0]}".rstrip()
    params = ("PARAMS", 4 + len(hide[1]), "s", scope_tag, "q", session_tag(ask.session_id), *hide[1])
    order = ("SORTBY", "timestamp", "DESC" if ask.before else "ASC", "RETURN", 1, "doc", "DIALECT", 2)
    return (query, *params, *order, "LIMIT", 0, ask.limit)


def docs(reply: list[Any]) -> list[MemoryRecord]:
    """The records of an ``FT.SEARCH`` reply without scores (``RETURN 1 doc``)."""
    return [parse_record(dict(zip(*[iter(fields)] * 2, strict=True))[b"doc"]) for fields in reply[2::2]]


#: One key segment: what an index name becomes in a key.
SEGMENT = r"A-Za-z0-9_.-"


def namespace(prefix: str, index: str) -> str:
    """The namespace every key of (``prefix``, ``index``) starts with.

    A one-segment prefix keeps the previous release's layout, ``prefix index:`` (``longterm:app:``);
    a prefix of several segments puts the index in braces, ``prefix {index}:`` (``myapp:memory:{app}:``).
    No prefix holds a brace and no key's tail after the namespace starts with one, so two stores'
    keys never equal each other, and a store's ``{index}`` keys fall under no other store's
    RediSearch ``PREFIX`` except a one-segment store's ``p:i:m:``, when the prefix starts with it
    (``p:`` index ``i`` against prefix ``p:i:m:``): their scope tags are salted with the namespace
    (``RedisBackend._tag``), so such an index holds their hashes but no query of it matches them.
    The braces are also a Redis Cluster hash tag: one store's keys hash to one slot, as a Lua
    script over several of them needs."""
    safe = safe_name(index, SEGMENT)
    return f"{prefix}{safe}:" if prefix.count(":") == 1 else f"{prefix}{{{safe}}}:"


def claim_index(r: Any, ns: str, index: str, where: str) -> bool:
    """Whether ``ns meta`` existed (the store was opened before), once the store is ``index``'s: its
    ``INDEX_KEY`` written where absent (a new store, or one of an earlier release), and a store naming
    another index refused (``index_names``). One round trip when it names ``index`` already; ``HSETNX``:
    of two processes making one store at once, one names it and the other reads that name."""
    meta = f"{ns}meta"
    with r.pipeline(transaction=False) as pipe:
        opened, held = pipe.exists(meta).hget(meta, INDEX_KEY).execute()
    if held is None and not r.hsetnx(meta, INDEX_KEY, index):
        held = r.hget(meta, INDEX_KEY)
    refuse_another("redis", f"{where} (keys {ns}*)", None if held is None else held.decode(), index)
    return bool(opened)
