"""The Redis engine's filter tokens kept right: a store written before them brought up to date once,
and records an older process wrote since put right before a filtered read.

The seam: ``RedisBackend._open`` calls ``redis_tokens(client, ns, index, empty=...)``: unless
``ns meta`` holds ``FILTERS_KEY``, the index gets ``FILTER_FIELD`` (``FT.ALTER``) and every record
its tokens (``filtering.tags``), then ``FILTERS_KEY`` is set to the store's clock as read before
(a store just made only notes it). ``FILTERS_KEY`` is the clock up to which every record written
carries its tokens: ``SAVE`` and ``MARK`` move it with the clock while they are equal. A filtered
read reads both in its pipeline (``stale``); when they differ, a process that writes no tokens
saved since, and ``refresh`` tags the records saved after it (found by ``saved`` in the index),
then moves it. Each tag is set only on the record whose ``doc`` it was read from (its digest is
compared in the script), so a write in between is never given another record's tokens; it is
saved later than the clock read, so the next read puts it right. Safe with several processes
doing the same at once: the tokens of a doc are always the same, and the mark only grows.

Why: a record without its tokens would be left out by an equality and passed by a negation, and
one saved by an older process keeps tokens of its previous ``doc``; a store's clock moves with
every save (``scripts.SAVE``), so a difference of two numbers says there may be some. Records
written by a release older than the clock (0.1) are tagged when the store is first opened.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ...records import parse_record
from .filtering import FILTER_FIELD, tags
from .scripts import CLOCK, FILTERS_KEY, SCRIPT_BATCH
from .upgrade import add_field, records_of

if TYPE_CHECKING:
    from redis import Redis

#: KEYS: record keys. ARGV: per key the SHA-1 of the ``doc`` its tokens are of, then the tokens.
#: Sets them on the records whose ``doc`` is still that one.
REDIS_TAG = """
for i, k in ipairs(KEYS) do
  local doc = redis.call('HGET', k, 'doc')
  if doc and redis.sha1hex(doc) == ARGV[2 * i - 1] then redis.call('HSET', k, 'ftags', ARGV[2 * i]) end
end
"""
#: KEYS: ``ns meta``. ARGV: a clock. Moves ``FILTERS_KEY`` up to it (never down).
REDIS_RAISE = """
local w = redis.call('HGET', KEYS[1], ARGV[1])
if not w or tonumber(w) < tonumber(ARGV[2]) then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
"""


def redis_tokens(r: Redis, ns: str, index: str, *, empty: bool) -> None:
    """Every record of ``ns`` given its tokens and the index told of ``FILTER_FIELD``, unless ``ns meta``
    says it was done; with ``empty`` (a store just made) only noted."""
    meta = f"{ns}meta"
    if r.hget(meta, FILTERS_KEY) is not None:
        return
    clock = int(r.hget(meta, CLOCK) or 0)  # before reading any record: what is saved later is > clock
    if not empty:
        add_field(r, index, FILTER_FIELD)
        tag = r.register_script(REDIS_TAG)
        for keys, docs in records_of(r, ns):
            _tag(tag, list(zip(keys, docs, strict=True)))
    r.register_script(REDIS_RAISE)(keys=[meta], args=[FILTERS_KEY, clock])


def stale(reply: Sequence[bytes | None]) -> bool:
    """Whether records may lack their tokens, from ``HMGET ns meta CLOCK FILTERS_KEY``."""
    clock, mark = reply
    return mark is None or int(clock or 0) != int(mark)


def refresh(r: Redis, ns: str, index: str) -> None:
    """The records saved after ``FILTERS_KEY`` given their tokens, then ``FILTERS_KEY`` moved to the clock."""
    meta = f"{ns}meta"
    clock, mark = r.hmget(meta, [CLOCK, FILTERS_KEY])
    if mark is None:  # the note is gone (``ns meta`` emptied): the whole store
        redis_tokens(r, ns, index, empty=False)
        return
    now = int(clock or 0)
    tag = r.register_script(REDIS_TAG)
    for rows in _saved_since(r, index, int(mark), now):
        _tag(tag, rows)
    r.register_script(REDIS_RAISE)(keys=[meta], args=[FILTERS_KEY, now])


def _tag(script: Any, rows: Sequence[tuple[bytes, bytes | None]]) -> None:
    """``REDIS_TAG`` over (key, doc) ``rows`` (those with a doc)."""
    keys: list[bytes] = []
    args: list[str] = []
    for key, doc in rows:
        if doc is not None:
            keys.append(key)
            args += (hashlib.sha1(doc).hexdigest(), tags(parse_record(doc)))
    if keys:
        script(keys=keys, args=args)


def _saved_since(r: Redis, index: str, after: int, upto: int) -> Iterator[list[tuple[bytes, bytes | None]]]:
    """(key, doc) of the records saved after ``after`` and at or before ``upto``, a page at a time, in
    ``saved`` order. A save stamps at most ``SCRIPT_BATCH`` records with one value, so a page of twice
    that holds a smaller value than its last: the next page starts after it (rows of the last value
    come again; tagging twice is harmless), and a record saved again meanwhile leaves the range."""
    size = 2 * SCRIPT_BATCH
    while after < upto:
        reply = r.execute_command(
            "FT.SEARCH", index, f"@saved:[({after} {upto}]", "SORTBY", "saved", "ASC",
            "RETURN", 2, "doc", "saved", "DIALECT", 2, "LIMIT", 0, size,
        )  # fmt: skip
        rows, marks = [], []
        for key, fields in zip(reply[1::2], reply[2::2], strict=True):
            d = dict(zip(*[iter(fields)] * 2, strict=True))
            rows.append((key, d.get(b"doc")))
            marks.append(int(float(d.get(b"saved", 0))))
        yield rows
        if len(rows) < size:
            return
        below = [m for m in marks if m < marks[-1]]
        if below:
            after = max(below)
        else:  # one value fills the page (not written by ``SAVE``): read it whole
            size *= 2
