"""The public surface is typed: an editor completes ``.text`` and ``.memories``, mypy checks a user's code.

mypy runs on a user's snippet and reports what it infers; ``Any`` anywhere in these would
mean an editor completes nothing and a typo passes. The quick start is checked with ``--strict``.
"""

from __future__ import annotations

from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = """
from longterm import LongTermMemory

async def main() -> None:
    memory = LongTermMemory(app_name="a")
    reveal_type(memory.search_sync("q", user_id="u"))
    reveal_type(memory.search_sync("q", user_id="u")[0].text)
    reveal_type(memory.search_sync("q", user_id="u")[0].score)
    reveal_type(memory.add_sync("x", user_id="u").memory_ids)
    reveal_type(memory.get_all_sync(user_id="u").next_cursor)
    reveal_type(await memory.search("q", user_id="u"))
    reveal_type(await memory.get("id", user_id="u"))
    reveal_type(memory.search_memory_sync(app_name="a", user_id="u", query="q").memories)
    reveal_type(await memory.delete_all(user_id="u"))
    reveal_type(memory.scopes_sync())
"""
EXPECTED = [
    "list[longterm.records.Memory]",
    "str",
    "float | None",
    "list[str]",
    "str | None",
    "list[longterm.records.Memory]",
    "longterm.records.Memory | None",
    "list[google.adk.memory.memory_entry.MemoryEntry]",
    "int",
    "list[tuple[str, str, int]]",
]


def test_the_surface_is_typed_for_the_user_and_the_quickstart_passes_mypy_strict(tmp_path: Path):
    """One mypy run (the library analysed once): the snippet's inferred types, the quick start strict."""
    path = tmp_path / "snippet.py"
    path.write_text(SNIPPET)
    quickstart = str(ROOT / "examples" / "quickstart.py")
    out, err, status = api.run(
        [str(path), quickstart, "--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path)]
    )
    revealed = [line.split('Revealed type is "', 1)[1].rstrip('"') for line in out.splitlines() if "Revealed" in line]
    assert revealed == EXPECTED, out + err
    assert status == 0, out + err
