"""Node packages for the tests (tests/node/package.json), from the npm registry.

Installed on first use into `$XDG_CACHE_HOME/bashrpc-tests/node`, then reused
while package.json is unchanged, so the one test command needs no setup step.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE_JSON = Path(__file__).parent / "node" / "package.json"
# npm fetches a few megabytes; the bound only catches a hang.
INSTALL_BOUND_SECONDS = 600


def node_script(script: Path) -> Path:
    """`script` placed beside the installed packages, where its imports resolve (ES
    modules ignore NODE_PATH); skips the test when node is absent."""
    placed = node_packages() / script.name
    placed.write_bytes(script.read_bytes())
    return placed


def node_packages() -> Path:
    """The folder holding package.json and its node_modules, installed."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for this client")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    root = cache / "bashrpc-tests" / "node"
    manifest = PACKAGE_JSON.read_bytes()
    ready = root / f"ready-{hashlib.sha256(manifest).hexdigest()[:16]}"
    if not ready.exists():
        root.mkdir(parents=True, exist_ok=True)
        (root / "package.json").write_bytes(manifest)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent"],
            cwd=root,
            check=True,
            stdin=subprocess.DEVNULL,
            timeout=INSTALL_BOUND_SECONDS,
        )
        ready.touch()
    return root
