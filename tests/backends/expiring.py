"""What the Qdrant and mem0 expiry tests share: one store's user, its moment ``NOW``, and records
expired before it, expiring after it and never, each with and without a topic (``expiring_records``).
"""

from __future__ import annotations

from longterm.records import MemoryRecord
from longterm.testing import make_record

APP, USER = "expiry-app", "expiry-user"
NOW = 1_750_000_000.0


def expiring_records() -> list[MemoryRecord]:
    """Expired before ``NOW``, expiring after it, and never, each with and without the topic."""
    out = []
    for i, (expires, topic) in enumerate(
        [(NOW - 100, "travel"), (NOW - 1, "work"), (NOW, "travel"), (NOW + 1, "travel"), (NOW + 500, "work"),
         (None, "travel"), (None, "work"), (NOW + 50, None)]
    ):  # fmt: skip
        meta = {} if topic is None else {"topic": topic}
        updated = NOW - 10 if i % 2 else None
        out.append(
            make_record(f"the harbour memory {i}", app=APP, user=USER, session=f"s{i % 3}", event=f"e{i}",
                        timestamp=1_700_000_000.0 + i, metadata=meta, expires_at=expires, updated_at=updated)
        )  # fmt: skip
    return out
