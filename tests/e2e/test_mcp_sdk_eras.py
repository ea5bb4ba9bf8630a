"""The official Python SDK 2.x's high-level client in both eras over stdio: `auto`
probes server/discover and speaks 2026-07-28 without initialize; `legacy` does
the initialize handshake (2025-11-25). Each lists, calls with progress, cancels
a call and reads an artifact as a resource."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import SUPPORTED_PROTOCOL_VERSIONS
from bashrpc.server.services.tool.meta import RESOURCE_LINK_REVISIONS
from tests.e2e.test_mcp_sdk import (
    CLIENTS,
    HANG_SECONDS,
    give_up_on_a_call,
    params,
    run_client,
    run_mcp1_client,
    text,
)
from tests.node import node_script

pytestmark = pytest.mark.slow


async def _script(client: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {"version": client.protocol_version}
    tools = await client.list_tools()
    seen["tools"] = [t.name for t in tools.tools]
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    called = await client.call_tool(
        "bash", {"command": "echo one; sleep 0.3; echo two"}, progress_callback=on_progress
    )
    seen["text"], seen["progress"] = text(called), progress
    await give_up_on_a_call(client)
    seen["after_cancel"] = text(await client.call_tool("bash", {"command": "echo healthy"}))
    big = await client.call_tool("bash", {"command": "seq 1 100000"})
    uri = big.structured_content["artifactUri"]
    read = await client.read_resource(uri)
    seen["read"] = read.contents[0].text
    listed = await client.list_resources()
    seen["listed"] = uri in {str(r.uri) for r in listed.resources}
    return seen


def run_python_client(tmp_path: Path, mode: str) -> dict[str, Any]:
    pytest.importorskip("mcp")
    from mcp import Client

    errors: list[object] = []

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            errors.append(message)

    async def main() -> dict[str, Any]:
        with anyio.fail_after(HANG_SECONDS):
            async with Client(params(tmp_path), mode=mode, message_handler=on_message) as client:
                return await _script(client)

    seen = anyio.run(main)
    assert errors == []
    return seen


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_the_sdk_client_in_each_era(tmp_path: Path, mode: str, version: str) -> None:
    seen = run_python_client(tmp_path, mode)
    assert seen["version"] == version
    assert seen["tools"] == ["bash", "bash_output", "bash_kill", "bash_input"]
    assert seen["text"] == "one\ntwo\n" and seen["progress"]
    assert seen["after_cancel"] == f"{messages.SHELL_RESTARTED}\nhealthy\n"
    assert seen["read"] == "".join(f"{i}\n" for i in range(1, 100001))
    assert seen["listed"]


TS_REVISIONS_SCRIPT = CLIENTS / "ts_revisions.mjs"


@pytest.mark.parametrize("revision", SUPPORTED_PROTOCOL_VERSIONS)
def test_the_typescript_sdk_at_each_revision(tmp_path: Path, revision: str) -> None:
    report = run_client(["node", str(node_script(TS_REVISIONS_SCRIPT))], tmp_path, revision)
    assert report["raised"] is None and report["errors"] == []
    assert report["tools"] == ["bash", "bash_output", "bash_kill", "bash_input"]
    assert report["text"] == "one\ntwo\n" and report["progress"] > 0
    assert "test" in report["cancelled"]
    assert report["next"] == f"{messages.SHELL_RESTARTED}\nhealthy\n"
    links = ["resource_link"] if revision in RESOURCE_LINK_REVISIONS else []
    assert report["contentTypes"] == ["text", *links]
    assert report["readLength"] == len("".join(f"{i}\n" for i in range(1, 100001)))
    assert report["listed"] is True


MCP1_REVISIONS_SCRIPT = CLIENTS / "mcp1_revisions.py"


@pytest.mark.parametrize("revision", SUPPORTED_PROTOCOL_VERSIONS)
def test_the_python_1x_sdk_at_each_revision(tmp_path: Path, revision: str) -> None:
    report = run_mcp1_client(MCP1_REVISIONS_SCRIPT, tmp_path, revision)
    assert report["raised"] is None and report["errors"] == [] and report["log"] == []
    assert report["version"] == revision
    assert report["tools"] == ["bash", "bash_output", "bash_kill", "bash_input"]
    assert report["text"] == "one\ntwo\n" and report["progress"] > 0
    assert report["next"] == f"{messages.SHELL_RESTARTED}\nhealthy\n"
    links = ["resource_link"] if revision in RESOURCE_LINK_REVISIONS else []
    assert report["content_types"] == ["text", *links]
    assert report["read_length"] == len("".join(f"{i}\n" for i in range(1, 100001)))
    assert report["listed"] is True
