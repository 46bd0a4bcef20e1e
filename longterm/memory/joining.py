"""Joining a store written before "one name, one thing", once: each user in one index, ids in NFC.

The seam: ``await join(router)``, which ``Router.ready`` runs once per memory not told its index,
before that memory's first routed call or listing; ``await stamp(router)``, which a memory told
its index runs before its first save, marks a new index of a new or joined store at once.
When the memory's own index holds the marker (``MARKER`` in its meta: one read), ``join``
returns at once. Otherwise, unless another index of the
store holds the marker (the store was joined before; this index is newer), it lists the store's
indices and each one's users, and moves (``memory.moving``) every (app, user) held in more than
one index, or under ids that are not NFC, into the index ``routing.RULE`` picks (the app's own
index if it holds the user, else this memory's own, else the first other holding it, by name)
under the NFC ids, merging with what is there; then it re-keys, in place, the user's sessions whose
ids are not NFC. Last, the marker goes into the meta of every index it looked at. What was moved
is logged once (counts, never an id).

Why every index gets the marker, and why another index's marker stops the pass: a memory's own
index depends on how it was opened (``LongTermMemory(app_name="travel")``'s is ``travel``), so a
marker in one index only would run the pass again for each; and an index made after the pass
(a new app's) must not start it again, where it could join a user that an application split on
purpose since. Such an index is not marked then: finding the marker elsewhere is reads only, so a
memory's first search never waits for another process's write lock to mark its own index.
Why the order: every move is crash-safe by its own order (``memory.moving``), and
the marker comes after all of them, so a pass killed anywhere runs again at the next open and
ends in the same state.

Why at first use and not in the constructor: a memory opens its engines on first use, on whatever
loop calls it; the join runs there, and every other call waits for it (``Router.ready``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..core.errors import guard
from ..core.ledger import store_ledger
from ..errors import BackendError, ConfigurationError, LongTermMemoryError
from ..records import Scope
from .moving import move, nfc
from .reading import Reader

if TYPE_CHECKING:
    from .routing import Route, Router

log = logging.getLogger(__name__)

#: The meta key whose value says a store was joined (``"1"``).
MARKER = "one_name_joined"
#: Where one (app, user) was found: (index, its scope as stored) for each place.
Places = list[tuple[str, Scope]]


def home(app: str, holders: set[str], own: str) -> str:
    """The index ``routing.RULE`` picks among ``holders`` for a user of ``app`` (``Router._find``)."""
    if app in holders:
        return app
    if own in holders:
        return own
    return min(holders)


async def _meta(route: Route) -> str | None:
    """The marker in ``route``'s index (None: not there, or its ledger keeps no meta)."""
    meta = store_ledger(route.ledger)
    if meta is None:
        return None
    with guard("reading the store's meta", f"backend {route.parts.name!r}"):
        return await meta.meta(MARKER)


async def _indices(route: Route) -> list[str]:
    """The store's indices holding memories; [] where its engine cannot list them (no primitive,
    mem0's platform): the pass then covers the memory's own index."""
    try:
        return await Reader(route.parts).indices()
    except (ConfigurationError, BackendError):
        return []


async def _users(route: Route) -> list[tuple[str, str, int]]:
    """(app, user, count) of ``route``'s index as stored; [] where its engine cannot list them."""
    try:
        return await Reader(route.parts).scopes()
    except (ConfigurationError, BackendError):
        return []


async def join(router: Router) -> None:
    """Join the store of ``router``'s memory once (module docstring)."""
    primary = router.primary
    if store_ledger(primary.ledger) is None or await _meta(primary) is not None:
        return  # joined; or nowhere to keep a marker (a ledger of the user's: the memory is told its index)
    before = {route.index for route in router.routes()}
    names = sorted({primary.index, *await _indices(primary)})
    try:
        joined_before = False
        for name in names:
            if name != primary.index and await _meta(router.opened(name)) is not None:
                joined_before = True
                break
        if joined_before:
            return  # reads only: a search never waits for a writer to mark an index (module docstring)
        await _pass(router, names)
        for name in names:
            await _mark(router.opened(name))
    finally:
        for name in names:
            if name not in before:
                await router.release(name)


async def stamp(router: Router) -> None:
    """Before the first save of a memory told its index: that index marked joined when it holds
    nothing yet and the store is new, or joined already (another index holds the marker).

    Why: a store this release makes has nothing of an earlier release to join, and a user an
    application puts in two indices on purpose (``index=``) must stay split when a memory not
    told its index opens the store later. An index already holding memories, or a new one in a
    store not joined yet (an earlier release's), is left for the join to judge."""
    primary = router.primary
    if store_ledger(primary.ledger) is None or await _meta(primary) is not None:
        return
    names = await _indices(primary)
    if primary.index in names:
        return
    before = {route.index for route in router.routes()}
    fresh = not names
    try:
        for name in names:
            try:
                marked = await _meta(router.opened(name)) is not None
            except LongTermMemoryError:  # one this memory cannot open (another embedder): cannot tell
                marked = False
            if marked:
                fresh = True
                break
    finally:
        for name in names:
            if name not in before:
                await router.release(name)
    if fresh:
        await _mark(primary)


async def _mark(route: Route) -> None:
    """The marker written into ``route``'s index (where its ledger keeps meta)."""
    meta = store_ledger(route.ledger)
    if meta is not None:
        with guard("writing the store's meta", f"backend {route.parts.name!r}"):
            await meta.set_meta(MARKER, "1")


async def _pass(router: Router, names: list[str]) -> None:
    """Every user held in two indices or under ids not in NFC, moved where ``home`` says; logged once."""
    found: dict[tuple[str, str], Places] = {}
    for name in names:
        for app, user, _ in await _users(router.opened(name)):
            found.setdefault((nfc(app), nfc(user)), []).append((name, Scope.stored(app, user)))
    joined = rekeyed = records = 0
    for (app, user), places in sorted(found.items()):
        to = Scope.stored(app, user)
        there = home(app, {name for name, _ in places}, router.primary.index)
        target = router.opened(there).parts
        moves = [(router.opened(name).parts, scope) for name, scope in places if (name, scope) != (there, to)]
        for source, scope in moves:
            records += (await move(source, scope, target, to)).records
        in_place = await move(target, to, target, to)
        records += in_place.records
        joined += any(name != there for name, _ in places)
        rekeyed += any(scope != to for _, scope in places) or bool(in_place)
    if joined or rekeyed:
        log.info(
            "joined the store once: users split over indices joined: %d, users re-keyed to NFC: %d, memories "
            "moved: %d (%d indices looked at); the store is marked joined",
            joined,
            rekeyed,
            records,
            len(names),
        )
