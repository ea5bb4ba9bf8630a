"""The MCP host configuration the README and the MCP tool page show (the same
one), run as a host runs it: its `command` and `args`, started by the official
SDK's stdio client; and the launch directory as the workspace when `--workspace`
is left out."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
import pytest

# Every case here starts processes of its own: slow (see tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (ROOT / "README.md", ROOT / "docs" / "mcp-tool.md")
PLACEHOLDER = "/path/to/project"
HANG_SECONDS = 30


def host_config(document: Path) -> dict[str, object]:
    """The `bashrpc` entry of the document's one `mcpServers` snippet."""
    blocks = re.findall(r"^```json\n(.*?)^```", document.read_text(), flags=re.M | re.S)
    snippets = [json.loads(block) for block in blocks if '"mcpServers"' in block]
    assert len(snippets) == 1, f"{document.name} shows one MCP host configuration"
    entry = snippets[0]["mcpServers"]["bashrpc"]
    assert isinstance(entry, dict) and set(entry) == {"command", "args"}
    return entry


def documented_host_config() -> dict[str, object]:
    """The configuration the documents show, the same in each."""
    configs = [host_config(document) for document in DOCUMENTS]
    assert all(config == configs[0] for config in configs), "the documents disagree"
    return configs[0]


def console_script(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    if not exe.exists():
        pytest.skip("console script not installed next to this interpreter")
    return str(exe)


def pwd_through_the_host(command: str, args: list[str], launch_dir: Path, home: Path) -> str:
    """Start the server as an MCP host would, and run `pwd` as a model's call."""
    pytest.importorskip("mcp")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=command,
        args=args,
        env={"PATH": os.environ["PATH"], "HOME": str(home), "XDG_STATE_HOME": str(home)},
        cwd=str(launch_dir),
    )
    said: list[str] = []

    async def main() -> None:
        with open(home / "server-stderr.log", "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as streams,
                ClientSession(*streams) as session,
            ):
                with anyio.fail_after(HANG_SECONDS):
                    init = await session.initialize()
                    assert init.server_info.name == "bashrpc"
                    done = await session.call_tool("bash", {"command": "pwd"})
                    assert not done.is_error
                    said.append(done.content[0].text)  # type: ignore[union-attr]

    anyio.run(main)
    return said[0]


def test_the_documented_host_config_serves_mcp_in_its_workspace(tmp_path: Path) -> None:
    entry = documented_host_config()
    assert entry["command"] == "bashrpc"
    args = entry["args"]
    assert isinstance(args, list) and PLACEHOLDER in args
    workspace = tmp_path / "project"
    workspace.mkdir()
    launched_in = tmp_path / "elsewhere"
    launched_in.mkdir()
    real_args = [str(workspace) if arg == PLACEHOLDER else arg for arg in args]
    said = pwd_through_the_host(console_script("bashrpc"), real_args, launched_in, tmp_path)
    assert said == f"{workspace}\n"


def test_without_a_workspace_flag_the_launch_directory_is_the_workspace(tmp_path: Path) -> None:
    launched_in = tmp_path / "launched"
    launched_in.mkdir()
    said = pwd_through_the_host(console_script("bashrpc"), [], launched_in, tmp_path)
    assert said == f"{launched_in}\n"
