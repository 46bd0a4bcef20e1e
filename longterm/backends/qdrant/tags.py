"""A filter's tree as a Qdrant payload condition, on both Qdrant engines (and mem0's Qdrant store).

The seam: ``TAGS`` is the payload key holding a record's filter tokens (``core.where.record_tokens``),
keyword-indexed where the engine indexes payloads; ``condition(lib, node, range_type)`` spells a
``core.where`` tree with a client's models (``qdrant_client.models`` or ``qdrant_edge``, which
name filters alike but for the range: ``range_type``): ``Has`` is a ``MatchAny`` on ``TAGS``,
``Span`` a range on ``timestamp`` or, for ``expires_at``, on ``EXPIRY`` (a point without the key is
in no range), ``And``/``Or``/``Neg`` a nested ``Filter``'s ``must``/``should``/``must_not``. A tree
that passes everything or nothing is answered as True or False instead, and so are its parts: the
caller sends no condition for True and asks nothing for False. ``MARKER`` is the meta key saying a
store's old points have their tokens. ``alive_moment(node)`` finds ``core.where.alive(now)`` in a
tree, ``unexpiring(where)`` is a ``where``'s tree without it (for a store holding no expiring record).

Why the constants are settled here and not sent: Qdrant reads an empty ``should`` as no constraint
(it would pass everything where the tree passes nothing) and an empty ``must`` as everything, so
no empty list ever reaches a ``Filter``. The condition goes into the same filter as the scope's,
inside the query: Qdrant applies it before the k-NN's, the full-text query's or a scroll's cut.

Why ``alive(now)`` is sent as one condition, "not ``EXPIRY`` <= now": a point carries ``EXPIRY``
exactly when it carries the ``EXPIRES`` token (both written from the record, the payload replaced
whole), so "no ``EXPIRES`` token, or ``EXPIRY`` > now" and "no ``EXPIRY`` at or before now" pass
the same points, and the one range costs less: a quarter to a third less time added to a read in
qdrant-client's local mode, which checks each point in Python (3,000 points, a tenth expiring), some
10% on qdrant-edge, where the range is indexed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.where import Has, Neg, Node, Or, Span, Where, alive

#: The payload key holding a record's filter tokens (one keyword each).
TAGS = "ftags"
#: The payload key of a record's time (a float, range-indexed where the engine indexes payloads).
TIME = "timestamp"
#: The payload key of a record's ``expires_at`` (a float, range-indexed where the engine indexes
#: payloads), written only when it expires: its ``EXPIRES`` token and this key come and go together.
EXPIRY = "expires_at"
#: The meta key set once a store's points all carry ``TAGS`` (the upgrade of an older store ran).
MARKER = "filter_tags"
#: The meta key set before a store's first record that expires is written (``unexpiring``).
EXPIRING = "expiring"


def alive_moment(node: Node) -> float | None:
    """The ``now`` of ``node`` when it is ``core.where.alive(now)``; None otherwise."""
    if not (isinstance(node, Or) and len(node.parts) == 2):
        return None
    span = node.parts[1]
    if not (isinstance(span, Span) and span.field == "expires_at" and span.lo is not None):
        return None
    return span.lo if node == alive(span.lo) else None


def expired(payload: Mapping[str, Any], at: float | None) -> bool:
    """Whether the point of ``payload`` expired by ``at`` (None: never asked)."""
    moment = payload.get(EXPIRY)
    return at is not None and isinstance(moment, (int, float)) and moment <= at


def unexpiring(where: Where) -> Node:
    """``where``'s tree less its ``alive(where.alive_at)`` part: what it passes of a store where no
    record expires (``Where.unexpired``: the tree whole when ``core.where.living`` did not make it)."""
    return where.unexpired


def condition(lib: Any, node: Node, range_type: str = "Range", time_key: str = TIME) -> Any:
    """``node`` as a condition of ``lib``'s models, or True (passes everything) or False (nothing).
    ``range_type``: the name of ``lib``'s float range class; ``time_key``: the payload's time (a
    ``Span`` of ``expires_at`` is on ``EXPIRY``; ``alive(now)``: see the module docstring)."""
    now = alive_moment(node)
    if now is not None:
        expired = lib.FieldCondition(key=EXPIRY, range=getattr(lib, range_type)(lte=now))
        return lib.Filter(must_not=[expired])
    if isinstance(node, Has):
        if not node.tokens:
            return False
        return lib.FieldCondition(key=TAGS, match=lib.MatchAny(any=list(node.tokens)))
    if isinstance(node, Span):
        bounds: dict[str, float] = {}
        if node.lo is not None:
            bounds["gte" if node.lo_incl else "gt"] = node.lo
        if node.hi is not None:
            bounds["lte" if node.hi_incl else "lt"] = node.hi
        if not bounds:
            return True
        key = time_key if node.field == "timestamp" else EXPIRY
        return lib.FieldCondition(key=key, range=getattr(lib, range_type)(**bounds))
    if isinstance(node, Neg):
        part = condition(lib, node.part, range_type, time_key)
        return (not part) if isinstance(part, bool) else lib.Filter(must_not=[part])
    parts = [condition(lib, p, range_type, time_key) for p in node.parts]
    decisive = isinstance(node, Or)  # a True part decides an Or, a False one an And
    if any(p is decisive for p in parts):
        return decisive
    kept = [p for p in parts if not isinstance(p, bool)]
    if not kept:
        return not decisive
    if len(kept) == 1:
        return kept[0]
    return lib.Filter(should=kept) if decisive else lib.Filter(must=kept)


__all__ = ["EXPIRING", "EXPIRY", "MARKER", "TAGS", "TIME", "alive_moment", "condition", "expired", "unexpiring"]
