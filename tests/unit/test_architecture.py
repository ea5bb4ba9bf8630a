"""The shape of `server/`: imports point one way, no cycles, small modules.

Read from the source with `ast`, so every import counts, including those
inside functions.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Big enough for a family of small types or one job's steps in one file; a
# module past it does two jobs.
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

# What each part of the runtime may import from this project (prefixes).
BASE = (
    "bashrpc.protocol",
    "bashrpc.server.errors",
    "bashrpc.server.log",
    "bashrpc.server.pulse",
    "bashrpc.server.transitions",
)
# The seam imports nothing of any implementation: its types are its own.
SEAM = (*BASE, "bashrpc.server.runtime.seam")
ALLOWED: dict[str, tuple[str, ...]] = {
    "bashrpc.protocol": ("bashrpc.protocol",),
    "bashrpc.server": (),
    "bashrpc": (),
    "bashrpc.__main__": ("bashrpc.server.cli",),
    # The pytest plugin: a client on the protocol, a server as the CLI runs one.
    "bashrpc.testing": ("bashrpc.protocol", "bashrpc.server.cli"),
    "bashrpc.server.errors": (),
    "bashrpc.server.log": ("bashrpc.protocol.messages", "bashrpc.server.fdio"),
    "bashrpc.server.fdio": (),
    "bashrpc.server.pulse": (),
    "bashrpc.server.transitions": (),
    "bashrpc.server.genfiles": (),
    "bashrpc.server.schemagen": ("bashrpc.protocol", "bashrpc.server.genfiles"),
    # The reference pages: from the protocol's types and the CLI's parser.
    "bashrpc.server.mdtable": (),
    "bashrpc.server.clidocs": ("bashrpc.server.cli.main", "bashrpc.server.mdtable"),
    "bashrpc.server.docsgen": (
        "bashrpc.protocol",
        "bashrpc.server.genfiles",
        "bashrpc.server.clidocs",
        "bashrpc.server.mdtable",
    ),
    "bashrpc.server.settings": (
        *BASE,
        "bashrpc.server.output",
        # What `[sandbox.network]` may list, checked as the file is read.
        "bashrpc.server.runtime.network.rules",
        "bashrpc.server.runtime.seam.egress",
    ),
    "bashrpc.server.output": (*BASE, "bashrpc.server.output"),
    "bashrpc.server.observe": (*BASE, "bashrpc.server.observe"),
    # The runtime's folders, each with one job; imports point down this list's
    # order of dependence, never back up to `runtime.runtime`, which joins them.
    "bashrpc.server.runtime": (),
    "bashrpc.server.runtime.containment": (*BASE, "bashrpc.server.runtime.containment"),
    "bashrpc.server.runtime.seam": SEAM,
    # The sandbox's way out: the allowlist's rules, the proxy's parsers (pure), the
    # proxy a session's sandboxes reach, and the handoff of their listeners.
    "bashrpc.server.runtime.network": (
        *BASE,
        "bashrpc.server.fdio",
        "bashrpc.server.runtime.seam.egress",
        "bashrpc.server.runtime.network",
        "bashrpc.server.observe.stats",
    ),
    # What a policy means on a filesystem; the policy itself is the seam's.
    "bashrpc.server.runtime.sandbox": (
        *BASE,
        "bashrpc.server.fdio",
        "bashrpc.server.runtime.seam.policy",
        "bashrpc.server.runtime.seam.egress",
        "bashrpc.server.runtime.sandbox",
        # An allowlist's sandbox hands its listener to the session's proxy.
        "bashrpc.server.runtime.network",
    ),
    "bashrpc.server.runtime.shell": (
        *BASE,
        "bashrpc.server.fdio",
        "bashrpc.server.runtime.seam",
        "bashrpc.server.runtime.sandbox",
        "bashrpc.server.runtime.containment",
        "bashrpc.server.runtime.shell",
    ),
    "bashrpc.server.runtime.pty": (
        *BASE,
        "bashrpc.server.fdio",
        "bashrpc.server.runtime.seam",
        "bashrpc.server.runtime.sandbox",
        "bashrpc.server.runtime.containment",
        "bashrpc.server.runtime.pty",
    ),
    "bashrpc.server.runtime.local": (
        *BASE,
        "bashrpc.server.fdio",
        "bashrpc.server.runtime.seam",
        "bashrpc.server.runtime.shell",
        "bashrpc.server.runtime.pty",
        "bashrpc.server.runtime.sandbox",
        "bashrpc.server.runtime.containment",
        "bashrpc.server.runtime.local",
        "bashrpc.server.observe.stats",
    ),
    "bashrpc.server.runtime.sessions": (
        *BASE,
        "bashrpc.server.settings",
        "bashrpc.server.runtime.seam",
        "bashrpc.server.runtime.sandbox.sandbox",
        "bashrpc.server.runtime.sessions",
    ),
    "bashrpc.server.runtime.run": (
        *BASE,
        "bashrpc.server.runtime.seam",
        "bashrpc.server.runtime.sessions",
        "bashrpc.server.runtime.run",
    ),
    # Background jobs: programs the backend starts (`Backend.job`), their output
    # kept in a ring and an artifact; never a process of their own.
    "bashrpc.server.runtime.jobs": (
        *BASE,
        "bashrpc.server.settings",
        "bashrpc.server.output",
        "bashrpc.server.runtime.seam",
        "bashrpc.server.runtime.jobs",
    ),
    "bashrpc.server.runtime.runtime": (
        *BASE,
        "bashrpc.server.settings",
        "bashrpc.server.output",
        "bashrpc.server.runtime",
    ),
    # The runtime as the runtime, its sessions and runners, and the seam: never
    # a backend, a shell, a PTY or containment; the sandbox only as its policy.
    "bashrpc.server.services": (
        *BASE,
        "bashrpc.server.settings",
        "bashrpc.server.services",
        "bashrpc.server.runtime.runtime",
        "bashrpc.server.runtime.run",
        "bashrpc.server.runtime.sessions",
        "bashrpc.server.runtime.seam",
        "bashrpc.server.runtime.sandbox.sandbox",
        "bashrpc.server.runtime.jobs",
        "bashrpc.server.output",
        "bashrpc.server.observe",
    ),
    # The model's tool call: on top of the command service, which never imports it.
    "bashrpc.server.services.tool": (
        *BASE,
        "bashrpc.server.settings",
        "bashrpc.server.output",
        "bashrpc.server.services",
        "bashrpc.server.runtime.seam",
        "bashrpc.server.runtime.sessions",
        "bashrpc.server.runtime.jobs.jobs",
    ),
    "bashrpc.server.wire": (*BASE, "bashrpc.server.fdio", "bashrpc.server.wire"),
    "bashrpc.server.connection": (*BASE, "bashrpc.server.settings", "bashrpc.server.wire"),
    "bashrpc.server.surfaces": (
        *BASE,
        "bashrpc.server.settings",
        "bashrpc.server.services",
        "bashrpc.server.connection",
        "bashrpc.server.wire.registry",
        "bashrpc.server.observe.stats",
    ),
    "bashrpc.server.serve": ("bashrpc.protocol", "bashrpc.server"),
    "bashrpc.server.daemon": ("bashrpc.protocol", "bashrpc.server"),
    "bashrpc.server.cli": (
        *BASE,
        "bashrpc.server.settings",
        "bashrpc.server.cli",
        "bashrpc.server.output.artifacts",
        "bashrpc.server.output.artifactroot",
        "bashrpc.server.runtime.run.env",
        "bashrpc.server.serve",
        "bashrpc.server.runtime.runtime",
        "bashrpc.server.daemon",
    ),
}
# pytest loads the plugin in every run of a project that has bashrpc installed.
_PLUGIN_LOADS_EVERYWHERE = "a test run that never uses the plugin imports nothing more"
# Inside a prefix a folder may import, the folders that sit on top of it.
ABOVE: dict[str, tuple[str, ...]] = {
    "bashrpc.server.services": ("bashrpc.server.services.tool",),
}
# Imports inside a function, each with its reason; any other is a dodged cycle.
LATE_IMPORTS = {
    **{
        ("bashrpc.testing", target): _PLUGIN_LOADS_EVERYWHERE
        for target in (
            "bashrpc.protocol.client",
            "bashrpc.protocol.methods",
            "bashrpc.protocol.transcript",
            "bashrpc.server.cli.pipeserver",
            "bashrpc.server.cli.runroot",
            "bashrpc.server.cli.replay",
            "bashrpc.server.cli.replayrun",
        )
    },
    (
        "bashrpc.server.cli.main",
        "bashrpc.server.serve",
    ): "exec and --help never pay for the server's imports",
    ("bashrpc.server.cli.main", "bashrpc.server.runtime.runtime"): "the same",
    ("bashrpc.server.cli.main", "bashrpc.server.daemon.daemon"): "the same",
    (
        "bashrpc.server.cli.daemon",
        "bashrpc.server.daemon.attach",
    ): "the bridge never pays for the server's",
    ("bashrpc.server.cli.daemon", "bashrpc.server.daemon.health"): "the same",
    (
        "bashrpc.server.cli.daemon",
        "bashrpc.server.daemon.websocket",
    ): "websockets is an optional extra",
}


# The folders' own names: nothing may import them, since they are not installed.
LEGACY = ("server", "protocol")
# Each folder of the repository and the package it installs as (pyproject.toml).
FOLDERS = {"server/package": "bashrpc", "server": "bashrpc.server", "protocol": "bashrpc.protocol"}


def module_name(path: Path) -> str:
    """The installed name of a source file: the longest folder mapping wins."""
    relative = path.relative_to(ROOT)
    folder = max((f for f in FOLDERS if relative.is_relative_to(f)), key=len)
    parts = [*FOLDERS[folder].split("."), *relative.relative_to(folder).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for folder in ("server", "protocol")
        for path in sorted((ROOT / folder).rglob("*.py"))
    }


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
        (target, inner) for target, inner in found if target.split(".")[0] in ("bashrpc", *LEGACY)
    ]


known = set(modules())


def rule_for(name: str) -> tuple[str, tuple[str, ...]]:
    matches = [
        key
        for key in ALLOWED
        if name == key or (name.startswith(key + ".") and key not in ("bashrpc", "bashrpc.server"))
    ]
    assert matches, f"{name} belongs to no part of the architecture"
    key = max(matches, key=len)
    return key, ALLOWED[key]


def allowed(target: str, prefixes: tuple[str, ...]) -> bool:
    return any(target == p or target.startswith(p + ".") for p in prefixes)


def test_imports_point_one_way() -> None:
    wrong = []
    for name, path in modules().items():
        key, prefixes = rule_for(name)
        for target, _inner in imports(name, path):
            if not allowed(target, prefixes) or allowed(target, ABOVE.get(key, ())):
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_surfaces_never_import_each_other() -> None:
    surfaces = {n: p for n, p in modules().items() if n.startswith("bashrpc.server.surfaces.")}
    wrong = [
        f"{name} imports {target}"
        for name, path in surfaces.items()
        for target, _ in imports(name, path)
        if target.startswith("bashrpc.server.surfaces") and target != name
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
        if not name.startswith("bashrpc.server"):
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


def test_nothing_imports_the_folders_by_their_own_names() -> None:
    """`server` and `protocol` exist only in the checkout; installed, they are `bashrpc.*`."""
    wrong = []
    for folder in ("server", "protocol", "tests", "bench", "deploy"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                wrong += [
                    f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in LEGACY
                ]
    assert wrong == []


def test_every_package_folder_is_installed() -> None:
    """pyproject.toml lists the packages by hand (the folders are remapped): none is missed."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {name: folder for folder, name in FOLDERS.items()}
    folders = {
        module_name(p) for f in ("server", "protocol") for p in (ROOT / f).rglob("__init__.py")
    }
    assert sorted(setuptools["packages"]) == sorted(folders)


def test_the_fake_backend_needs_no_backend_of_the_server() -> None:
    """A backend is the seam's to define: the tests' one imports the seam alone."""
    path = ROOT / "tests" / "fakebackend.py"
    wrong = [
        target
        for target, _ in imports("tests.fakebackend", path)
        if not allowed(target, SEAM) and not target.startswith("tests.")
    ]
    assert wrong == []
