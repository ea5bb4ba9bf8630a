"""Opt-in request spans through the real `bashrpc`: a child of the request's
`_meta.traceparent`, exported on stderr (console), never on stdout."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import msgspec

from bashrpc.protocol.mcp import BashToolArguments, RequestMeta
from bashrpc.protocol.mcpclient import bash_tool_call, initialize_params
from bashrpc.protocol.methods import BashParams, BashResult, CallMeta, ServerStatsResult
from tests.rpc import ServerProcess

CONSOLE = {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "bashrpc-test"}


def spans(stderr: str) -> list[dict[str, Any]]:
    """The console exporter's spans: one JSON object each, pretty-printed."""
    decoder = json.JSONDecoder()
    found, at = [], stderr.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(stderr, at)
        except json.JSONDecodeError:
            at = stderr.find("{", at + 1)
            continue
        if isinstance(value, dict) and "context" in value:
            found.append(value)
        at = stderr.find("{", end)
    return found


def traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def test_a_request_span_is_a_child_of_its_traceparent(tmp_path: Path) -> None:
    header, trace_id, parent = traceparent()
    server = ServerProcess(tmp=tmp_path, env=CONSOLE)
    meta = CallMeta(traceparent=header)
    result = server.typed(BashResult, "bash", BashParams(command="echo traced", meta=meta))
    assert result.output == "traced\n"
    assert server.close() == 0
    assert server.garbage == []  # stdout held protocol lines only
    [span] = [s for s in spans(server.stderr()) if s["name"] == "bash"]
    assert span["context"]["trace_id"] == "0x" + trace_id
    assert span["parent_id"] == "0x" + parent
    assert span["attributes"]["rpc.method"] == "bash"
    assert span["resource"]["attributes"]["service.name"] == "bashrpc-test"


def test_a_tool_call_span_takes_the_mcp_meta_traceparent(tmp_path: Path) -> None:
    header, trace_id, _parent = traceparent()
    server = ServerProcess(tmp=tmp_path, env=CONSOLE)
    server.result("initialize", initialize_params())
    call = bash_tool_call(BashToolArguments(command="true"))
    call = msgspec.structs.replace(call, meta=RequestMeta(traceparent=header))
    server.result("tools/call", call)
    assert server.close() == 0
    names = {s["name"]: s for s in spans(server.stderr())}
    assert names["tools/call"]["context"]["trace_id"] == "0x" + trace_id
    # A request without a traceparent starts a trace of its own.
    assert names["initialize"]["parent_id"] is None


def test_without_otel_settings_no_span_is_made(tmp_path: Path) -> None:
    server = ServerProcess(tmp=tmp_path)
    server.bash("true", meta=CallMeta(traceparent=traceparent()[0]))
    assert server.close() == 0
    assert spans(server.stderr()) == []


def test_an_unread_stderr_never_stops_the_server(tmp_path: Path) -> None:
    """Spans and debug logs to a stderr pipe nobody reads: its buffer fills after a
    few dozen requests, and the server goes on answering (what it could not write
    is dropped and counted, never waited for)."""
    server = ServerProcess("--log-level", "DEBUG", tmp=tmp_path, env=CONSOLE, unread_stderr=True)
    for n in range(500):
        assert server.result("ping", timeout=30.0) is not None, n
    result = server.bash("echo still here", wait=30.0)
    assert result.output == "still here\n"
    stats = server.typed(ServerStatsResult, "server/stats")
    assert stats.log_lines_dropped > 0
    assert server.close() == 0
