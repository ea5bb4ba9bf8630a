"""Node packages for the tests (tests/node/package.json), installed from the
registry into the user's cache on first use, and reused while each is there."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGES = Path(__file__).parent / "node" / "package.json"
# Read once, at import: a test's private HOME must not move the cache.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bashrpc-tests" / "node"
INSTALL_SECONDS = 600


def node_modules() -> Path:
    """The installed `node_modules`, for NODE_PATH; a test without node or npm skips.

    Test workers may ask at once: one installs, under a lock, the others wait."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        pytest.skip("node and npm are not installed")
    modules = CACHE / "node_modules"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed(modules):
            shutil.copyfile(PACKAGES, CACHE / "package.json")
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--silent"],
                cwd=CACHE,
                check=True,
                stdin=subprocess.DEVNULL,
                timeout=INSTALL_SECONDS,
            )
    return modules


def _installed(modules: Path) -> bool:
    """Whether every package listed is there, at the version listed."""
    listed: dict[str, str] = json.loads(PACKAGES.read_text())["dependencies"]
    for name, version in listed.items():
        manifest = modules / name / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text()).get("version") != version:
            return False
    return True
