"""What the framework integrations share: a conversation saved exactly once, and the app it goes to.

The seam: ``save_conversation(memory, messages, app_name=, user_id=, session_id=, policy=)``
saves OpenAI-shaped chat messages (each with a ``key``: what makes it that message) as one
session through ``add_session_to_memory``, so the memory's auto-save policy (user text by
default, or ``policy``) and its ledger apply; ``app_of(memory, app_name)`` is the app an
integration uses when told none: the memory's ``default_app`` (``app_name``, else
``"default_app"``), the app of its simple API, so every integration opened on one memory
shares its users' memories (``memory.routing``'s index rule decides the index).

Why ids from keys: the OpenAI Agents SDK and Pydantic AI hand a run's items again and again
(each model call's input holds the items before it; a session replays its history), often
without an id, or with a placeholder one model gives every item. A message's id is a digest
of its key (its role, content, call ids, its own id when it has one; never a time, which a
rebuilt history changes) and of how many identical keys came before it in the list, so the
same item handed again is the same event, which the ledger saves once, and a repeated "yes"
later in a conversation is a new one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..records import SaveResult

if TYPE_CHECKING:
    from ..memory import LongTermMemory


def app_of(memory: LongTermMemory, app_name: str | None) -> str:
    """``app_name``, else the memory's ``default_app``: the app an integration saves and searches in."""
    return app_name or memory.default_app


def keyed(messages: Sequence[tuple[dict[str, Any], object]], prefix: str) -> list[dict[str, Any]]:
    """Each message of (message, key) pairs with an ``id`` derived from its key and its rank among
    equal keys (module docstring)."""
    seen: dict[str, int] = {}
    out = []
    for message, key in messages:
        text = json.dumps(key, sort_keys=True, ensure_ascii=False, default=str)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        out.append({**message, "id": f"{prefix}-{digest}" + (f"-{n}" if n else "")})
    return out


async def save_conversation(
    memory: LongTermMemory,
    messages: list[dict[str, Any]],
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    policy: Any = None,
) -> SaveResult:
    """Save ``messages`` (chat-shaped, with ids) as session ``session_id`` of (app, user): what the
    ledger has seen is skipped, the rest goes through ``policy`` (None: the memory's own)."""
    session = {"id": session_id, "app_name": app_name, "user_id": user_id, "messages": messages}
    if not messages:
        return SaveResult(session_id=session_id, new_events=0, saved=0)
    return await memory.add_session_to_memory(session, auto_save_memory_policy=policy)


__all__ = ["app_of", "keyed", "save_conversation"]
