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

# What every part may import besides its own row (docs/architecture.md says the same).
BASE = (
    "bashrpc.protocol",
    "bashrpc.server.clock",
    "bashrpc.server.errors",
    "bashrpc.server.log",
    "bashrpc.server.pulse",
    "bashrpc.server.transitions",
)
# The seam imports nothing of any implementation: its types are its own.
SEAM = (*BASE, "bashrpc.server.runtime.seam")
# The package map, and what each part may import: one source, the tree's table.
MAP = ROOT / "docs" / "architecture.md"
# A package's __init__ that is no row of the map imports nothing.
INITS = ("bashrpc", "bashrpc.server", "bashrpc.server.runtime")
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
    ("bashrpc.server.cli.main", "bashrpc.server.runtime.instance"): "the same",
    ("bashrpc.server.cli.main", "bashrpc.server.daemon.server"): "the same",
    **{
        ("bashrpc.server.cli.main", target): "serving stdio never pays for a subcommand's code"
        for target in (
            "bashrpc.server.cli.artifact",
            "bashrpc.server.cli.daemon",
            "bashrpc.server.cli.exec",
            "bashrpc.server.cli.record",
            "bashrpc.server.cli.replay",
            "bashrpc.server.daemon.tenants",
        )
    },
    (
        "bashrpc.server.runtime.network.gateways",
        "bashrpc.server.runtime.network.gateway",
    ): "a server whose sandboxes have no allowlist never loads the proxy",
    ("bashrpc.server.runtime.sandbox.bwrap", "bashrpc.server.runtime.network.gateway"): "the same",
    (
        "bashrpc.server.cli.daemon",
        "bashrpc.server.daemon.attach",
    ): "the bridge never pays for the server's",
    ("bashrpc.server.cli.daemon", "bashrpc.server.daemon.health"): "the same",
    ("bashrpc.server.cli.daemon", "bashrpc.server.daemon.server"): "the same",
    ("bashrpc.server.cli.daemon", "bashrpc.server.daemon.mcphttp"): "the same",
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


def _installed(token: str) -> str:
    """A name of the map's last column as installed."""
    if token == "server":
        return "bashrpc.server"
    if token == "protocol" or token.startswith("protocol."):
        return f"bashrpc.{token}"
    return f"bashrpc.server.{token}"


def package_map(text: str) -> dict[str, tuple[str, ...]]:
    """The rows of the tree's table: each part (as installed) and what it may import."""
    section = text.split("## The tree", 1)[1].split("\n## ", 1)[0]
    rules: dict[str, tuple[str, ...]] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        folder, _job, may = (cell.strip() for cell in line.strip().strip("|").split(" | "))
        names: list[str] = []
        for token in may.split(", "):
            if token == "base":
                names.extend(BASE)
            elif token != "nothing":
                names.append(_installed(token.strip("`")))
        path = folder.strip("`").rstrip("/")
        part = FOLDERS[path] if path in FOLDERS else module_name(ROOT / path)
        assert part not in rules, f"{folder} is two rows of the map"
        rules[part] = tuple(names)
    return rules


ALLOWED: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(INITS, ()),
    **package_map(MAP.read_text()),
}


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


def test_every_row_of_the_map_is_a_part_that_exists() -> None:
    rows = package_map(MAP.read_text())
    assert len(rows) > 20
    missing = [
        part for part in rows if not any(m == part or m.startswith(part + ".") for m in known)
    ]
    assert missing == []


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


def assert_acyclic(graph: dict[str, set[str]]) -> None:
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


def test_no_import_cycles() -> None:
    graph = {
        name: {t for t, _ in imports(name, path) if t in known and t != name}
        for name, path in modules().items()
    }
    # A package's __init__ is imported on the way to its modules; it imports none of them.
    assert_acyclic(graph)


def test_the_bench_has_no_import_cycle() -> None:
    """Counting the imports made for the type checker alone: a case module never
    needs the one that runs it."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "bench").glob("*.py")):
        targets = graph.setdefault(f"bench.{path.stem}", set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench."):
                targets.add(node.module or "")
    assert graph["bench.cases"], "the bench's modules import one another"
    assert_acyclic(graph)


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


def repeats_its_folder(stem: str, folder: str) -> bool:
    """Whether a module's name says its folder's name again: the same name, or the
    folder's name (or its singular) with more after it (`jobs/jobstate.py`). A
    folder's singular alone names its main thing (`jobs/job.py`); a folder's name
    under four letters is taken only whole (`cli/client.py`, `run/runners.py`)."""
    if stem == folder:
        return True
    if len(folder) < 4:
        return False
    singular = folder.removesuffix("s")
    return any(stem.startswith(name) and stem != name for name in {folder, singular})


def test_no_module_name_repeats_its_folders() -> None:
    """A reader finds a behaviour from the file list: `shell/protocol.py`, not
    `shell/shellproto.py`."""
    repeated = [
        str(path.relative_to(ROOT))
        for top in ("server", "protocol", "bench")
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.stem != "__init__" and repeats_its_folder(path.stem, path.parent.name)
    ]
    assert repeated == []


def test_the_folder_rule_tells_a_repeat_from_a_name() -> None:
    assert repeats_its_folder("shellproto", "shell")
    assert repeats_its_folder("jobstate", "jobs")
    assert repeats_its_folder("sandbox", "sandbox")
    assert repeats_its_folder("pty", "pty")
    assert not repeats_its_folder("job", "jobs")
    assert not repeats_its_folder("client", "cli")
    assert not repeats_its_folder("protocol", "shell")


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
