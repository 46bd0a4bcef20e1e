"""The Python blocks of the README and of the documentation site, as tests read them.

A block is a fenced ```` ```python ```` block at the start of a line. Its first line may mark
it: ``# fragment: why`` (not a program: a method, or lines inside an async function; compiled,
never run, and only a handful may exist), or ``# needs: redis`` / ``# needs: opensearch`` (run
against the engine the test suite starts, its URL in ``LONGTERM_REDIS_URL`` or
``LONGTERM_OPENSEARCH_URL``). Every other block is a program that runs as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The pages whose blocks run: the README and every page of the site.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
ANY_FENCE = re.compile(r"^[ \t>]*```[ \t]*python", re.MULTILINE)
MARK = re.compile(r"#\s*(fragment|needs):\s*(.*)")
#: Engines a block may name on its first line, and the variable its URL goes in.
SERVICES = {"redis": "LONGTERM_REDIS_URL", "opensearch": "LONGTERM_OPENSEARCH_URL"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    code: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def mark(self) -> tuple[str, str] | None:
        first = self.code.split("\n", 1)[0].strip()
        m = MARK.fullmatch(first)
        return (m[1], m[2].strip()) if m else None

    @property
    def fragment(self) -> str | None:
        """Why this block is not a program, or None."""
        mark = self.mark
        return mark[1] if mark and mark[0] == "fragment" else None

    @property
    def service(self) -> str | None:
        """The engine this block needs (a key of ``SERVICES``), or None."""
        mark = self.mark
        return mark[1].split()[0] if mark and mark[0] == "needs" else None


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(page, text.count("\n", 0, m.start()) + 2, m[1]) for m in FENCE.finditer(text)]


def fences(page: Path) -> int:
    """How many python fences the page opens anywhere (indented or quoted ones too)."""
    return len(ANY_FENCE.findall(page.read_text(encoding="utf-8")))


ALL = [b for page in PAGES for b in blocks(page)]
