"""The official SDKs' clients at every MCP revision each speaks, over stdio and
over the daemon's Streamable HTTP listener: the Python SDK 2.x (`legacy` pinned
to each `initialize` revision, and `auto`, which probes server/discover and
speaks 2026-07-28 without initialize), the Python SDK 1.x and the TypeScript SDK
(each `initialize` revision). Each lists, calls with progress, cancels a call
(which must get no answer an SDK would report), calls again and reads an
artifact back as a resource."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.icons import ICON_REVISIONS
from bashrpc.protocol.mcp import MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS
from bashrpc.server.services.tool.meta import RESOURCE_LINK_REVISIONS
from tests.daemon import DaemonProcess
from tests.e2e.test_mcp_sdk import (
    CLIENTS,
    HANG_SECONDS,
    McpErrors,
    give_up_on_a_call,
    params,
    run_client,
    run_mcp1_client,
    text,
)
from tests.node import node_script
from tests.websocket import listening_url

pytestmark = pytest.mark.slow

BIG_OUTPUT = "".join(f"{i}\n" for i in range(1, 100001))


class Target(msgspec.Struct, frozen=True):
    """Where the client connects: a bashrpc of its own on stdio (`url` None), or
    the daemon's Streamable HTTP listener at `url`."""

    url: str | None


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    if request.param == "stdio":
        yield Target(url=None)
        return
    daemon = DaemonProcess("--listen", "http://127.0.0.1:0/mcp", tmp=tmp_path)
    try:
        yield Target(url=listening_url(daemon, "http"))
    finally:
        daemon.kill()


async def _script(client: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {"version": client.protocol_version}
    tools = await client.list_tools()
    seen["tools"] = [t.name for t in tools.tools]
    seen["tool_icons"] = [bool(t.icons) for t in tools.tools]
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
    seen["content_types"] = [content.type for content in big.content]
    uri = big.structured_content["artifactUri"]
    read = await client.read_resource(uri)
    seen["read"] = read.contents[0].text
    listed = await client.list_resources()
    seen["listed"] = uri in {str(r.uri) for r in listed.resources}
    return seen


def run_python_client(tmp_path: Path, target: Target, mode: str) -> dict[str, Any]:
    """The 2.x SDK's `Client` in `mode` through the script; the SDK must report and
    log no error."""
    pytest.importorskip("mcp")
    import logging

    from mcp import Client

    errors: list[object] = []
    logged = McpErrors()
    mcp_log = logging.getLogger("mcp")
    mcp_log.addHandler(logged)

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            errors.append(message)

    async def main() -> dict[str, Any]:
        server = params(tmp_path) if target.url is None else target.url
        with anyio.fail_after(HANG_SECONDS):
            async with Client(server, mode=mode, message_handler=on_message) as client:
                return await _script(client)

    try:
        seen = anyio.run(main)
    finally:
        mcp_log.removeHandler(logged)
    assert errors == [] and logged.records == []
    return seen


def expected_content(revision: str) -> list[str]:
    """The content of a result that names an artifact, as `revision` has it."""
    return ["text", "resource_link"] if revision in RESOURCE_LINK_REVISIONS else ["text"]


@pytest.mark.parametrize("revision", [*SUPPORTED_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS])
def test_the_python_2x_sdk_at_each_revision(
    tmp_path: Path, target: Target, revision: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if revision in MODERN_PROTOCOL_VERSIONS:
        mode = "auto"  # probes server/discover, and speaks the newest revision offered
    else:
        # What the handshake asks for: read when initialize is sent.
        monkeypatch.setattr("mcp.client.session.LATEST_HANDSHAKE_VERSION", revision)
        mode = "legacy"
    seen = run_python_client(tmp_path, target, mode)
    assert seen["version"] == revision
    assert seen["tools"] == ["bash", "bash_output", "bash_kill", "bash_input"]
    assert seen["tool_icons"] == [revision in ICON_REVISIONS] * 4
    assert seen["text"] == "one\ntwo\n" and seen["progress"]
    assert seen["after_cancel"] == f"{messages.SHELL_RESTARTED}\nhealthy\n"
    assert seen["content_types"] == expected_content(revision)
    assert seen["read"] == BIG_OUTPUT
    assert seen["listed"]


TS_SCRIPT = CLIENTS / "ts_session.mjs"


@pytest.mark.parametrize("revision", SUPPORTED_PROTOCOL_VERSIONS)
def test_the_typescript_sdk_at_each_revision(tmp_path: Path, target: Target, revision: str) -> None:
    report = run_client(["node", str(node_script(TS_SCRIPT))], tmp_path, revision, url=target.url)
    assert report["raised"] is None and report["errors"] == []
    assert report["version"] == revision
    assert report["icons"] == (1 if revision in ICON_REVISIONS else 0)
    assert report["tools"] == ["bash", "bash_output", "bash_kill", "bash_input"]
    assert report["text"] == "one\ntwo\n" and report["progress"] > 0
    assert "test" in report["cancelled"]
    assert report["next"] == f"{messages.SHELL_RESTARTED}\nhealthy\n"
    assert report["contentTypes"] == expected_content(revision)
    assert report["readLength"] == len(BIG_OUTPUT)
    assert report["listed"] is True


MCP1_REVISIONS_SCRIPT = CLIENTS / "mcp1_revisions.py"


@pytest.mark.parametrize("revision", SUPPORTED_PROTOCOL_VERSIONS)
def test_the_python_1x_sdk_at_each_revision(tmp_path: Path, target: Target, revision: str) -> None:
    report = run_mcp1_client(MCP1_REVISIONS_SCRIPT, tmp_path, revision, url=target.url)
    assert report["raised"] is None and report["errors"] == [] and report["log"] == []
    assert report["version"] == revision
    assert report["tools"] == ["bash", "bash_output", "bash_kill", "bash_input"]
    assert report["text"] == "one\ntwo\n" and report["progress"] > 0
    assert report["next"] == f"{messages.SHELL_RESTARTED}\nhealthy\n"
    assert report["content_types"] == expected_content(revision)
    assert report["read_length"] == len(BIG_OUTPUT)
    assert report["listed"] is True
