"""The shape of `server/`: imports point one way, no cycles, small modules.

Read from the source with `ast`, so every import counts, including those
inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60

# What each part of the runtime may import from this project (prefixes).
BASE = ("protocol", "server.errors", "server.log")
ALLOWED: dict[str, tuple[str, ...]] = {
    "protocol": ("protocol",),
    "server": (),
    "server.__main__": ("server.cli",),
    "server.errors": (),
    "server.log": (),
    "server.fdio": (),
    "server.schemagen": ("protocol",),
    "server.settings": (*BASE, "server.output"),
    "server.output": (*BASE, "server.output"),
    "server.runtime": (*BASE, "server.fdio", "server.settings", "server.runtime", "server.output"),
    "server.services": (
        *BASE,
        "server.settings",
        "server.services",
        "server.runtime",
        "server.output",
    ),
    "server.wire": (*BASE, "server.fdio", "server.wire"),
    "server.connection": (*BASE, "server.settings", "server.wire"),
    "server.surfaces": (
        *BASE,
        "server.settings",
        "server.services",
        "server.connection",
        "server.wire.registry",
    ),
    "server.serve": ("protocol", "server"),
    "server.daemon": ("protocol", "server"),
    "server.cli": (
        *BASE,
        "server.settings",
        "server.cli",
        "server.output.artifacts",
        "server.output.artifactroot",
        "server.runtime.env",
        "server.serve",
        "server.runtime.runtime",
        "server.daemon",
    ),
}
# Imports inside a function, each with its reason; any other is a dodged cycle.
LATE_IMPORTS = {
    ("server.cli.main", "server.serve"): "exec and --help never pay for the server's imports",
    ("server.cli.main", "server.runtime.runtime"): "the same",
    ("server.cli.main", "server.daemon.daemon"): "the same",
    ("server.cli.daemon", "server.daemon.attach"): "the bridge never pays for the server's",
    ("server.cli.daemon", "server.daemon.websocket"): "websockets is an optional extra",
}


def modules() -> dict[str, Path]:
    found = {}
    for package in ("protocol", "server"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(name: str, path: Path) -> list[tuple[str, bool]]:
    """(module imported, whether inside a function) for project imports."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, inner) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1])
                    base = f"{base}.{child.module}" if child.module else base
                for alias in child.names:
                    candidate = f"{base}.{alias.name}"
                    found.append((candidate if candidate in known else base, inner))
            visit(child, inner)

    visit(tree, False)
    return [
        (target, inner) for target, inner in found if target.split(".")[0] in ("protocol", "server")
    ]


known = set(modules())


def rule_for(name: str) -> tuple[str, tuple[str, ...]]:
    matches = [
        key
        for key in ALLOWED
        if name == key or (name.startswith(key + ".") and key not in ("server",))
    ]
    assert matches, f"{name} belongs to no part of the architecture"
    key = max(matches, key=len)
    return key, ALLOWED[key]


def allowed(target: str, prefixes: tuple[str, ...]) -> bool:
    return any(target == p or target.startswith(p + ".") for p in prefixes)


def test_imports_point_one_way() -> None:
    wrong = []
    for name, path in modules().items():
        _key, prefixes = rule_for(name)
        for target, _inner in imports(name, path):
            if not allowed(target, prefixes):
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_surfaces_never_import_each_other() -> None:
    surfaces = {n: p for n, p in modules().items() if n.startswith("server.surfaces.")}
    wrong = [
        f"{name} imports {target}"
        for name, path in surfaces.items()
        for target, _ in imports(name, path)
        if target.startswith("server.surfaces") and target != name
    ]
    assert wrong == []


def test_no_import_cycles() -> None:
    graph = {
        name: {t for t, _ in imports(name, path) if t in known and t != name}
        for name, path in modules().items()
    }
    # A package's __init__ is imported on the way to its modules; it imports none of them.
    done: set[str] = set()
    stack: list[str] = []

    def walk(node: str) -> None:
        if node in stack:
            raise AssertionError(
                "import cycle: " + " -> ".join([*stack[stack.index(node) :], node])
            )
        if node in done:
            return
        stack.append(node)
        for target in graph[node]:
            walk(target)
        stack.pop()
        done.add(node)

    for node in graph:
        walk(node)


def test_no_import_hides_in_a_function_without_a_reason() -> None:
    late = [
        (name, target)
        for name, path in modules().items()
        for target, inner in imports(name, path)
        if inner and (name, target) not in LATE_IMPORTS
    ]
    assert late == []


def test_modules_and_functions_stay_small() -> None:
    too_big = []
    for name, path in modules().items():
        if not name.startswith("server"):
            continue
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            too_big.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_big.append(f"{name}.{node.name}: {length} lines")
    assert too_big == []
