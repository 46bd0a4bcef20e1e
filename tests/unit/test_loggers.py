"""One logger per module, named by ``__name__``: a handler or level set on ``longterm.core`` or
``longterm.backends.local`` reaches exactly that module, and JSON handlers can route by name."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "longterm"
#: The CLI sets the package root's level; the facts CLI quiets the fact layer's loggers.
ALLOWED = {"cli/output.py": {"longterm"}}


def test_every_module_logs_under_its_own_name():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "getLogger" and node.args):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id == "__name__":
                continue
            if isinstance(arg, ast.Constant) and arg.value in ALLOWED.get(rel, set()):
                continue
            wrong.append(f"{rel}:{node.lineno}: {ast.unparse(arg)}")
    assert not wrong, wrong
