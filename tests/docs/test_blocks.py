"""Every Python block of the README and of the docs runs as written (tests/docs/blocks.py says
how a block is marked when it cannot)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from tests.docs.blocks import ALL, PAGES, ROOT, SERVICES, Block, fences
from tests.docs.programs import run

PROGRAMS = [b for b in ALL if b.fragment is None]
FRAGMENTS = [b for b in ALL if b.fragment is not None]
#: At most this many blocks may be fragments: the docs are programs that run.
MOST_FRAGMENTS = 5


def environment(home: Path) -> dict[str, str]:
    """The test's environment without longterm's variables (a user's shell has none), and a home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LONGTERM_", "DATABASE_", "MODEL_EMBEDDING_"))}
    env["LONGTERM_HOME"] = str(home)
    return env


def _param(block: Block):
    marks = [pytest.mark.service] if block.service else []
    return pytest.param(block, id=block.id, marks=marks)


@pytest.mark.parametrize("block", [_param(b) for b in PROGRAMS])
def test_block_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = environment(tmp_path / "home")
    if block.service:
        assert block.service in SERVICES, f"{block.id}: no engine called {block.service!r} ({', '.join(SERVICES)})"
        env[SERVICES[block.service]] = request.getfixturevalue("services")(block.service).url
    work = tmp_path / "work"
    work.mkdir()
    out = run(block.code, cwd=work, env=env, timeout=90, name=f"{block.page.stem}_{block.line}.py").check(block.id)
    if "print(" in block.code:
        assert out.strip(), f"{block.id} prints nothing"
    for repr_of in ("MemoryEntry(", "Content(", "Memory(id=", "object at 0x"):
        assert repr_of not in out, f"{block.id} prints a repr:\n{out}"


def test_the_readme_quick_start_prints_what_it_found(tmp_path: Path) -> None:
    [quick] = [b for b in ALL if b.page.name == "README.md" and "search_sync" in b.code]
    (tmp_path / "work").mkdir()
    out = run(quick.code, cwd=tmp_path / "work", env=environment(tmp_path / "home")).check(quick.id)
    assert "1.00 user My passport expires in August 2027" in out


def test_fragments_are_few_and_say_why() -> None:
    assert len(FRAGMENTS) <= MOST_FRAGMENTS, [b.id for b in FRAGMENTS]
    for block in FRAGMENTS:
        assert len(block.fragment or "") > 10, f"{block.id}: say why it cannot run"
        ast.parse(block.code, filename=block.id, feature_version=(3, 10))  # Python still (ast allows top-level await)


def test_every_python_fence_is_a_block_the_tests_see() -> None:
    """A block indented into a list or a quote would escape the tests: none is."""
    for page in PAGES:
        assert fences(page) == sum(b.page == page for b in ALL), f"{page.relative_to(ROOT)}: an indented python block"
    assert len(ALL) >= 20


def test_no_page_says_to_install_from_a_package_index() -> None:
    """longterm is not on a package index yet: every install is from a clone."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for wrong in ("pip install longterm", "pip install 'longterm[", 'pip install "longterm['):
            assert wrong not in text, f"{page.relative_to(ROOT)} says {wrong!r}"
