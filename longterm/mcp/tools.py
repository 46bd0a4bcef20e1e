"""The memory tools an MCP client sees, bound in code to one (app, user).

The seam: ``build_server(memory, app_name=, user_id=)`` returns an SDK ``MCPServer`` whose
tools search, save, delete, erase and list that user's memories and show the user's profile
(empty until a fact layer has distilled facts), over the memory's port
(``longterm.ports.MemoryPort``). Their arguments are what a model chooses - a query, a text,
an id - never whose memories: the scope is fixed when the server is built (from the command
line, the environment or, over HTTP, the caller's token), so no argument can reach another
user, whatever a model sends.

Why every failure is a tool error: a tool call is one step of a model's turn, and the
server outlives any one call. A ``LongTermMemoryError`` (bad input, a store that is down)
becomes an ``isError`` result carrying its message, which says what to do; anything else
is our bug, logged with its traceback and reported as ``internal error ... (please
report)``. Arguments are checked by their JSON schema first, so a wrong type, a negative
``top_k`` or a 10 MB query is refused before it reaches the store.
"""

from __future__ import annotations

import functools
import heapq
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ..errors import InvalidInputError, LongTermMemoryError
from ..records import Hit, MemoryRecord, check_id, record_id, repair_tree
from ..sessions import event_ids

if TYPE_CHECKING:
    from ..ports import MemoryPort

log = logging.getLogger(__name__)

#: Longest search query (characters): a question, not a document.
MAX_QUERY_CHARS = 4_000
#: Longest memory a model may save (characters).
MAX_TEXT_CHARS = 32_000
#: Largest metadata a saved memory may carry (bytes of JSON).
MAX_METADATA_BYTES = 16_384
#: Most memories one search or listing returns.
MAX_RESULTS = 100
#: Session id under which ``add_memory`` keeps explicit memories.
DIRECT_SESSION = "_direct"

INSTRUCTIONS = (
    "Long-term memory of the current user: facts, preferences and events from earlier conversations. "
    "Search it before answering anything that may depend on what the user said before; save what the user "
    "wants remembered. Every tool acts on this user's memories only."
)

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def _as_tool_error(fn: F) -> F:
    """Run a tool; our errors become tool errors with their message, anything else 'internal error'."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except LongTermMemoryError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(f"internal error in {fn.__name__}: {type(exc).__name__}: {exc} (please report)") from None

    return call  # type: ignore[return-value]


def _listed(rec: MemoryRecord, **found: Any) -> dict[str, Any]:
    """One memory as ``list_memories`` gives it; ``found``: what a search adds, after its time."""
    return {
        "id": rec.id,
        "text": rec.text,
        "author": rec.author or None,
        "timestamp": rec.iso_timestamp(),
        **found,
        "session_id": rec.session_id,
        "event_id": rec.event_id,
        "metadata": rec.metadata,
    }


def _found(hit: Hit) -> dict[str, Any]:
    """One hit as ``search_memory`` gives it: ``_listed``'s fields, the hit's score (in [0, 1]) and
    what each search arm scored (``arms``: ``fulltext``, ``vector`` where hybrid search is on).

    Built on the hit, not on ADK's ``MemoryEntry``: an entry has one ``custom_metadata`` where the
    library's keys (``score``, ``backend``, ``role``...) win over the memory's own, so a memory saved
    with ``{"backend": "mine"}`` showed ``"local"`` here and its own key elsewhere. Here
    ``metadata`` is the memory's own, as ``list_memories``, the API and export give it.
    """
    degraded = hit.extra.get("degraded")  # why a search had less than it was set up with
    return _listed(
        hit.record, score=hit.score, arms=dict(hit.arms), **({"degraded": str(degraded)} if degraded else {})
    )


class MemoryTools:
    """The tools of one (app, user); each returns plain JSON-ready data."""

    def __init__(self, memory: MemoryPort, *, app_name: str, user_id: str) -> None:
        memory.scope(app_name, user_id)  # refuse a bad scope at start, not at the first call
        self.memory, self.app_name, self.user_id = memory, app_name, user_id

    @_as_tool_error
    async def search_memory(
        self,
        query: Annotated[
            str, Field(max_length=MAX_QUERY_CHARS, description="What to look for, in the user's own words.")
        ],
        top_k: Annotated[int, Field(ge=1, le=MAX_RESULTS, description="How many memories to return.")] = 5,
        filters: Annotated[
            dict[str, Any] | None,
            Field(
                description="Only memories that pass this filter, applied before the top-k cut: "
                "{'topic': 'travel'} (metadata equality), operators $eq $ne $in $nin $gt $gte $lt $lte $exists, "
                "$and/$or/$not, dotted paths ('project.phase'), and session_id, author, role, timestamp."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Search this user's long-term memory: facts, preferences and events from earlier conversations.

        Returns the best matches first, each with its id, text, author, time (ISO 8601), relevance
        score and the metadata it was saved with. Call it whenever the answer may depend on something
        the user said before.
        """
        scope = self.memory.scope(self.app_name, self.user_id)
        hits = await self.memory.search_hits(scope, query, top_k, filters=filters)
        return {"memories": [_found(hit) for hit in hits]}

    @_as_tool_error
    async def save_memory(
        self,
        text: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_TEXT_CHARS,
                description="The memory, as one self-contained statement (e.g. 'The user is allergic to peanuts').",
            ),
        ],
        metadata: Annotated[
            dict[str, Any] | None,
            Field(description="Optional JSON object kept with the memory (e.g. a topic or a source)."),
        ] = None,
        ttl_seconds: Annotated[
            int | None,
            Field(
                ge=1,
                description="Forget it after this many seconds (a one-time code, a plan for tomorrow); "
                "omit to keep it until it is deleted.",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Save one memory for this user, to be found by later searches.

        Save what the user asks you to remember, or a durable fact or preference they stated.
        Saving the same text again keeps one memory. Returns the memory's id and time.
        """
        if not text.strip():
            raise InvalidInputError("text is blank; pass the memory to save as text.")
        meta = repair_tree(metadata) if metadata else None
        if meta is not None and len(json.dumps(meta, ensure_ascii=False).encode("utf-8")) > MAX_METADATA_BYTES:
            raise InvalidInputError(f"metadata is larger than {MAX_METADATA_BYTES} bytes of JSON; keep it small.")
        raw = {"author": "user", "content": {"role": "user", "parts": [{"text": text}]}}
        [event_id] = event_ids([raw])
        result = await self.memory.add_memory(
            app_name=self.app_name,
            user_id=self.user_id,
            memories=[{**raw, "id": event_id}],
            custom_metadata=meta,
            ttl=ttl_seconds,
        )
        if not result.saved:
            raise InvalidInputError("nothing was saved: the text holds nothing to remember.")
        return {"id": record_id(self.app_name, self.user_id, DIRECT_SESSION, event_id), "saved": True}

    @_as_tool_error
    async def delete_memory(
        self,
        memory_id: Annotated[
            str, Field(description="The id of the memory, as search_memory or list_memories gave it.")
        ],
    ) -> dict[str, Any]:
        """Delete one of this user's memories by its id (e.g. one that is wrong or that the user wants forgotten)."""
        check_id("memory_id", memory_id)
        n = await self.memory.delete_memory(app_name=self.app_name, user_id=self.user_id, memory_id=memory_id)
        if not n:
            raise InvalidInputError(
                f"no memory of this user has the id {memory_id!r}; search_memory or list_memories give the ids."
            )
        return {"deleted": n}

    @_as_tool_error
    async def erase_session(
        self,
        session_id: Annotated[str, Field(description="The session_id shown on the memories to erase.")],
    ) -> dict[str, Any]:
        """Erase every memory saved from one conversation (session) of this user; returns how many were erased.

        Erased memories stay erased: saving that conversation again does not bring them back.
        """
        check_id("session_id", session_id)
        n = await self.memory.delete_memory(app_name=self.app_name, user_id=self.user_id, session_id=session_id)
        return {"deleted": n}

    @_as_tool_error
    async def list_memories(
        self,
        limit: Annotated[int, Field(ge=1, le=MAX_RESULTS, description="How many memories to return.")] = 20,
        filters: Annotated[
            dict[str, Any] | None,
            Field(
                description="Only memories that pass this filter: "
                "{'topic': 'travel'} (metadata equality), operators $eq $ne $in $nin $gt $gte $lt $lte $exists, "
                "$and/$or/$not, dotted paths ('project.phase'), and session_id, author, role, timestamp."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """List this user's most recent memories, newest first, with ids, times and sessions.

        Use it to review or export what is remembered, or to find the id of a memory to delete.
        Returns the memories and how many the user has in all.
        """
        total = 0
        newest: list[tuple[float, int, MemoryRecord]] = []
        async for rec in self.memory.iter_records(app_name=self.app_name, user_id=self.user_id, filters=filters):
            item = (rec.timestamp, total, rec)
            total += 1
            if len(newest) < limit:
                heapq.heappush(newest, item)
            else:
                heapq.heappushpop(newest, item)
        ordered = sorted(newest, key=lambda t: (t[0], t[1]), reverse=True)
        return {"memories": [_listed(rec) for _, _, rec in ordered], "total": total}

    @_as_tool_error
    async def get_user_profile(self) -> dict[str, Any]:
        """This user's current profile: the facts and preferences distilled from their conversations.

        Read it at the start of a conversation to know the user. Empty when no facts are known yet.
        """
        profile = await self.memory.get_user_profile(app_name=self.app_name, user_id=self.user_id)
        return {"profile": profile}


def build_server(memory: MemoryPort, *, app_name: str, user_id: str) -> MCPServer:
    """An MCP server whose tools act on the memories of ``user_id`` in ``app_name`` only."""
    tools = MemoryTools(memory, app_name=app_name, user_id=user_id)
    server: MCPServer = MCPServer("longterm", instructions=INSTRUCTIONS, log_level="WARNING")
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    server.add_tool(tools.search_memory, annotations=reads)
    server.add_tool(tools.list_memories, annotations=reads)
    server.add_tool(tools.save_memory, annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
    erases = ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False)
    server.add_tool(tools.delete_memory, annotations=erases)
    server.add_tool(tools.erase_session, annotations=erases)
    server.add_tool(tools.get_user_profile, annotations=reads)
    return server
