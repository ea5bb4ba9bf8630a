"""MCP 2026-07-28 beside the initialize era, decided per request: server/discover,
the revision in each request's `_meta`, `resultType` on every result, the removed
methods answered -32601."""

from __future__ import annotations

from typing import Any

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    ALL_PROTOCOL_VERSIONS,
    BASH_TOOL,
    PROTOCOL_VERSION_KEY,
)
from tests.e2e.test_mcp_revisions import initialize_at, wire
from tests.inprocess import InProcessServer

MODERN = "2026-07-28"
CLIENT = {"name": "modern-test", "version": "1"}


def meta(version: str = MODERN) -> dict[str, Any]:
    return {
        PROTOCOL_VERSION_KEY: version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": CLIENT,
    }


def modern(server: InProcessServer, method: str, **params: Any) -> Any:
    return wire(server.call_raw(method, {**params, "_meta": meta()}))


def test_discover_names_every_revision(server: InProcessServer) -> None:
    found = modern(server, "server/discover")
    assert found["supportedVersions"] == list(ALL_PROTOCOL_VERSIONS)
    assert found["supportedVersions"][0] == MODERN
    assert found["resultType"] == "complete"
    assert found["cacheScope"] == "private" and found["ttlMs"] == 0
    assert found["capabilities"] == {"tools": {}, "resources": {}}
    assert found["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "bashrpc"
    assert found["instructions"] == messages.SERVER_INSTRUCTIONS


def test_modern_requests_need_no_initialize_and_say_their_kind(server: InProcessServer) -> None:
    listed = modern(server, "tools/list")
    assert [t["name"] for t in listed["tools"]] == ["bash", "bash_output", "bash_kill"]
    assert listed["resultType"] == "complete" and listed["cacheScope"] == "private"
    called = modern(server, "tools/call", name=BASH_TOOL, arguments={"command": "echo hi"})
    assert called["resultType"] == "complete" and called["content"][0]["text"] == "hi\n"
    assert "cacheScope" not in called
    assert modern(server, "resources/list")["resultType"] == "complete"
    assert modern(server, "resources/templates/list")["resultType"] == "complete"
    assert modern(server, "tasks/list")["resultType"] == "complete"


def test_both_eras_on_one_connection(server: InProcessServer) -> None:
    initialize_at(server, "2025-11-25")
    legacy = wire(server.call_raw("tools/list", {}))
    assert "resultType" not in legacy and "cacheScope" not in legacy
    assert modern(server, "tools/list")["resultType"] == "complete"
    # A request naming an initialize-era revision is of that era.
    old = wire(server.call_raw("tools/list", {"_meta": meta("2025-06-18")}))
    assert "resultType" not in old


def test_removed_methods_and_unknown_revisions(server: InProcessServer) -> None:
    error = server.error_raw("ping", {"_meta": meta()})
    assert error.code == ErrorCode.METHOD_NOT_FOUND
    assert error.message == messages.REMOVED_METHOD.format(method="ping", revision=MODERN)
    # Without a modern revision, ping is what it was.
    assert wire(server.call_raw("ping", {})) == {}
    error = server.error_raw("logging/setLevel", {"level": "info", "_meta": meta()})
    assert error.code == ErrorCode.METHOD_NOT_FOUND
    error = server.error_raw("tools/list", {"_meta": meta("2099-01-01")})
    assert error.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert int(error.code) == -32022
    data = msgspec.convert(error.data, dict[str, Any])
    assert data == {"requested": "2099-01-01", "supported": list(ALL_PROTOCOL_VERSIONS)}


def test_a_modern_task_request_runs_as_a_plain_call(server: InProcessServer) -> None:
    called = modern(
        server, "tools/call", name=BASH_TOOL, arguments={"command": "echo now"}, task={}
    )
    assert "task" not in called and called["content"][0]["text"] == "now\n"
