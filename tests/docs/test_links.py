"""Every link of the README resolves: to a file or folder of the repository (a page of docs/
included), and an anchor to a heading of that page. The site's own links are checked by
`mkdocs build --strict` (scripts/test)."""

from __future__ import annotations

import re
from pathlib import Path

from markdown.extensions.toc import slugify

from tests.docs.blocks import ROOT

README = ROOT / "README.md"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def links(page: Path) -> list[str]:
    text = CODE.sub("", page.read_text(encoding="utf-8"))
    return LINK.findall(text)


def anchors(page: Path) -> set[str]:
    """The ids MkDocs gives the page's headings (the toc extension's slugs)."""
    headings = re.findall(r"^#{1,6}\s+(.*)$", CODE.sub("", page.read_text(encoding="utf-8")), re.MULTILINE)
    return {slugify(h.strip(), "-") for h in headings}


def test_every_readme_link_resolves() -> None:
    found = links(README)
    assert len(found) >= 20, found
    for target in found:
        assert not target.startswith("/"), f"{target}: an absolute path resolves nowhere on another machine"
        if re.match(r"[a-z]+:", target):
            assert target.startswith("https://"), target
            continue
        path, _, anchor = target.partition("#")
        where = (ROOT / path).resolve() if path else README
        assert where.is_relative_to(ROOT) and where.exists(), f"README links to {target}, which does not exist"
        if anchor:
            assert where.suffix == ".md" and anchor in anchors(where), f"README links to {target}: no such heading"


def test_the_readme_links_the_docs_it_promises() -> None:
    """The short README is a door: each part of the site is one link away."""
    docs = {t.partition("#")[0] for t in links(README) if t.startswith("docs/")}
    for page in ("docs/getting-started.md", "docs/concepts.md", "docs/promises.md", "docs/benchmarks.md"):
        assert page in docs, page
    for page in (ROOT / "docs" / "integrations").glob("*.md"):
        assert f"docs/integrations/{page.name}" in docs, page.name
