"""Shared pieces of the fault suite: the contract suite's backend fixtures, and sessions
whose expected outcome is computed from the policy (not hard-coded), so a test states
exactly how many records a user must end up with.

The seam: ``provider_id``/``backend_name``/``backend_config``/``open_memory`` are the
contract suite's fixtures (every backend in ``tests.services.PROVIDERS``; a test narrows
them with ``@pytest.mark.parametrize("provider_id", [...])``); ``import_sessions`` and
``expected_ids`` describe an import; ``helper`` is the command running a script of this package.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longterm.policies import resolve_policy
from longterm.saves import plan_save
from longterm.sessions import read_session
from tests.contract.conftest import backend_config, backend_name, open_memory, provider_id  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
APP = "import-app"


def import_sessions(n: int, events: int, users: int = 3) -> list[dict[str, Any]]:
    """``n`` sessions of ``events`` turns (user and model alternate), spread over ``users``
    users; every text is unique, so a duplicate record shows as a duplicate text."""
    return [
        {
            "id": f"s{i:03d}",
            "app_name": APP,
            "user_id": f"u{i % users}",
            "events": [
                {
                    "id": f"s{i:03d}-e{j:03d}",
                    "author": "user" if j % 2 == 0 else "agent",
                    "timestamp": 1_700_000_000.0 + i * 1000 + j,
                    "content": {
                        "role": "user" if j % 2 == 0 else "model",
                        "parts": [{"text": f"session {i} turn {j}: I planted {j} tulips in bed {i} " + "soil " * 20}],
                    },
                }
                for j in range(events)
            ],
        }
        for i in range(n)
    ]


def expected_ids(sessions: Sequence[dict[str, Any]]) -> dict[str, set[str]]:
    """Record ids the default policy keeps from ``sessions``, per user."""
    policy = resolve_policy(None)
    out: dict[str, set[str]] = {}
    for s in sessions:
        plan = plan_save(read_session(s), set(), policy)
        out.setdefault(s["user_id"], set()).update(r.id for r in plan.records)
    return out


def helper(name: str, *args: str) -> list[str]:
    """The command line running ``tests/faults/<name>.py`` with ``args``."""
    return [sys.executable, "-m", f"tests.faults.{name}", *args]
