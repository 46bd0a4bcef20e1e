"""The fact layer's model cost per 100 user events: one call a batch against the two-step form.

    python bench/facts_cost.py

The scenario is ``examples/facts.py``'s: one user, 10 sessions of 10 user events (two
statements of fact each: a city, diet or employer that changes, and a sister), against the
scripted model (``ScriptedChat``; tokens estimated at four characters, system prompts
included). Each form runs distilled after each save (as an agent saves) and all at once (an
import: batches of 40 events). The old form is the same code with ``combined=False`` (the
two-step path, kept for a model that answers the combined form badly: extraction, then one
reconcile call per fact that resembles a held one), in the same run; it asks what the code
as committed before the combined call asked (27 calls and 10,442 prompt tokens after each
save, 21 and about 9,040 at once, as ``examples/facts.py`` printed then). Prints the table and
the facts each run ends with (every fact, superseded ones included, with its history), and
exits 1 unless all four runs end with the same facts.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from facts import DAY, RULES, conversation
from rich.console import Console
from rich.table import Table

from longterm import LongTermMemory
from longterm.testing import make_session
from longterm.testing.scripted_llm import ScriptedChat

SESSIONS = 10
USER_EVENTS = 100


async def run(chat: ScriptedChat, combined: bool, live: bool) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The model usage and every fact at the end, for 10 sessions saved one by one (``live``:
    each distilled before the next is saved)."""
    before = dict(chat.usage)
    settings = {"base_url": chat.base_url, "model": "scripted", "combined": combined}
    with tempfile.TemporaryDirectory() as tmp:
        memory = LongTermMemory(backend_config={"path": f"{tmp}/cost.db"}, facts=settings)
        for n in range(SESSIONS):
            await memory.add_session_to_memory(
                make_session(f"s{n}", "app", "bob", conversation(n), start=1.7e9 + n * DAY)
            )
            if live:
                await memory.flush_facts()
        assert await memory.flush_facts() == 0
        facts = await memory.list_facts(app_name="app", user_id="bob", include_superseded=True)
        await memory.close()
    return {k: chat.usage[k] - before[k] for k in before}, facts


async def main() -> int:
    table = Table(title=f"fact layer cost per {USER_EVENTS} user events (scripted model)")
    for col in ("events arrive", "form", "model calls", "prompt tokens", "completion tokens"):
        table.add_column(col, justify="left" if col in ("events arrive", "form") else "right")
    outcomes: dict[str, list[dict[str, Any]]] = {}
    with ScriptedChat(RULES) as chat:
        for live in (True, False):
            used = {}
            for combined in (False, True):
                form = "combined" if combined else "two-step (before)"
                used[combined], outcomes[f"{'after each save' if live else 'all at once'}, {form}"] = await run(
                    chat, combined, live
                )
                u = used[combined]
                table.add_row(
                    "after each save" if live else "all at once",
                    form,
                    str(u["calls"]),
                    f"{u['prompt_tokens']:,}",
                    f"{u['completion_tokens']:,}",
                )
            new, old = used[True], used[False]
            table.add_row(
                "",
                "ratio",
                f"{new['calls'] / old['calls']:.2f}x",
                f"{new['prompt_tokens'] / old['prompt_tokens']:.2f}x",
                f"{new['completion_tokens'] / old['completion_tokens']:.2f}x",
                end_section=True,
            )
    console = Console(width=120)
    console.print(table)
    first, *others = outcomes.values()
    console.print("facts at the end (every run):")
    for f in first:
        console.print(f"  {f['text']!r}: {'current' if f['valid_until'] is None else 'until ' + f['valid_until']}")
    same = all(o == first for o in others)
    console.print(f"every run ends with the same {len(first)} facts, history included: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
