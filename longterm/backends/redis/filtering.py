"""The Redis engine's filters: a ``core.where`` tree as a RediSearch clause, and the tokens a record carries.

The seam: ``clause(node)`` is the tree's clause for ``FT.SEARCH`` (DIALECT 2), or True (no clause:
everything passes) or False (nothing passes: no query is made); ``joined(*clauses)`` ANDs clauses
into one query, ``unscored(c)`` is a clause that leaves a full-text score as it is; ``tags(record)``
is the value of a record's ``ftags`` field (``FILTER_FIELD``), ``core.where.record_tokens`` joined
by ``,``, which every write of a record stores.

Why so: a filter goes into the same ``FT.SEARCH`` as the scope (the text query, the k-NN
pre-filter, a count, a page's ``INKEYS``), so the top k is cut after it. Every part is put in
parentheses (RediSearch's juxtaposition binds tighter than ``|``), a negation is ``-(...)`` only
ever next to the scope's clause (never a query that is only negative), ``EVERYTHING`` and
``NOTHING`` are folded away before any syntax is written, and nothing of a value enters the
query: a token is 20 hex characters, a time a float's ``repr``.
"""

from __future__ import annotations

import re

from ...core.where import And, Has, Node, Or, Span, record_tokens
from ...records import MemoryRecord

#: Each record's filter tokens (``core.where``): one TAG, the tokens separated by a character no token holds.
FILTER_FIELD = ("ftags", "TAG", "SEPARATOR", ",")
_TOKEN = re.compile(r"[0-9a-f]+")

#: A clause, or True (everything passes: no clause) or False (nothing passes).
Clause = str | bool


def tags(record: MemoryRecord) -> str:
    """The ``ftags`` value of ``record``: its tokens, ``,``-separated (never empty: its fields have some)."""
    return ",".join(record_tokens(record))


def _bound(v: float | None, incl: bool, open_end: str) -> str:
    if v is None:
        return open_end
    return ("" if incl else "(") + repr(float(v))


def clause(node: Node) -> Clause:
    """``node`` as a RediSearch clause over ``ftags`` and ``timestamp`` (``holds`` is what it answers)."""
    if isinstance(node, Has):
        for t in node.tokens:
            if not _TOKEN.fullmatch(t):
                raise ValueError(f"not a filter token: {t!r}")
        return f"@ftags:{{{'|'.join(node.tokens)}}}" if node.tokens else False
    if isinstance(node, Span):
        lo, hi = _bound(node.lo, node.lo_incl, "-inf"), _bound(node.hi, node.hi_incl, "+inf")
        return f"@timestamp:[{lo} {hi}]"
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
    """Clause ``c`` passing the same records but adding nothing to a full-text score: a tag in it
    is a term BM25 would count (changing the ranking by what a record carries), a negation's
    records carry no term, and the query attribute ``$weight: 0`` is not kept by a one-value tag."""
    return f"-(-({c}))" if c else ""


def joined(*clauses: str) -> str:
    """``clauses`` (those not empty) ANDed, each in parentheses."""
    return " ".join(f"({c})" for c in clauses if c)
