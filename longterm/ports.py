"""``MemoryPort``: what satellites may use of a memory.

The seam: automatic saving, the ``load_memory`` tool, the MCP server, the UI, the CLI and the
integrations take a ``MemoryPort`` (``LongTermMemory`` is one, structurally) and use these
members only: whether it is open, its background loop (``portal``), a checked scope, the
fact layer's last error, its event ledger, and the public calls below. None of them reads a
private attribute of the facade or imports it to get at one.

Why a port below the facade: the satellites the facade builds (``AutoSaver(memory)``,
``MemoryTool(memory)``) sit under it in the layers, so they cannot import ``longterm.memory``
without an import circle. This module imports only the vocabulary at run time (records,
errors, the portal); the types of the richer results are for the type checker alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._sync import SyncPortal
from .records import Hit, MemoryRecord, SaveResult, Scope

if TYPE_CHECKING:
    from .core.backend import Backend
    from .core.ledger import Ledger
    from .entries import SearchMemoryResponse
    from .facts import SearchKind


@runtime_checkable
class MemoryPort(Protocol):
    """A memory as its satellites see it (see the module docstring); ``LongTermMemory`` implements it."""

    @property
    def is_open(self) -> bool:
        """False once ``close()`` began: satellites stop posting work."""

    @property
    def portal(self) -> SyncPortal:
        """The memory's own background loop (blocking calls, automatic saving)."""

    def scope(self, app_name: str, user_id: str) -> Scope:
        """The checked scope of (app_name, user_id); an ``InvalidInputError`` naming the field."""

    @property
    def facts_error(self) -> str | None:
        """The fact layer's last distillation error (None: none, or no fact layer)."""

    @property
    def event_ledger(self) -> Ledger:
        """The ledger the memory uses: the store's own, or a side ledger beside it."""

    @property
    def backend_name(self) -> str:
        """The engine's registered name (for logs and messages)."""

    @property
    def backend_instance(self) -> Backend:
        """The engine itself (for what only it can say: vectors, purge, schema)."""

    @property
    def index(self) -> str:
        """The namespace inside the engine."""

    @property
    def user_id(self) -> str:
        """The default user of tools built without one ("" when none)."""

    async def add_session_to_memory(
        self,
        session: Any,
        *,
        auto_save_memory_policy: Any = None,
        reconsider: bool = False,
        lenient: bool = False,
        ttl: Any = None,
    ) -> SaveResult:
        """Save what is new in ``session`` (its memories living ``ttl``; None: the memory's default)."""

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[Any],
        custom_metadata: Mapping[str, object] | None = None,
        ttl: Any = None,
    ) -> SaveResult:
        """Write explicit memories as they are, living ``ttl`` (seconds; None: the memory's default)."""

    async def search_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        query: str,
        top_k: int | None = None,
        kind: SearchKind = "all",
        min_score: float | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> SearchMemoryResponse:
        """The memories of (app, user) that best match ``query`` (and pass ``filters``), best first."""

    async def search_hits(
        self,
        scope: Scope,
        query: str,
        top_k: int | None = None,
        *,
        kind: SearchKind = "all",
        min_score: float | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """The scope's best hits for ``query`` (that pass ``filters``), scored on the core's one scale."""

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None, session_id: str | None = None
    ) -> int:
        """Erase one memory, one session's or (neither) the user's; how many went."""

    async def get_user_profile(self, user_id: str | None = None, *, app_name: str | None = None) -> str:
        """The user's current facts as a compact list ("" when facts are off)."""

    def iter_records(
        self, *, app_name: str, user_id: str, filters: Mapping[str, Any] | None = None
    ) -> AsyncIterator[MemoryRecord]:
        """Every record of (app, user) (that passes ``filters``)."""

    async def count(self, *, app_name: str, user_id: str, filters: Mapping[str, Any] | None = None) -> int:
        """How many memories (app, user) has (that pass ``filters``)."""

    def unsaved_events(self) -> int:
        """Events automatic saving has seen and not saved yet."""

    async def flush(self) -> None:
        """Save every unsaved tail automatic saving knows of, then wait for the fact layer."""

    async def close(self, *, flush: bool = True) -> None:
        """Save what automatic saving holds (unless ``flush=False``), then release everything."""


__all__ = ["MemoryPort"]
