"""The package's shape, checked from its syntax trees (docs/architecture.md).

The seam: each rule here is one a reviewer would otherwise check by eye and forget; the
tree is parsed, nothing is imported. Why: a layered package stays layered only while a
test says so. The rules:

- modules import only from their own layer or the ones below it (``LAYERS``), and no
  module imports another that (through any chain) imports it back;
- no module reads another module's private name: ``obj._name`` where ``obj`` is not
  ``self``, ``cls`` or ``super()`` and this module defines no ``_name`` itself,
  ``getattr(obj, "_name")`` likewise, and ``from module import _name`` (``EXCEPTIONS``
  lists the few allowed, each with its reason);
- no module of ``longterm/`` longer than 400 lines, no class longer than 300.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "longterm"

#: Lowest first. A module may import from its own layer and the layers below it only.
#: The first part of a module's name under ``longterm`` decides its layer.
LAYERS: list[set[str]] = [
    {"errors", "trees", "records", "telemetry", "_net", "config", "_sync", "uri"},  # the vocabulary
    {
        "retrieval",
        "shapes",
        "messages",
        "sessions",
        "policies",
        "saves",
        "transcripts",
        "entries",
        "compat",
    },  # pure logic
    {"core"},  # what every engine shares
    {"backends"},  # the engines' primitives
    {"facts"},  # the fact layer over an engine
    {"ports", "autosave", "tools"},  # what satellites may use of a memory, and the satellites a memory makes
    {"memory"},  # the facade
    {"locate", "integrations", "mcp", "ui", "cli", "doctor", "demo", "testing", ""},  # satellites, the public API
]

#: (module, name) pairs allowed to read a private name of another module, with the reason.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("longterm.mcp.server", "_lowlevel_server"): (
        "the MCP SDK runs a server on given streams only through its private low-level server: "
        "run_stdio_async takes no streams, and our stdin repairs each line before the SDK's transport "
        "validates it (and would drop it)"
    ),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, tuple[Path, ast.Module]]:
    return {_module_name(p): (p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def _imports(name: str) -> set[str]:
    """The longterm modules ``name`` imports (at any depth of its code, not for type checking only)."""
    modules = _modules()
    path, tree = modules[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "longterm")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "longterm":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
    return {m for m in found if m in modules and m != name}


def _layer(name: str) -> int:
    first = name.split(".")[1] if "." in name else ""
    for i, layer in enumerate(LAYERS):
        if first in layer:
            return i
    raise AssertionError(
        f"{name}: its first part {first!r} is in no layer; add it to LAYERS (and docs/architecture.md)"
    )


def test_every_module_imports_only_its_own_layer_or_below() -> None:
    upward = [
        f"{name} (layer {_layer(name)}) imports {target} (layer {_layer(target)})"
        for name in _modules()
        for target in sorted(_imports(name))
        if _layer(target) > _layer(name)
    ]
    assert upward == []


def test_there_is_no_import_circle() -> None:
    graph = {name: _imports(name) for name in _modules()}
    circles: list[list[str]] = []
    # Tarjan's strongly connected components: a component of more than one module is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []


def _own_private_names(tree: ast.Module) -> set[str]:
    """Private names this module defines: functions, classes, assignments, attributes set on anything."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)  # dataclass(...) fields given by name, slots
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


#: Names public by design though they start with "_": namedtuple's API.
PUBLIC_BY_DESIGN = {"_replace", "_asdict", "_fields", "_make"}


def _private(name: str) -> bool:
    dunder = name.startswith("__") and name.endswith("__")
    return name.startswith("_") and not dunder and name not in PUBLIC_BY_DESIGN


def _own_object(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in {"self", "cls"}
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def private_reads() -> list[str]:
    found: list[str] = []
    for name, (path, tree) in _modules().items():
        own = _own_private_names(tree)
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            read: str | None = None
            if isinstance(node, ast.Attribute) and _private(node.attr) and not _own_object(node.value):
                read = node.attr if node.attr not in own else None
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "hasattr", "setattr"}
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
                and not _own_object(node.args[0])
            ):
                read = node.args[1].value if node.args[1].value not in own else None
            elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
                for alias in node.names:
                    if _private(alias.name):
                        read = alias.name
            if read is not None and (name, read) not in EXCEPTIONS:
                found.append(f"{where}:{getattr(node, 'lineno', 0)}: {ast.unparse(node)[:80]}")
    return found


def test_no_module_reads_another_modules_private_names() -> None:
    assert private_reads() == []


def test_at_most_five_exceptions_each_with_its_reason() -> None:
    assert len(EXCEPTIONS) <= 5
    assert all(reason.strip() for reason in EXCEPTIONS.values())


def test_no_module_over_400_lines_and_no_class_over_300() -> None:
    too_long: list[str] = []
    for _name, (path, tree) in _modules().items():
        where = path.relative_to(PACKAGE.parent)
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > 400:
            too_long.append(f"{where}: {lines} lines")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > 300:
                    too_long.append(f"{where}: class {node.name} {size} lines")
    assert too_long == []
