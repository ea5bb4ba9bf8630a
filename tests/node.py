"""Node packages for the tests (tests/node/package.json), from the npm registry.

Installed on first use into `$XDG_CACHE_HOME/bashrpc-tests/node-<hash>`, one
folder per content of package.json (so checkouts that list other packages never
share one), under a lock (test workers may ask at once), then reused.
"""

from __future__ import annotations

import fcntl
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
    if not placed.exists() or placed.read_bytes() != script.read_bytes():
        placed.write_bytes(script.read_bytes())
    return placed


def node_packages(package_json: Path = PACKAGE_JSON) -> Path:
    """The folder holding `package_json` (as its package.json) and its
    node_modules, installed."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for this client")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    manifest = package_json.read_bytes()
    root = cache / "bashrpc-tests" / f"node-{hashlib.sha256(manifest).hexdigest()[:16]}"
    root.mkdir(parents=True, exist_ok=True)
    ready = root / "ready"
    with open(root / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
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


def node_modules() -> Path:
    """The installed `node_modules`, for NODE_PATH (CommonJS scripts)."""
    return node_packages() / "node_modules"
