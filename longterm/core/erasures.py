"""Erasing a scope or a session in several steps, safely: the intent first, then the deletes.

The seam: an engine whose erase of a user (or of one session) is not one step declares
``marks_erasures`` and implements four primitives; ``MarkedErases`` runs them, once for every such
engine:

- ``_erasure_begin(erasure)``: write the erasure's mark (a tombstone) in the store, stamped
  with the store's clock (``Erasure.before``: a time, or a counter that only grows), and
  return it stamped. From then on every read of the engine (search, neighbours, pages, counts)
  leaves out what the mark covers: a record the erasure matches that was saved before its start;
- ``_erasure_covered(erasure)``: delete those records (in batches, any number of calls); how many;
- ``_erasure_end(erasure)``: remove the mark;
- ``_erasures_pending()``: every mark of the store, for a crashed erase to be finished.

``MarkedErases.erase(scope, session_id)`` finishes the store's pending marks (an erase killed
part-way), then marks, deletes and unmarks its own. ``MarkedErases.finish()`` is also run when the
store is opened. An ``Erasure`` is a predicate over a record: its scope, optionally one session,
optionally a filter (``match``: the record's fields by equality or ``$in``, ``timestamp`` by
``$lt``, ``$lte``, ``$gt``, ``$gte``), saved at or before the store's clock said ``before``; an erase by
date or filter and an expiry sweep are erasures with a filter, run the same way.

Why: Redis erases a user 500 records a script call; killed between two calls it left a user
half erased and still searchable (9,494 of 20,000). With the mark written first, no search
returns what an erase covers from the moment it was asked for, and the next erase or open
completes it. A save after the erase started is newer than its mark, so it stays visible and
is never deleted by it, even while an earlier erase is finished. Engines that erase in one step
(a transaction: local; a delete by filter: Qdrant) need none of this.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from ..records import MemoryRecord, Scope
from .runner import Hook

#: A filter's comparisons on ``timestamp`` (the only field compared by order).
ORDER: Mapping[str, Callable[[float, float], bool]] = {
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
}


def match(record: MemoryRecord, spec: Mapping[str, Any]) -> bool:
    """Whether ``record`` meets ``spec``: each key a field of the record (or ``metadata.<key>``),
    each value the field's value, ``{"$in": values}``, or for ``timestamp`` a mapping of ``ORDER``'s
    operators."""
    for key, want in spec.items():
        if key.startswith("metadata."):
            have = record.metadata.get(key.removeprefix("metadata."))
        else:
            have = getattr(record, key)
        if isinstance(want, Mapping) and set(want) == {"$in"}:
            if have not in want["$in"]:
                return False
        elif isinstance(want, Mapping):
            if not isinstance(have, (int, float)) or not all(
                ORDER[op](float(have), float(v)) for op, v in want.items()
            ):
                return False
        elif have != want:
            return False
    return True


@dataclass(frozen=True)
class Erasure:
    """One erase's mark: what it covers (a scope, one of its sessions or all, a filter or none)
    and the store's clock at its start (``before``; None until ``_erasure_begin`` stamps it)."""

    app_name: str
    user_id: str
    session_id: str | None = None
    filter: Mapping[str, Any] | None = None
    before: float | None = None
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    """Tells two erases of the same scope apart (each ends its own mark)."""

    @property
    def scope(self) -> Scope:
        """The scope as marked: a scope of an older store, not in NFC, is not its NFC twin."""
        return Scope.stored(self.app_name, self.user_id)

    def stamped(self, before: float) -> Erasure:
        return replace(self, before=before)

    def matches(self, record: MemoryRecord) -> bool:
        """Whether the erase is about ``record``, whenever it was saved."""
        if (record.app_name, record.user_id) != (self.app_name, self.user_id):
            return False
        if self.session_id is not None and record.session_id != self.session_id:
            return False
        return self.filter is None or match(record, self.filter)

    def covers(self, record: MemoryRecord, saved: float | None) -> bool:
        """Whether the erase hides and deletes ``record`` saved at ``saved`` (the store's clock;
        None: unknown, written before the store kept it, so older than any erase)."""
        if not self.matches(record):
            return False
        return saved is None or self.before is None or saved <= self.before

    def spec(self) -> str:
        """What the mark holds besides its stamp, as JSON (an engine's field or key)."""
        return json.dumps(
            {
                "app": self.app_name,
                "user": self.user_id,
                "session": self.session_id,
                "filter": self.filter,
                "key": self.key,
            },
            sort_keys=True,
        )

    @classmethod
    def of(cls, spec: str, before: float) -> Erasure:
        """The erasure ``spec()`` wrote, stamped ``before``."""
        d = json.loads(spec)
        return cls(d["app"], d["user"], d.get("session"), d.get("filter"), float(before), d["key"])


#: Whether a mark covers a record saved at a stamp (``Erasure.covers``' signature).
Covers = Callable[[MemoryRecord, "float | None"], bool]


def covering(erasure: Erasure) -> Covers:
    """``erasure.covers``, with a filter's ``{"id": {"$in": ids}}`` (an erase of ids) tested as a set:
    a read of a page against a mark of thousands of ids."""
    spec = dict(erasure.filter or {})
    ids = spec.pop("id", None)
    if not isinstance(ids, Mapping):
        return erasure.covers
    wanted, rest = frozenset(ids["$in"]), replace(erasure, filter=spec or None)
    return lambda record, saved: record.id in wanted and rest.covers(record, saved)


def hider(marks: Sequence[Erasure]) -> Covers:
    """Whether any of ``marks`` covers a record and its stamp."""
    tests: dict[tuple[str, str], list[Covers]] = {}
    for m in marks:
        tests.setdefault((m.app_name, m.user_id), []).append(covering(m))
    return lambda record, saved: any(t(record, saved) for t in tests.get((record.app_name, record.user_id), ()))


class Marks(NamedTuple):
    """The engine's erasure primitives (bound methods; see the module docstring)."""

    begin: Callable[[Erasure], Erasure]
    covered: Callable[[Erasure], int]
    end: Callable[[Erasure], None]
    pending: Callable[[], list[Erasure]]


class MarkedErases:
    """An engine's erases of a scope or session in steps (see the module docstring); blocking,
    run on the engine's worker."""

    def __init__(self, marks: Marks) -> None:
        self._begin, self._covered = Hook(marks.begin), Hook(marks.covered)
        self._end, self._pending = Hook(marks.end), Hook(marks.pending)

    def erase(self, scope: Scope, session_id: str | None, spec: Mapping[str, Any] | None = None) -> int:
        """Erase ``scope``'s records (of ``session_id``; meeting ``spec``) saved before now; how many."""
        self.finish()
        mark = self._begin(Erasure(scope.app_name, scope.user_id, session_id, spec))
        n = self._covered(mark)
        self._end(mark)
        return n

    def finish(self) -> int:
        """Complete every erase the store holds a mark of (one killed part-way); how many records went."""
        n = 0
        for mark in self._pending():
            n += self._covered(mark)
            self._end(mark)
        return n


class ErasureMarks:
    """The erasure primitives' defaults, a base of ``core.engine.Engine``: an engine that declares
    ``marks_erasures`` implements all four."""

    def _erasure_begin(self, erasure: Erasure) -> Erasure:
        """Write ``erasure``'s mark, stamped with the store's clock; the stamped erasure. From now on
        no read returns what it covers."""
        raise NotImplementedError(f"{type(self).__name__} declares marks_erasures: it implements _erasure_begin")

    def _erasure_covered(self, erasure: Erasure) -> int:
        """Delete the records ``erasure`` covers (``Erasure.covers``); how many went."""
        raise NotImplementedError(f"{type(self).__name__} declares marks_erasures: it implements _erasure_covered")

    def _erasure_end(self, erasure: Erasure) -> None:
        """Remove ``erasure``'s mark (its deletes are done)."""
        raise NotImplementedError(f"{type(self).__name__} declares marks_erasures: it implements _erasure_end")

    def _erasures_pending(self) -> list[Erasure]:
        """Every erasure mark the store holds (an erase still running, or killed part-way)."""
        return []

    def _erasing(self) -> MarkedErases:
        return MarkedErases(
            Marks(self._erasure_begin, self._erasure_covered, self._erasure_end, self._erasures_pending)
        )
