"""A test kit for backends and agents: the contract suite, sessions to save, a scripted model.

The seam: ``longterm.testing.contract.ContractSuite`` is the backend contract as a pytest
class that any backend subclasses to prove itself (guide: ``docs/backends.md``), composed of
mixins by behaviour a suite may also take one by one;
``make_session`` builds the session dicts its tests save; ``longterm.testing.scripted_llm``
is an offline ADK model for agent tests (it needs the ``adk`` extra, so it is not
imported here, and neither is pytest).

Why a package of the library rather than of its tests: a backend that lives in another
repository passes the very suite the built-in engines pass (fsspec's abstract filesystem
tests are the model), so nothing here imports from longterm's own ``tests``.
"""

from __future__ import annotations

from typing import Any

from ..records import MemoryRecord, record_id


def make_session(
    sid: str = "s1",
    app: str = "app",
    user: str = "u1",
    turns: list[tuple[str, str]] | None = None,
    start: float = 1_700_000_000.0,
) -> dict[str, Any]:
    """A session dict with one event per ``(role, text)`` turn (``"user"`` or ``"model"``),
    event ids ``<sid>-e<i>`` and one second between events from ``start``."""
    turns = turns if turns is not None else [("user", "I love hiking"), ("model", "Nice!")]
    return {
        "id": sid,
        "app_name": app,
        "user_id": user,
        "events": [
            {
                "id": f"{sid}-e{i}",
                "author": "user" if role == "user" else "agent",
                "timestamp": start + i,
                "content": {"role": role, "parts": [{"text": text}]},
            }
            for i, (role, text) in enumerate(turns)
        ],
    }


def make_record(
    text: str, *, app: str = "app", user: str = "u1", session: str = "s", event: str = "e", **fields: Any
) -> MemoryRecord:
    """A record as a save makes it (its id derived from app, user, session and event), for tests
    that write records directly (``upsert_records``)."""
    fields.setdefault("timestamp", 1_700_000_000.0)
    rid = record_id(app, user, session, event)
    return MemoryRecord(id=rid, app_name=app, user_id=user, session_id=session, event_id=event, text=text, **fields)


__all__ = ["make_record", "make_session"]
