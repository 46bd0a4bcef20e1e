"""Choosing among a scope's records: a page by time, and what a ledger read leaves to save.

The seam: ``page_by_time(page, scope, cursor, size, newest_first)`` gives a page by time of
an engine without an index on time (it reads the scope with its ``_page`` primitive, then
``sorted_page``); ``unsaved(records, vectors, done)`` keeps the records (and their vectors)
whose event a ledger read did not list. Both pure, for the engine core and the facade.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..records import MemoryRecord, Scope

if TYPE_CHECKING:
    import numpy as np

#: A position in a scope, of the engine's own making (``_page``'s), JSON-able where ``_page_by_time``
#: gives it: opaque to the core, so no narrower type than the engine's own can be written here.
Cursor = Any
#: A page of records and the cursor of the next one (None: the last).
Page = tuple[list[MemoryRecord], Cursor]


def page_by_time(
    page: Callable[[Scope, Cursor, int], Page], scope: Scope, cursor: Cursor, size: int, newest_first: bool
) -> Page:
    """One page of ``scope`` by time after ``cursor``: the whole scope read with ``page``, sorted."""
    records: list[MemoryRecord] = []
    at: Cursor = None
    while True:
        more, at = page(scope, at, 1000)
        records.extend(more)
        if at is None:
            return sorted_page(records, cursor, size, newest_first)


def sorted_page(records: list[MemoryRecord], at: Cursor, size: int, newest_first: bool) -> Page:
    """A page by time of ``records`` (all of a scope) after position ``at`` ((time, id); None: the
    start), and the next position."""
    records = sorted(records, key=lambda r: (r.timestamp, r.id), reverse=newest_first)
    if at is not None:
        key = (float(at[0]), str(at[1]))
        records = [r for r in records if ((r.timestamp, r.id) < key if newest_first else (r.timestamp, r.id) > key)]
    page = records[:size]
    return page, ([page[-1].timestamp, page[-1].id] if len(records) > size else None)


def unsaved(
    records: Sequence[MemoryRecord], vectors: np.ndarray | None, done: set[str]
) -> tuple[Sequence[MemoryRecord], np.ndarray | None]:
    """``records`` (and their rows of ``vectors``) whose event is not in ``done``, a ledger read."""
    keep = [i for i, r in enumerate(records) if r.event_id not in done]
    if len(keep) == len(records):
        return records, vectors
    return [records[i] for i in keep], None if vectors is None else vectors[keep]
