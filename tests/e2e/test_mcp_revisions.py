"""What each MCP revision gets beyond the common surface: the tools' metadata,
resource links (2025-06-18 on), bad arguments as tool errors (2025-11-25 on)."""

from __future__ import annotations

import base64
from typing import Any
from xml.etree import ElementTree

import msgspec
import pytest

from bashrpc.protocol import icons, messages
from bashrpc.protocol.client import result_of
from bashrpc.protocol.envelope import ServerMessage
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    BASH_TOOL,
    LATEST_PROTOCOL_VERSION,
    PROTOCOL_VERSION_KEY,
    SUPPORTED_PROTOCOL_VERSIONS,
    CallToolResult,
    InitializeParams,
    InitializeResult,
    ResourceLink,
    TextContent,
    ToolAnnotations,
    ToolsListResult,
)
from bashrpc.server.services.tool import jobtools
from tests.conftest import SpawnInProcess
from tests.e2e.test_tools import call_tool, structured
from tests.inprocess import InProcessServer
from tests.rpc import RpcClient

LONG = "seq 1 200000"


def wire(reply: ServerMessage) -> Any:
    """A result as JSON, field names as the client reads them."""
    return msgspec.json.decode(reply.result)


def initialize_at(server: RpcClient, revision: str) -> InitializeResult:
    params = InitializeParams(protocol_version=revision)
    return server.typed(InitializeResult, "initialize", params)


def test_every_released_revision_through_initialize(server: InProcessServer) -> None:
    assert SUPPORTED_PROTOCOL_VERSIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    for revision in SUPPORTED_PROTOCOL_VERSIONS:
        assert initialize_at(server, revision).protocol_version == revision
    assert initialize_at(server, "2099-01-01").protocol_version == LATEST_PROTOCOL_VERSION
    assert LATEST_PROTOCOL_VERSION == "2025-11-25"


def test_tools_have_titles_and_annotations_in_a_fixed_order(server: InProcessServer) -> None:
    first = server.typed(ToolsListResult, "tools/list").tools
    again = server.typed(ToolsListResult, "tools/list").tools
    assert first == again
    assert [(t.name, t.title) for t in first] == [
        ("bash", messages.BASH_TOOL_TITLE),
        ("bash_output", messages.BASH_OUTPUT_TOOL_TITLE),
        ("bash_kill", messages.BASH_KILL_TOOL_TITLE),
        ("bash_input", messages.BASH_INPUT_TOOL_TITLE),
    ]
    bash, output, kill, answer = first
    # No sandbox: a command reaches the network.
    assert bash.annotations == ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
    )
    assert output.annotations is not None and output.annotations.read_only_hint
    assert kill.annotations is not None and kill.annotations.destructive_hint
    # What a program does with an answer is its own, and typing twice types twice.
    assert answer.annotations == ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
    )
    assert answer.input_schema["required"] == ["terminal_id", "text"]
    raw = wire(server.call_raw("tools/list", {}))
    assert raw["tools"][0]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }


@pytest.mark.parametrize(
    ("sandbox", "open_world"),
    [
        ('mode = "workspace-write"\n', False),
        ('mode = "workspace-write"\nnetwork = true\n', True),
        ('mode = "read-only"\n', False),
        ('mode = "full"\n', True),
    ],
)
def test_open_world_follows_the_network_policy(
    spawn: SpawnInProcess, sandbox: str, open_world: bool
) -> None:
    server = spawn(f"[sandbox]\n{sandbox}")
    bash = server.typed(ToolsListResult, "tools/list").tools[0]
    assert bash.annotations is not None
    assert bash.annotations.open_world_hint is open_world


def test_an_artifact_is_also_a_resource_link_from_2025_06_18(server: InProcessServer) -> None:
    for revision in ("2025-11-25", "2025-06-18"):
        initialize_at(server, revision)
        result = call_tool(server, LONG)
        uri = structured(result).artifact_uri
        assert uri is not None and uri in result.text
        text, link = result.content
        assert isinstance(text, TextContent) and isinstance(link, ResourceLink)
        artifact = uri.removeprefix("artifact://")
        assert link.uri == uri and link.mime_type == "text/plain"
        assert link.name == messages.ARTIFACT_LINK_NAME.format(id=artifact)
        raw = wire(
            server.call_raw("tools/call", {"name": BASH_TOOL, "arguments": {"command": LONG}})
        )
        assert [c["type"] for c in raw["content"]] == ["text", "resource_link"]
    # A short output names no artifact, so it has no link.
    assert [type(c) for c in call_tool(server, "echo hi").content] == [TextContent]


def test_older_revisions_get_the_text_alone(server: InProcessServer) -> None:
    for revision in ("2025-03-26", "2024-11-05"):
        initialize_at(server, revision)
        result = call_tool(server, LONG)
        assert structured(result).artifact_uri is not None
        assert [type(c) for c in result.content] == [TextContent]


def test_bad_arguments_are_a_tool_error_from_2025_11_25(server: InProcessServer) -> None:
    bad = {"name": BASH_TOOL, "arguments": {"command": 1}}
    initialize_at(server, "2025-06-18")
    error = server.error_raw("tools/call", bad)
    assert error.code == ErrorCode.INVALID_PARAMS and "command" in error.data
    initialize_at(server, "2025-11-25")
    result = result_of(server.call_raw("tools/call", bad), CallToolResult)
    assert result.is_error
    detail = "arguments: Expected `str`, got `int` - at `$.command`"
    assert result.text == messages.INVALID_TOOL_ARGUMENTS.format(tool="bash", detail=detail)
    # An unknown tool stays a protocol error: there is no tool to answer.
    error = server.error_raw("tools/call", {"name": "python", "arguments": {}})
    assert error.code == ErrorCode.INVALID_PARAMS


def test_the_server_and_its_tools_show_an_icon_from_2025_11_25(server: InProcessServer) -> None:
    """2025-11-25 added icons: a client of it, or of 2026-07-28 (in `server/discover`
    and `tools/list`), gets the SVG; an older client's schema has no such field."""
    for revision, shown in (("2025-11-25", True), ("2025-06-18", False), ("2024-11-05", False)):
        initialized = wire(server.call_raw("initialize", {"protocolVersion": revision}))
        assert ("icons" in initialized["serverInfo"]) is shown
        listed = wire(server.call_raw("tools/list", {}))["tools"]
        assert [("icons" in tool) for tool in listed] == [shown] * (1 + len(jobtools.TOOLS))
    [icon] = initialize_at(server, "2025-11-25").server_info.icons or []
    assert icon.mime_type == icons.MIME_TYPE and icon.sizes == ["any"]
    media, _, encoded = icon.src.partition(";base64,")
    assert media == f"data:{icons.MIME_TYPE}"
    svg = ElementTree.fromstring(base64.b64decode(encoded))
    # Shapes only: nothing a client would run or fetch.
    kinds = {element.tag.rpartition("}")[2] for element in svg.iter()}
    assert kinds == {"svg", "rect", "path"}
    assert not any(k.startswith("on") or "href" in k for e in svg.iter() for k in e.attrib)
    modern_meta = {"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28"}}
    discovered = wire(server.call_raw("server/discover", modern_meta))
    assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["icons"] == [
        {"src": icon.src, "mimeType": icons.MIME_TYPE, "sizes": ["any"]}
    ]
    listed = wire(server.call_raw("tools/list", modern_meta))
    assert all(tool["icons"][0]["src"] == icon.src for tool in listed["tools"])
    # Named once, where a client learns who the server is: not on every result.
    assert "icons" not in listed["_meta"]["io.modelcontextprotocol/serverInfo"]
