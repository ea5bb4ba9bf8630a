"""The tool-call surface: handshake, every step of tools/call, resources."""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import time
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.client import notification_params, result_of
from bashrpc.protocol.envelope import ErrorObject, RequestId, ServerMessage
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    BASH_TOOL,
    LATEST_PROTOCOL_VERSION,
    BashOverrides,
    BashStructured,
    BashToolArguments,
    Blocked,
    CallToolResult,
    CancelledOutput,
    CancelledParams,
    CancelRequestParams,
    ClientCapabilities,
    ConnectionSettings,
    EmptyParams,
    EmptyResult,
    Experimental,
    HostOptions,
    Implementation,
    InitializeParams,
    InitializeResult,
    InterceptorOverrides,
    InterceptorRule,
    ProgressParams,
    Recovery,
    ResourceLink,
    ResourcesListResult,
    ResourcesReadParams,
    ResourcesReadResult,
    ResourceTemplatesListResult,
    ShownRange,
    TextContent,
    TextResourceContents,
    ToolOverrides,
    ToolsCallParams,
    ToolsListResult,
    ToolUpdate,
    UiSize,
)
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import BashParams
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer
from tests.rpc import DEFAULT_TIMEOUT, RpcClient, ok_result, wait_until

ALL_TOOLS = ["read", "grep", "find", "edit", "write", "bash"]
PROTOCOL_VERSION = "2025-06-18"
CLIENT_INFO = Implementation(name="test", version="0")
# The interceptor on, with its default rules.
INTERCEPTING = ConnectionSettings(interceptor=InterceptorOverrides(enabled=True))


def initialize(server: RpcClient, **options: Any) -> InitializeResult:
    """`options` are HostOptions fields; with none, no initializationOptions at all."""
    return initialize_with(server, HostOptions(**options) if options else None)


def initialize_with(server: RpcClient, options: HostOptions | None) -> InitializeResult:
    params = InitializeParams(
        protocol_version=PROTOCOL_VERSION, client_info=CLIENT_INFO, initialization_options=options
    )
    return server.typed(InitializeResult, "initialize", params)


def tool_call(
    command: str, progress_token: str | int | None = None, **arguments: Any
) -> ToolsCallParams:
    """A bash tool call; `arguments` are the other BashToolArguments fields."""
    return bash_tool_call(BashToolArguments(command=command, **arguments), progress_token)


def call_tool(
    server: RpcClient,
    command: str,
    wait: float = DEFAULT_TIMEOUT,
    progress_token: str | int | None = None,
    **arguments: Any,
) -> CallToolResult:
    call = tool_call(command, progress_token, **arguments)
    return server.typed(CallToolResult, "tools/call", call, wait)


def call_tool_raw(server: RpcClient, arguments: dict[str, Any]) -> CallToolResult:
    """A bash tool call with arguments as the model wrote them, leniencies included
    (numeric strings, nulls), which BashToolArguments cannot hold."""
    reply = server.call_raw("tools/call", {"name": BASH_TOOL, "arguments": arguments})
    return result_of(reply, CallToolResult)


def text_of(result: CallToolResult) -> str:
    """The text the model reads; any content after it links the artifacts it names."""
    first, *links = result.content or []
    assert isinstance(first, TextContent)
    assert all(isinstance(link, ResourceLink) for link in links)
    return result.text


def structured(result: CallToolResult) -> BashStructured:
    assert result.structured_content is not None
    return result.structured_content


def blocked(result: CallToolResult) -> Blocked:
    assert result.details is not None and result.details.blocked is not None
    return result.details.blocked


def tool_list(server: InProcessServer) -> ToolsListResult:
    return server.typed(ToolsListResult, "tools/list")


def test_initialize_negotiates_the_protocol_version(server: InProcessServer) -> None:
    result = initialize(server)
    assert result.protocol_version == "2025-06-18"
    assert result.server_info.name == "bashrpc" and result.server_info.version
    assert result.capabilities.tools == {} and result.capabilities.resources == {}
    for version in ("2025-03-26", "2024-11-05"):
        params = InitializeParams(protocol_version=version)
        assert server.typed(InitializeResult, "initialize", params).protocol_version == version
    params = InitializeParams(protocol_version="1999-01-01")
    reply = server.typed(InitializeResult, "initialize", params)
    assert reply.protocol_version == LATEST_PROTOCOL_VERSION
    server.notify("notifications/initialized")
    assert server.result("ping", EmptyParams()) == EmptyResult()


def test_native_methods_work_without_initialize(server: InProcessServer) -> None:
    assert server.bash("echo hi").output == "hi\n"


def test_invalid_settings_in_initialize_name_the_key(server: InProcessServer) -> None:
    """Raw: no ConnectionSettings holds these."""
    for settings, key in [
        ({"interceptor": {"enabled": "yes"}}, "interceptor.enabled"),
        ({"tool": {"defaultTimeout": 0}}, "tool.defaultTimeout"),
        ({"bash": {"virtualTerminal": "maybe"}}, "bash.virtualTerminal"),
        ({"nonsense": 1}, "nonsense"),
    ]:
        error = server.error_raw(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "initializationOptions": {"settings": settings},
            },
        )
        assert error.code == ErrorCode.INVALID_PARAMS
        assert key.split(".")[-1] in error.data, error


def test_tools_list_describes_the_bash_tool(server: InProcessServer) -> None:
    tools = tool_list(server).tools
    assert [t.name for t in tools] == ["bash", "bash_output", "bash_kill", "bash_input"]
    tool = tools[0]
    assert "cwd" in tool.description and "head" in tool.description
    assert "last 2000 lines, and of those at most the last 50KB" in tool.description
    assert "stderr" in tool.description
    schema = tool.input_schema
    assert schema["type"] == "object" and schema["required"] == ["command"]
    assert set(schema["properties"]) == {
        "command",
        "timeout",
        "cwd",
        "head",
        "tail",
        "run_in_background",
    }
    assert schema["properties"]["timeout"]["default"] == 300
    assert "Seconds" in schema["properties"]["timeout"]["description"]
    assert "3600" in schema["properties"]["timeout"]["description"]
    assert "first N lines" in schema["properties"]["head"]["description"]
    assert "last N lines" in schema["properties"]["tail"]["description"]
    # Structured content is the whole result, the output text included.
    assert tool.output_schema is not None
    assert set(tool.output_schema["properties"]) == {
        "output",
        "exitCode",
        "cancelled",
        "timedOut",
        "truncation",
        "artifactUri",
        "sandboxDenied",
        "shellRestarted",
        "queuedSeconds",
    }
    assert "output" in tool.output_schema["required"]


def test_success_and_structured_content(server: InProcessServer) -> None:
    result = call_tool(server, command="echo hello")
    assert text_of(result) == "hello\n"
    assert result.is_error is False
    assert structured(result) == BashStructured(
        output="hello\n", exit_code=0, cancelled=False, timed_out=False, truncation=None
    )


def test_normalize_lifts_a_trailing_head_or_tail(server: InProcessServer) -> None:
    assert text_of(call_tool(server, command="seq 1 100 | head -n 3")) == "1\n2\n3"
    assert text_of(call_tool(server, command="seq 1 100 | tail -2  ")) == "99\n100\n"
    # The real exit status survives, which a pipe into head would hide.
    result = call_tool(server, command="(seq 1 5; exit 4) | head -2")
    assert result.is_error and text_of(result) == "1\n2\n\nCommand exited with code 4"
    # Explicit arguments win, and head applies before tail.
    assert text_of(call_tool(server, command="seq 1 100 | head -5", head=2)) == "1\n2"
    assert text_of(call_tool(server, command="seq 1 100", head=10, tail=3)) == "8\n9\n10"
    # Non-forms run as written.
    assert text_of(call_tool(server, command="seq 1 3 | head")) == "1\n2\n3\n"
    assert text_of(call_tool(server, command="echo abcdef | head -c 3")) == "abc"
    assert text_of(call_tool(server, command="echo x 2>&1")) == "x\n"


def test_empty_output_says_so(server: InProcessServer) -> None:
    assert text_of(call_tool(server, command="true")) == messages.NO_OUTPUT


def test_non_zero_exit_is_a_tool_error(server: InProcessServer) -> None:
    result = call_tool(server, command="echo failing; (exit 3)")
    assert result.is_error is True
    assert text_of(result) == "failing\n\nCommand exited with code 3"
    assert structured(result).exit_code == 3


def test_shell_killed_by_its_command_reports_the_signal(server: InProcessServer) -> None:
    result = call_tool(server, command="kill -9 $$")
    assert result.is_error and structured(result).exit_code == 137
    assert text_of(result).endswith(messages.EXITED_WITH_CODE.format(code=137))
    assert text_of(call_tool(server, command="echo next")) == "next\n"


def test_interceptor_blocks_when_enabled_and_the_tool_exists(server: InProcessServer) -> None:
    initialize(server, tool_names=ALL_TOOLS, settings=INTERCEPTING)
    result = call_tool(server, command="  grep -rn TODO .  ")
    assert result.is_error is True
    assert text_of(result) == (
        f"Blocked: {messages.INTERCEPT_GREP}\n\nOriginal command: grep -rn TODO .\n\n"
        'Structured recovery: {"tool":"grep","pattern":"TODO","path":"."}'
    )
    recovery = Recovery(tool="grep", path=".", pattern="TODO")
    assert blocked(result) == Blocked(suggested_tool="grep", rule="grep", recovery=recovery)
    assert structured(result).exit_code is None
    assert text_of(call_tool(server, command="ls | grep -c .")).strip().isdigit()


def test_interceptor_is_off_by_default_and_gated_on_tools(server: InProcessServer) -> None:
    initialize(server, tool_names=ALL_TOOLS)
    assert not call_tool(server, command="cat /dev/null").is_error
    initialize(server, tool_names=["bash"], settings=INTERCEPTING)
    assert not call_tool(server, command="cat /dev/null").is_error


def test_custom_rules_replace_the_defaults(server: InProcessServer) -> None:
    rules = [
        InterceptorRule(pattern="([broken", tool="x", message="never"),
        InterceptorRule(
            pattern="^make\\b", tool="build", message="Use the `build` tool.", name="make"
        ),
    ]
    initialize(
        server,
        tool_names=["build", "grep"],
        settings=ConnectionSettings(interceptor=InterceptorOverrides(enabled=True, rules=rules)),
    )
    result = call_tool(server, command="make all")
    recovery = Recovery(tool="build")
    assert blocked(result) == Blocked(suggested_tool="build", rule="make", recovery=recovery)
    # The defaults were replaced, so grep (a default rule's target) runs.
    assert text_of(call_tool(server, command="echo x | grep -c x")) == "1\n"
    assert server.stderr().count("([broken") == 1
    call_tool(server, command="make again")
    assert server.stderr().count("([broken") == 1


def test_interceptor_from_the_settings_file(spawn: SpawnInProcess) -> None:
    server = spawn("[interceptor]\nenabled = true\n")
    initialize(server, tool_names=["read"])
    assert blocked(call_tool(server, command="cat README")).suggested_tool == "read"


def test_experimental_capability_carries_host_options(server: InProcessServer) -> None:
    host = HostOptions(tool_names=["grep"], settings=INTERCEPTING)
    capabilities = ClientCapabilities(experimental=Experimental(bashrpc=host))
    server.result(
        "initialize",
        InitializeParams(protocol_version=PROTOCOL_VERSION, capabilities=capabilities),
    )
    assert blocked(call_tool(server, command="rg x")).suggested_tool == "grep"


def test_cwd_is_resolved_against_the_workspace_on_every_call(server: InProcessServer) -> None:
    (server.tmp / "pkg").mkdir()
    (server.tmp / "file.txt").write_text("x")
    assert text_of(call_tool(server, command="pwd", cwd="pkg")) == f"{server.tmp}/pkg\n"
    # The next call starts in the workspace again, even after a cd.
    call_tool(server, command="cd /")
    assert text_of(call_tool(server, command="pwd")) == f"{server.tmp}\n"
    missing = call_tool(server, command="pwd", cwd="nope")
    assert missing.is_error
    assert text_of(missing) == messages.CWD_MISSING.format(path=f"{server.tmp}/nope")
    not_dir = call_tool(server, command="pwd", cwd="file.txt")
    assert text_of(not_dir) == messages.CWD_NOT_A_DIRECTORY.format(path=f"{server.tmp}/file.txt")


def test_timeout_default_clamp_and_notice(server: InProcessServer) -> None:
    # The shell up first: a fresh one's start (its sandbox, bash, the driver) counts
    # in the first command's second, and on a loaded machine can take all of it.
    call_tool(server, command="true")
    started = time.monotonic()
    result = call_tool(server, command="echo partial; sleep 30", timeout=0.2)
    assert time.monotonic() - started < 10
    text = text_of(result)
    assert result.is_error and structured(result).timed_out
    notices = f"{messages.timed_out_notice(1)}\n{messages.SHELL_RESTARTED}\n"
    assert text.startswith(notices + "partial\n")
    assert text.endswith(messages.TIMEOUT_CLAMPED.format(requested="0.2", applied="1"))
    big = call_tool(server, command="echo ok", timeout=99999)
    assert text_of(big) == "ok\n" + messages.TIMEOUT_CLAMPED.format(
        requested="99999", applied="3600"
    )
    assert not big.is_error


def test_optional_arguments_are_plain_properties(server: InProcessServer) -> None:
    """Generic clients build forms from the schema: `anyOf` with null confuses them."""
    schema = tool_list(server).tools[0].input_schema
    for name, prop in schema["properties"].items():
        assert "anyOf" not in prop and "type" in prop, name
    assert schema["properties"]["timeout"]["type"] == "number"
    assert schema["properties"]["head"]["type"] == "integer"
    assert schema["properties"]["cwd"]["type"] == "string"


def test_numeric_strings_count_as_numbers_and_null_as_absent(server: InProcessServer) -> None:
    """Raw: these arguments are what BashToolArguments cannot hold."""
    result = call_tool_raw(server, {"command": "echo partial; sleep 30", "timeout": "0.2"})
    assert structured(result).timed_out
    assert text_of(result).endswith(messages.TIMEOUT_CLAMPED.format(requested="0.2", applied="1"))
    result = call_tool_raw(
        server, {"command": "seq 1 5", "timeout": "30", "head": "2", "tail": "1"}
    )
    assert text_of(result) == "2" and not result.is_error
    nulls = {"command": "pwd", "cwd": None, "head": None, "tail": None}
    result = call_tool_raw(server, nulls)
    assert text_of(result) == f"{server.tmp}\n"
    for value, reason in [
        ("abc", 'timeout: expected a number, got "abc"'),
        ("nan", 'timeout: expected a finite number, got "nan"'),
        ("inf", 'timeout: expected a finite number, got "inf"'),
        ("-Infinity", 'timeout: expected a finite number, got "-Infinity"'),
        (True, "timeout: expected a number, got true"),
    ]:
        error = server.error_raw(
            "tools/call", {"name": BASH_TOOL, "arguments": {"command": "true", "timeout": value}}
        )
        assert error.code == ErrorCode.INVALID_PARAMS
        assert error.message == messages.invalid_params(reason)
    error = server.error_raw(
        "tools/call", {"name": BASH_TOOL, "arguments": {"command": "true", "head": "2.5"}}
    )
    assert error.message == messages.invalid_params('head: expected an integer, got "2.5"')


def test_a_null_timeout_is_said_in_the_result(server: InProcessServer) -> None:
    """A form that turns `timeout="1"` into null must not silently get the default."""
    result = call_tool_raw(server, {"command": "pwd", "timeout": None})
    assert not result.is_error
    assert text_of(result) == f"{server.tmp}\n" + messages.TIMEOUT_NULL.format(applied="300")


def test_configured_default_timeout(server: InProcessServer) -> None:
    initialize(server, settings=ConnectionSettings(tool=ToolOverrides(default_timeout=1)))
    assert tool_list(server).tools[0].input_schema["properties"]["timeout"]["default"] == 1
    result = call_tool(server, command="sleep 20")
    assert structured(result).timed_out


def test_truncation_meta_notice_and_resource_read(server: InProcessServer) -> None:
    result = call_tool(server, command="seq 1 200000; (exit 2)")
    text = text_of(result)
    assert result.details is not None and result.details.meta is not None
    truncation = result.details.meta.truncation
    assert result.is_error and truncation == structured(result).truncation
    artifact = truncation.artifact_id
    assert structured(result).artifact_uri == f"artifact://{artifact}"
    assert structured(result).output == text
    assert truncation.direction == "tail" and truncation.truncated_by == "lines"
    assert truncation.total_lines == 200000 and truncation.output_lines == 2000
    assert truncation.shown_range == ShownRange(start=198001, end=200000)
    notice = messages.TRUNCATION_NOTICE.format(
        start=198001,
        end=200000,
        total=200000,
        limit=messages.TRUNCATION_LIMIT.format(limit="2000 lines"),
        full=messages.TRUNCATION_FULL.format(id=artifact),
    )
    assert text.endswith(
        "199999\n200000\n" + notice + "\n\n" + messages.EXITED_WITH_CODE.format(code=2)
    )
    expected = subprocess.run(["seq", "1", "200000"], capture_output=True).stdout.decode()
    uri = ResourcesReadParams(uri=f"artifact://{artifact}")
    read = server.typed(ResourcesReadResult, "resources/read", uri)
    assert read.contents == [
        TextResourceContents(uri=f"artifact://{artifact}", mime_type="text/plain", text=expected)
    ]


def test_byte_truncation_of_long_lines(server: InProcessServer) -> None:
    result = call_tool(server, command="head -c 200000 /dev/zero | tr '\\0' x; echo")
    truncation = structured(result).truncation
    assert truncation is not None
    assert truncation.truncated_by == "bytes" and truncation.total_lines == 1
    assert "(50KB limit)" in text_of(result)


def test_resources_list_templates_and_errors(server: InProcessServer) -> None:
    truncation = structured(call_tool(server, command="seq 1 100000")).truncation
    assert truncation is not None
    artifact = truncation.artifact_id
    assert artifact is not None
    listed = server.typed(ResourcesListResult, "resources/list").resources
    assert (listed[0].uri, listed[0].name) == (f"artifact://{artifact}", f"artifact {artifact}")
    templates = server.typed(ResourceTemplatesListResult, "resources/templates/list")
    assert templates.resource_templates[0].uri_template == "artifact://{id}"
    for uri, message in [
        ("artifact://", messages.ARTIFACT_URI_NO_ID),
        ("artifact://abc", messages.ARTIFACT_URI_NOT_NUMERIC.format(got="abc")),
        (
            "artifact://../../etc/passwd",
            messages.ARTIFACT_URI_NOT_NUMERIC.format(got="../../etc/passwd"),
        ),
        ("artifact://%2e%2e", messages.ARTIFACT_URI_NOT_NUMERIC.format(got="%2e%2e")),
        ("artifact://1/../2", messages.ARTIFACT_URI_NOT_NUMERIC.format(got="1/../2")),
        ("file:///etc/passwd", messages.UNSUPPORTED_URI.format(uri="file:///etc/passwd")),
    ]:
        error = server.error("resources/read", ResourcesReadParams(uri=uri))
        assert error.code == ErrorCode.INVALID_PARAMS and error.message == message
    error = server.error("resources/read", ResourcesReadParams(uri="artifact://999"))
    assert error.code == ErrorCode.ARTIFACT_NOT_FOUND
    assert error.message == messages.artifact_not_found(999, [artifact])


def test_any_numeric_artifact_uri_is_an_id(server: InProcessServer) -> None:
    truncation = structured(call_tool(server, command="seq 1 100000")).truncation
    assert truncation is not None
    artifact = truncation.artifact_id
    assert artifact is not None
    padded = f"artifact://{artifact:030d}"
    read = server.typed(ResourcesReadResult, "resources/read", ResourcesReadParams(uri=padded))
    assert read.contents[0].text.startswith("1\n2\n")
    # Longer than any id ever issued: simply not there, however long.
    for digits in ("1234567890123456789", "9" * 5000):
        error = server.error("resources/read", ResourcesReadParams(uri=f"artifact://{digits}"))
        assert error.code == ErrorCode.ARTIFACT_NOT_FOUND
        assert error.message == messages.artifact_not_found(digits, [artifact])


def updates_of(ident: RequestId) -> Callable[[ServerMessage], bool]:
    """Matches the `tool/update`s of one call (a wait_for predicate)."""
    return lambda m: (
        m.method == "tool/update" and notification_params(m, ToolUpdate).request_id == ident
    )


def test_an_lsp_cancel_answers_request_cancelled_with_the_output(
    server: InProcessServer,
) -> None:
    initialize(server, notifications=["tool/update"])
    ident = server.request("tools/call", tool_call("echo begun; exec sleep 60"))
    server.wait_for(updates_of(ident))
    server.notify("$/cancelRequest", CancelRequestParams(id=ident))
    reply = server.response(ident, timeout=10)
    assert reply.error is not None, reply
    error = reply.error
    assert error.code == ErrorCode.REQUEST_CANCELLED
    assert error.message == messages.REQUEST_CANCELLED
    assert msgspec.convert(error.data, CancelledOutput).output == "begun\n"
    assert not [c for c in server.owned_commands() if "sleep 60" in c]
    again = call_tool(server, command="echo healthy")
    assert text_of(again) == f"{messages.SHELL_RESTARTED}\nhealthy\n"


def test_an_mcp_cancel_gets_no_response_and_the_next_call_says_the_shell_restarted(
    server: InProcessServer,
) -> None:
    """MCP: the receiver of `notifications/cancelled` does not respond to the request."""
    initialize(server, notifications=["tool/update"])
    ident = server.request("tools/call", tool_call("echo begun; exec sleep 60"))
    server.wait_for(updates_of(ident))
    server.notify("notifications/cancelled", CancelledParams(request_id=ident, reason="user"))
    assert wait_until(lambda: not [c for c in server.owned_commands() if "sleep 60" in c])
    # The next call runs after the cancelled one left the session, reply or not.
    again = call_tool(server, command="echo healthy")
    assert text_of(again) == f"{messages.SHELL_RESTARTED}\nhealthy\n"
    assert [m for m in server.messages if m.id == ident and m.method is None] == []
    # Late, repeated and unknown cancels are harmless.
    done = server.request("tools/call", tool_call("echo x"))
    server.response(done)
    server.notify("notifications/cancelled", CancelledParams(request_id=done))
    server.notify("notifications/cancelled", CancelledParams(request_id=done))
    server.notify("notifications/cancelled", CancelledParams(request_id="never-was"))
    assert text_of(call_tool(server, command="echo healthy")) == "healthy\n"


def test_end_of_input_silences_tool_calls_and_answers_bash(server: InProcessServer) -> None:
    """A client that closed our stdin reads nothing more on the MCP surface (MCP's stdio
    shutdown); the native `bash` still gets its cancelled result."""
    initialize(server, notifications=["tool/update"])
    abandoned = server.request("tools/call", tool_call("echo begun; sleep 60", "abandoned"))
    native = server.request("bash", BashParams(command="echo begun; sleep 61", session_id="host"))
    server.wait_for(lambda m: m.method == "notifications/progress")
    server.wait_for(lambda m: m.method == "bash/chunk")
    seen = len(server.messages)
    server.close()
    assert server.bash_result(native).cancelled
    with contextlib.suppress(EOFError):
        while True:
            server.next_message()
    after = server.messages[seen:]
    assert [m for m in after if m.id == abandoned] == []
    assert [m for m in after if m.method in ("notifications/progress", "tool/update")] == []
    assert not [c for c in server.owned_commands() if c.startswith("sleep 6")]


def test_tool_updates_are_snapshots_and_throttled(server: InProcessServer) -> None:
    initialize(server, notifications=["tool/update"])
    ident = server.request(
        "tools/call", tool_call("for i in $(seq 40); do echo $i; sleep 0.02; done")
    )
    server.response(ident)
    updates = [u for u in server.notified("tool/update", ToolUpdate) if u.request_id == ident]
    assert 2 <= len(updates) <= 20  # ~0.8 s at most one per 100 ms
    texts = [u.content[0].text for u in updates]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))  # snapshots grow
    assert not server.notifications("notifications/progress")


def test_progress_only_with_a_token(server: InProcessServer) -> None:
    command = "for i in $(seq 20); do echo line-$i; sleep 0.03; done"
    call_tool(server, command=command, progress_token="tok")
    progress = server.notified("notifications/progress", ProgressParams)
    assert progress and all(p.progress_token == "tok" for p in progress)
    values = [p.progress for p in progress]
    assert values == sorted(values) and values[-1] > 0
    assert all(p.message.startswith("line-") and len(p.message) <= 200 for p in progress)


STREAMING_COMMAND = "for i in 1 2 3; do echo $i; sleep 0.1; done"


def test_only_standard_notifications_unless_the_host_opts_in(server: InProcessServer) -> None:
    initialize(server)
    call_tool(server, command=STREAMING_COMMAND, progress_token=1)
    assert not server.notifications("tool/update")
    assert server.notifications("notifications/progress")


def test_tool_update_opt_in_under_experimental(server: InProcessServer) -> None:
    host = HostOptions(notifications=["tool/update"])
    params = InitializeParams(
        protocol_version=PROTOCOL_VERSION,
        capabilities=ClientCapabilities(experimental=Experimental(bashrpc=host)),
        client_info=CLIENT_INFO,
    )
    server.typed(InitializeResult, "initialize", params)
    call_tool(server, command=STREAMING_COMMAND)
    assert server.notifications("tool/update")


def test_opt_out_of_notifications(server: InProcessServer) -> None:
    initialize(
        server,
        notifications=["tool/update"],
        opt_out_notifications=["tool/update", "notifications/progress"],
    )
    call_tool(server, command=STREAMING_COMMAND, progress_token=1)
    assert not server.notifications("tool/update")
    assert not server.notifications("notifications/progress")


def test_unknown_tool_and_bad_arguments(server: InProcessServer) -> None:
    error = server.error("tools/call", ToolsCallParams(name="python"))
    assert error.code == ErrorCode.INVALID_PARAMS
    assert error.data == messages.UNKNOWN_TOOL.format(name="python")
    # Raw: arguments no BashToolArguments holds.
    error = server.error_raw("tools/call", {"name": BASH_TOOL, "arguments": {"command": 1}})
    assert error.code == ErrorCode.INVALID_PARAMS and "command" in error.data
    error = server.error_raw(
        "tools/call", {"name": BASH_TOOL, "arguments": {"command": "x", "extra": 1}}
    )
    assert "extra" in error.data


def test_tool_calls_share_a_shell(server: InProcessServer) -> None:
    call_tool(server, command="export SHARED=yes")
    assert text_of(call_tool(server, command="echo $SHARED")) == "yes\n"
    assert "@tools" in server.sessions()


def test_pty_is_used_only_when_all_three_conditions_hold(
    spawn: SpawnInProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    ui = UiSize(cols=100, rows=30)
    on = ConnectionSettings(bash=BashOverrides(virtual_terminal="on"))
    probe = 'if test -t 1; then echo "tty $(tput cols)"; else echo pipe; fi'
    cases = [
        ({}, HostOptions(ui=ui, settings=on), "tty 100\n"),
        ({}, HostOptions(ui=ui), "pipe\n"),  # virtualTerminal off (the default)
        ({"BASHRPC_NO_PTY": "1"}, HostOptions(ui=ui, settings=on), "pipe\n"),
        ({"PI_NO_PTY": "1"}, HostOptions(ui=ui, settings=on), "pipe\n"),
        ({}, HostOptions(settings=on), "pipe\n"),  # the host declared no ui
    ]
    for env, options, expected in cases:
        for name in ("BASHRPC_NO_PTY", "PI_NO_PTY"):
            monkeypatch.delenv(name, raising=False)
        server = spawn(env=env)
        initialize_with(server, options)
        assert text_of(call_tool(server, command=probe)) == expected, (env, options)


def test_tool_description_follows_the_settings(spawn: SpawnInProcess) -> None:
    server = spawn("[output]\nmaxBytes = 20480\n[tool]\ndefaultTimeout = 60\n")
    description = tool_list(server).tools[0].description
    assert "last 20KB" in description and "default 60," in description


def test_lifted_head_and_tail_name_only_a_cap_that_cut(server: InProcessServer) -> None:
    five = "printf 'line1\\nline2\\nline3\\nline4\\nline5\\n'"
    assert text_of(call_tool(server, command=f"{five} | head -n 2")) == "line1\nline2"
    # 3000 lines pass the 2000-line cap, but the tail of 5 was the user's choice.
    assert text_of(call_tool(server, command="seq 1 3000 | tail -n 5")) == (
        "2996\n2997\n2998\n2999\n3000\n"
    )
    for command, shown, start, end in [
        ("seq 1 200000 | tail -5", "199996\n199997\n199998\n199999\n200000\n", 199996, 200000),
        # The head lies before the kept tail: it is read back from the artifact.
        ("seq 1 200000 | head -n 3", "1\n2\n3", 1, 3),
    ]:
        result = call_tool(server, command=command)
        truncation = structured(result).truncation
        assert truncation is not None and truncation.truncated_by is None
        notice = messages.TRUNCATION_NOTICE.format(
            start=start,
            end=end,
            total=200000,
            limit="",
            full=messages.TRUNCATION_FULL.format(id=truncation.artifact_id),
        )
        assert text_of(result) == shown + notice


def test_parallel_tool_calls_take_turns_in_the_tool_session(server: InProcessServer) -> None:
    """Calls sent without waiting keep each other's state, in arrival order."""
    initialize(server)
    first = server.request("tools/call", tool_call("sleep 0.5; export B=2"))
    second = server.request("tools/call", tool_call('echo "B=$B"'))
    assert not ok_result(server.response(first), CallToolResult).is_error
    result = ok_result(server.response(second), CallToolResult)
    assert text_of(result) == "B=2\n" and structured(result).queued_seconds > 0


def test_initialize_naming_another_workspace_is_refused_with_the_servers(
    server: InProcessServer,
) -> None:
    """What `bashrpc attach --workspace` sends a daemon already running: a server's
    workspace is fixed at its start, so naming another is refused, naming its own."""
    served = str(server.options.workspace)
    error = initialize_error(server, HostOptions(workspace=served + "/elsewhere"))
    assert error.code == ErrorCode.INVALID_PARAMS
    assert f"serves {served} (sandbox 'off'), not {served}/elsewhere" in str(error.data)
    # Nothing changed; its own workspace, named, is accepted.
    assert initialize(server, workspace=served).server_info.name == "bashrpc"
    assert server.bash("pwd").output == f"{served}\n"


def initialize_error(server: RpcClient, options: HostOptions) -> ErrorObject:
    params = InitializeParams(
        protocol_version=PROTOCOL_VERSION, client_info=CLIENT_INFO, initialization_options=options
    )
    return server.error("initialize", params)
