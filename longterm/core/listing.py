"""A store's listings, filtered or not: ``count``, ``scan`` and ``page_by_time`` over an engine's primitives.

The seam: ``Listing``, a base of ``Engine`` (as ``core.neighbours.SessionReads`` is), turning
``_count``, ``_page`` and ``_page_by_time`` into the async contract (and the primitives ``_scopes``
and ``_indices`` into ``scopes`` and ``indices``, what ``stats`` and ``migrate`` list), each with ``where=``
(``core.where``): the engine applies the filter's ``native`` tree in its own query, and where
that is not the whole filter (a range over metadata) and the engine does not apply the whole
filter itself (``filters_exact``), each record is checked here; a count then reads the records.

Why apart from ``Engine``: one job (what a listing promises), and the engine core stays a size
one can read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from ..records import MemoryRecord, Scope
from .capabilities import capabilities
from .selection import Cursor, Page
from .where import Where, given, living, takes, takes_where

T = TypeVar("T")


class Listing:
    """``count``, ``scan``, ``page_by_time``, ``scopes`` and ``indices`` (see the module docstring)."""

    if TYPE_CHECKING:  # ``Engine``'s, which this is a base of

        async def _read(self, what: str, fn: Callable[..., T], *args: object) -> T: ...

        def _count(self, scope: Scope, where: Where | None = None) -> int: ...

        def _page(self, scope: Scope, cursor: Cursor, size: int, where: Where | None = None) -> Page: ...

        def _page_by_time(
            self, scope: Scope, cursor: Cursor, size: int, newest_first: bool, where: Where | None = None
        ) -> Page: ...

    def _checks(self, where: Where | None, primitive: Callable[..., object] | None = None) -> bool:
        """Whether what ``primitive`` (default ``_page``) returns for ``where`` needs a second look
        here: it takes no filter (an engine written before filters), or applies only part of it."""
        if where is None:
            return False
        if not takes_where(self._page if primitive is None else primitive):
            return True
        return not (where.exact or capabilities(self).filters_exact)

    async def count(self, scope: Scope, *, where: Where | None = None) -> int:
        """How many records of ``scope`` (that pass ``where``)."""
        if self._checks(where, self._count):
            return sum([1 async for _ in self.scan(scope, where=where)])
        return await self._read("counting memories", partial(self._count, scope, **given(where, self._count)))

    async def scan(
        self, scope: Scope, batch_size: int = 500, *, where: Where | None = None
    ) -> AsyncIterator[MemoryRecord]:
        """Every record of ``scope`` (that passes ``where``), each exactly once."""
        cursor: Cursor = None
        while True:
            page = partial(self._page, scope, cursor, batch_size, **given(where, self._page))
            records, cursor = await self._read("reading memories", page)
            for rec in records:
                if where is None or not self._checks(where) or where.admits(rec):
                    yield rec
            if cursor is None:
                return

    async def page_by_time(
        self,
        scope: Scope,
        cursor: Cursor = None,
        size: int = 100,
        *,
        newest_first: bool = True,
        where: Where | None = None,
    ) -> Page:
        """One page of ``scope`` by time and the next page's cursor (``_page_by_time``); with ``where``,
        of the records that pass it (a page may then be short; the cursor says whether more follow)."""
        page = partial(self._page_by_time, scope, cursor, size, newest_first, **given(where, self._page_by_time))
        records, after = await self._read("reading memories", page)
        if where is not None and (self._checks(where, self._page_by_time) or self._checks(where)):
            records = [r for r in records if where.admits(r)]
        return records, after

    def _scopes(self, at: float | None = None) -> list[tuple[str, str, int]]:
        """(app, user, count) of every scope of this index holding a record (``stats``, ``migrate``);
        ``at``: of the records alive then (not expired by it), a scope holding none left out."""
        raise NotImplementedError

    def _indices(self) -> list[str]:
        """The ``index`` names (as callers pass them) of this store's indices holding records."""
        raise NotImplementedError

    async def scopes(self, at: float | None = None) -> list[tuple[str, str, int]]:
        """(app, user, count) of every scope of this index with records (``_scopes``); ``at``: counting
        those alive then only. An engine whose ``_scopes`` takes no ``at`` (written before expiry) has
        each scope counted again here, through ``count``."""
        if at is None:
            return await self._read("listing users", self._scopes)
        if takes(self._scopes, "at"):
            found = await self._read("listing users", partial(self._scopes, at=at))
            return [(a, u, n) for a, u, n in found if n]
        alive = living(None, at)
        counted = [(a, u, await self.count(Scope.stored(a, u), where=alive)) for a, u, _ in await self.scopes()]
        return [(a, u, n) for a, u, n in counted if n]

    async def indices(self) -> list[str]:
        """The index names of this store that hold records (``_indices``)."""
        return await self._read("listing indices", self._indices)
