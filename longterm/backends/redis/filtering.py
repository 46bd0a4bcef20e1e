"""The Redis engine's filters: a ``core.where`` tree as a RediSearch clause, and the tokens a record carries.

The seam: ``clause(node)`` is the tree's clause for ``FT.SEARCH`` (DIALECT 2), or True (no clause:
everything passes) or False (nothing passes: no query is made); ``joined(*clauses)`` ANDs clauses
into one query, ``unscored(c)`` is a clause that leaves a full-text query's score as it is; ``tags(record)``
is the value of a record's ``ftags`` field (``FILTER_FIELD``), ``core.where.record_tokens`` joined
by ``,``, and ``expiry(record)`` its ``expires`` (``EXPIRES_FIELD``, a ``Span`` over ``expires_at``),
which every write of a record stores. ``plan(where)`` is a read's clauses: the filter's own
(``rest``), the whole tree's (``full``, with ``alive(at)``), and ``at``; ``expired(at)`` is the
clause of what ``alive(at)`` leaves out, of the records whose writes are consistent (every write
sets ``ftags`` and ``expires`` together).

Why so: a filter goes into the same ``FT.SEARCH`` as the scope (the text query, the k-NN
pre-filter, a count, a page's ``INKEYS``), so the top k is cut after it. Every part is put in
parentheses (RediSearch's juxtaposition binds tighter than ``|``), a negation is ``-(...)`` only
ever next to the scope's clause (never a query that is only negative), ``EVERYTHING`` and
``NOTHING`` are folded away before any syntax is written, and nothing of a value enters the
query: a token is 20 hex characters, a time a float's ``repr``. A read at a moment is split
(``plan``) so that it can be asked without its ``alive`` part, a negation RediSearch walks over
every record of the scope, and pay for that part only where something has expired (``reads``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...core.where import EVERYTHING, EXPIRES, And, Has, Node, Or, Span, Where, record_tokens
from ...records import MemoryRecord

#: Each record's filter tokens (``core.where``): one TAG, the tokens separated by a character no token holds.
FILTER_FIELD = ("ftags", "TAG", "SEPARATOR", ",")
_TOKEN = re.compile(r"[0-9a-f]+")
#: Each record's ``expires_at`` (absent when it never expires): what ``alive`` reads.
EXPIRES_FIELD = ("expires", "NUMERIC")
#: The NUMERIC field a ``Span`` reads, by the record field it names.
SPAN_FIELDS = {"timestamp": "timestamp", "expires_at": EXPIRES_FIELD[0]}

#: A clause, or True (everything passes: no clause) or False (nothing passes).
Clause = str | bool


def tags(record: MemoryRecord) -> str:
    """The ``ftags`` value of ``record``: its tokens, ``,``-separated (never empty: its fields have some)."""
    return ",".join(record_tokens(record))


def expiry(record: MemoryRecord) -> str:
    """The ``expires`` value of ``record`` ("": none, the field is removed)."""
    return "" if record.expires_at is None else repr(float(record.expires_at))


def _bound(v: float | None, incl: bool, open_end: str) -> str:
    if v is None:
        return open_end
    return ("" if incl else "(") + repr(float(v))


def clause(node: Node) -> Clause:
    """``node`` as a RediSearch clause over ``ftags``, ``timestamp`` and ``expires`` (``holds`` is what it answers)."""
    if isinstance(node, Has):
        for t in node.tokens:
            if not _TOKEN.fullmatch(t):
                raise ValueError(f"not a filter token: {t!r}")
        return f"@ftags:{{{'|'.join(node.tokens)}}}" if node.tokens else False
    if isinstance(node, Span):
        lo, hi = _bound(node.lo, node.lo_incl, "-inf"), _bound(node.hi, node.hi_incl, "+inf")
        return f"@{SPAN_FIELDS[node.field]}:[{lo} {hi}]"
    if isinstance(node, And):
        parts = [clause(p) for p in node.parts]
        if False in parts:
            return False
        kept = [p for p in parts if isinstance(p, str)]
        return joined(*kept) if kept else True
    if isinstance(node, Or):
        parts = [clause(p) for p in node.parts]
        if True in parts:
            return True
        kept = [p for p in parts if isinstance(p, str)]
        return "|".join(f"({p})" for p in kept) if kept else False
    inner = clause(node.part)
    return (not inner) if isinstance(inner, bool) else f"-({inner})"


def unscored(c: str) -> str:
    """Clause ``c`` for a full-text query (a union of ``(@scope:{$s} word)`` clauses) passing the
    same records of the scope but adding nothing to their score: a tag in it is a term BM25 would
    count (changing the ranking by what a record carries), a negation's records carry no term, and
    the query attribute ``$weight: 0`` is not kept by a one-value tag. So "not (in the scope and not
    ``c``)", one negation: ANDed with such a union, the double negation ``-(-(c))`` found 1 of 30
    matches on RediSearch 2.10 where every match passed ``c``."""
    return f"-(@scope:{{$s}} -({c}))" if c else ""


def joined(*clauses: str) -> str:
    """``clauses`` (those not empty) ANDed, each in parentheses."""
    return " ".join(f"({c})" for c in clauses if c)


def expired(at: float) -> str:
    """The clause of the records ``alive(at)`` leaves out: they expire, at or before ``at``."""
    return f"@ftags:{{{EXPIRES}}} @{EXPIRES_FIELD[0]}:[-inf {float(at)!r}]"


@dataclass(frozen=True)
class Plan:
    """A read's clauses ("": everything passes)."""

    rest: str
    """The filter's, without ``alive(at)``."""
    full: str
    """The whole tree's (``rest`` when there is no ``at``)."""
    at: float | None
    """The moment of the ``alive`` part split off (None: none was)."""


def plan(where: Where | None) -> Plan | None:
    """``where``'s clauses, ``alive(where.alive_at)`` split off when it is a part of the top
    (``core.where.living`` puts it there; elsewhere it stays in ``rest``); None when nothing passes."""
    full = _text(True if where is None else clause(where.native))
    if full is None:
        return None
    if where is None or where.alive_at is None or where.narrowing is None:
        return Plan(full, full, None)
    rest = _text(clause(And(() if where.narrowing == EVERYTHING else (where.narrowing,))))
    return None if rest is None else Plan(rest, full, where.alive_at)


def _text(c: Clause) -> str | None:
    return "" if c is True else None if c is False else c
