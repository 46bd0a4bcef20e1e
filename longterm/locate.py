"""Which index of a store holds a user: the one rule the CLI and the MCP server follow.

The seam: ``locate_index(memory_factory, app_name, user_id, index=None) -> str``, and for many
users at once ``locate_indices(memory_factory, scopes, index=None) -> {(app, user): index}``;
``store_indices(memory_factory, probe)`` lists the indices of a store that hold memories.
``memory_factory(index)`` opens a ``LongTermMemory`` on that index of one store (same backend,
location and prefix; ``None``: a memory not told an index); every memory it opens here is closed
before the call returns. A caller
that keeps its memories open and finds the indices holding a user its own way (the UI) applies
the same rule to what it found: ``choose(app, user, holding)`` (the one index, none, or
``SeveralIndices`` naming them).

The rule (``RULE``, also in the CLI's help and the README): an index given (``--index``, or
``index`` in ``--config``) is used as it is. Otherwise (app, user) is looked for in every index
of the store that holds memories: the one index that holds it is used; several are an error
naming them (pass ``--index``); none is the index the API would use for that app
(``LongTermMemory(app_name=app)`` saves into index ``app``), so what the CLI or the MCP server
writes first lands where the application's own reads look.

A locate without ``--index`` that finds a user in several indices first lets a memory not told
an index list the store (``join_store``): that memory's first listing joins, once per store, a
user an earlier release left in two indices (``memory.joining``), so a store of an earlier
release answers the CLI and the MCP server from one index instead of stopping at "several
indices". Only then: a memory not told an index opens its own index (``default_app``), which an
embedded engine would create for a command that only reads.

Why: ``LongTermMemory(app_name="travel")`` saves into index ``travel``, ``LongTermMemory()``
into ``default_app``; a command that looked in one fixed index missed the other's memories.
Why one memory at a time: an embedded engine (Qdrant's local mode) allows one open client per
directory, so each probe is closed before the next one opens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .errors import BackendError, ConfigurationError, InvalidInputError
from .records import check_id

if TYPE_CHECKING:
    from .memory import LongTermMemory

#: Opens a memory on the named index of the store (None: a memory not told an index).
MemoryFactory = Callable[[str | None], "LongTermMemory"]
#: (app_name, user_id)
Pair = tuple[str, str]

RULE = (
    "Which index: with --index, that index only. Without it, a command that names --app and --user "
    "finds them in whichever index of the store holds them; if several do, it stops and names them "
    "(pass --index); if none does, it uses the index the API uses for that app "
    "(LongTermMemory(app_name=APP) saves into index APP), and so does import for what it writes."
)


async def _listed(memory: LongTermMemory) -> list[str] | None:
    """The store's indices holding memories, or None when its engine cannot list them."""
    try:
        return await memory.indices()
    except ConfigurationError:  # the facade's "cannot list its indices": a backend without the primitive
        return None
    except BackendError as exc:
        if isinstance(exc.__cause__, NotImplementedError):  # an engine that leaves _indices out
            return None
        raise


async def store_indices(memory_factory: MemoryFactory, probe: str) -> list[str]:
    """The index names of the store that hold memories, sorted (the facade's ``indices()``).

    ``probe`` is the index opened to ask; it is listed only when it holds memories."""
    memory = memory_factory(probe)
    try:
        return await memory.indices()
    finally:
        await memory.close()


async def _count_into(memory: LongTermMemory, index: str, found: dict[Pair, list[str]]) -> None:
    for app, user in found:
        if await memory.count(app_name=app, user_id=user):
            found[(app, user)].append(index)


async def holders(memory_factory: MemoryFactory, pairs: Sequence[Pair], *, probe: str) -> dict[Pair, list[str]]:
    """For each (app, user) the indices of the store holding memories of it, sorted; empty lists
    when the engine cannot list its indices."""
    found: dict[Pair, list[str]] = {pair: [] for pair in pairs}
    memory = memory_factory(probe)
    try:
        names = await _listed(memory)
        if names is not None and probe in names:
            await _count_into(memory, probe, found)
    finally:
        await memory.close()
    for name in names or ():
        if name == probe:
            continue
        other = memory_factory(name)
        try:
            await _count_into(other, name, found)
        finally:
            await other.close()
    return {pair: sorted(names) for pair, names in found.items()}


class SeveralIndices(InvalidInputError):
    """Several indices of the store hold one (app, user), which ``RULE`` refuses to guess: ``names``."""

    def __init__(self, app_name: str, user_id: str, names: Sequence[str]) -> None:
        super().__init__(
            f"user {user_id!r} of app {app_name!r} has memories in {len(names)} indices of this store "
            f"({', '.join(repr(n) for n in names)}); pass --index with one of them (`longterm stats` lists them)."
        )
        self.app_name, self.user_id, self.names = app_name, user_id, list(names)


def choose(app_name: str, user_id: str, holding: Sequence[str]) -> str | None:
    """``RULE`` over the indices found holding (app, user): the one that does, None when none
    does (the caller's default), ``SeveralIndices`` naming them when several do."""
    if len(holding) > 1:
        raise SeveralIndices(app_name, user_id, holding)
    return holding[0] if holding else None


async def join_store(memory_factory: MemoryFactory) -> None:
    """The store joined once (module docstring): a memory not told an index lists it, and closes."""
    memory = memory_factory(None)
    try:
        await _listed(memory)
    finally:
        await memory.close()


async def locate_indices(
    memory_factory: MemoryFactory, pairs: Sequence[Pair], *, index: str | None = None
) -> dict[Pair, str]:
    """The index each (app, user) of ``pairs`` is read from and written to, by ``RULE``; an
    ``InvalidInputError`` naming the indices when several hold one of them."""
    pairs = list(dict.fromkeys(pairs))
    if index or not pairs:
        return {pair: index or pair[0] for pair in pairs}
    found = await holders(memory_factory, pairs, probe=pairs[0][0])
    if any(len(names) > 1 for names in found.values()):  # a store an earlier release split: joined once
        await join_store(memory_factory)
        found = await holders(memory_factory, pairs, probe=pairs[0][0])
    located: dict[Pair, str] = {}
    for (app, user), names in found.items():
        located[(app, user)] = choose(app, user, names) or app
    return located


async def locate_index(memory_factory: MemoryFactory, app_name: str, user_id: str, *, index: str | None = None) -> str:
    """The index holding ``user_id``'s memories of ``app_name`` in the store, by ``RULE``."""
    check_id("app_name", app_name)  # a bad id says so before any store is opened
    check_id("user_id", user_id)
    return (await locate_indices(memory_factory, [(app_name, user_id)], index=index))[(app_name, user_id)]


__all__ = [
    "RULE",
    "MemoryFactory",
    "SeveralIndices",
    "choose",
    "holders",
    "locate_index",
    "join_store",
    "locate_indices",
    "store_indices",
]
