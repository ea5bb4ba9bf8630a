"""The tool-call surface over stdio: handshake, every step of tools/call, resources."""

from __future__ import annotations

import itertools
import subprocess
import time
from typing import Any

from protocol import messages
from protocol.errors import ErrorCode
from protocol.mcp import LATEST_PROTOCOL_VERSION
from tests.rpc import ServerProcess

ALL_TOOLS = ["read", "grep", "find", "edit", "write", "bash"]


def initialize(server: ServerProcess, **options: Any) -> dict:
    params: dict[str, Any] = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    }
    if options:
        params["initializationOptions"] = options
    return server.result("initialize", params)


def call_tool(server: ServerProcess, wait: float = 30, meta: Any = None, **arguments: Any) -> dict:
    params: dict[str, Any] = {"name": "bash", "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return server.result("tools/call", params, wait)


def text_of(result: dict) -> str:
    assert [c["type"] for c in result["content"]] == ["text"]
    return result["content"][0]["text"]


def test_initialize_negotiates_the_protocol_version(server: ServerProcess) -> None:
    result = initialize(server)
    assert result["protocolVersion"] == "2025-06-18"
    assert result["serverInfo"]["name"] == "bashrpc" and result["serverInfo"]["version"]
    assert result["capabilities"] == {"tools": {}, "resources": {}}
    for version in ("2025-03-26", "2024-11-05"):
        reply = server.result("initialize", {"protocolVersion": version, "capabilities": {}})
        assert reply["protocolVersion"] == version
    reply = server.result("initialize", {"protocolVersion": "1999-01-01", "capabilities": {}})
    assert reply["protocolVersion"] == LATEST_PROTOCOL_VERSION
    server.notify("notifications/initialized")
    assert server.result("ping") == {}


def test_native_methods_work_without_initialize(server: ServerProcess) -> None:
    assert server.bash("echo hi")["output"] == "hi\n"


def test_invalid_settings_in_initialize_name_the_key(server: ServerProcess) -> None:
    for settings, key in [
        ({"interceptor": {"enabled": "yes"}}, "interceptor.enabled"),
        ({"tool": {"defaultTimeout": 0}}, "tool.defaultTimeout"),
        ({"bash": {"virtualTerminal": "maybe"}}, "bash.virtualTerminal"),
        ({"nonsense": 1}, "nonsense"),
    ]:
        reply = server.call(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "initializationOptions": {"settings": settings},
            },
        )
        assert reply["error"]["code"] == ErrorCode.INVALID_PARAMS
        assert key.split(".")[-1] in reply["error"]["data"], reply


def test_tools_list_describes_the_bash_tool(server: ServerProcess) -> None:
    tools = server.result("tools/list")["tools"]
    assert [t["name"] for t in tools] == ["bash"]
    tool = tools[0]
    assert "cwd" in tool["description"] and "head" in tool["description"]
    assert "stderr" in tool["description"]
    schema = tool["inputSchema"]
    assert schema["type"] == "object" and schema["required"] == ["command"]
    assert set(schema["properties"]) == {"command", "timeout", "cwd", "head", "tail"}
    assert schema["properties"]["timeout"]["default"] == 300


def test_success_and_structured_content(server: ServerProcess) -> None:
    result = call_tool(server, command="echo hello")
    assert text_of(result) == "hello\n"
    assert result.get("isError", False) is False
    assert result["structuredContent"] == {
        "exitCode": 0,
        "cancelled": False,
        "timedOut": False,
        "truncation": None,
    }


def test_normalize_lifts_a_trailing_head_or_tail(server: ServerProcess) -> None:
    assert text_of(call_tool(server, command="seq 1 100 | head -n 3")) == "1\n2\n3\n"
    assert text_of(call_tool(server, command="seq 1 100 | tail -2  ")) == "99\n100\n"
    # The real exit status survives, which a pipe into head would hide.
    result = call_tool(server, command="(seq 1 5; exit 4) | head -2")
    assert result["isError"] and text_of(result) == "1\n2\n\n\nCommand exited with code 4"
    # Explicit arguments win, and head applies before tail.
    assert text_of(call_tool(server, command="seq 1 100 | head -5", head=2)) == "1\n2\n"
    assert text_of(call_tool(server, command="seq 1 100", head=10, tail=3)) == "8\n9\n10\n"
    # Non-forms run as written.
    assert text_of(call_tool(server, command="seq 1 3 | head")) == "1\n2\n3\n"
    assert text_of(call_tool(server, command="echo abcdef | head -c 3")) == "abc"
    assert text_of(call_tool(server, command="echo x 2>&1")) == "x\n"


def test_empty_output_says_so(server: ServerProcess) -> None:
    assert text_of(call_tool(server, command="true")) == messages.NO_OUTPUT


def test_non_zero_exit_is_a_tool_error(server: ServerProcess) -> None:
    result = call_tool(server, command="echo failing; exit 3")
    assert result["isError"] is True
    assert text_of(result) == "failing\n" + messages.EXITED_WITH_CODE.format(code=3)
    assert result["structuredContent"]["exitCode"] == 3


def test_shell_killed_by_its_command_reports_the_signal(server: ServerProcess) -> None:
    result = call_tool(server, command="kill -9 $$")
    assert result["isError"] and result["structuredContent"]["exitCode"] == 137
    assert text_of(result).endswith(messages.EXITED_WITH_CODE.format(code=137))
    assert text_of(call_tool(server, command="echo next")) == "next\n"


def test_interceptor_blocks_when_enabled_and_the_tool_exists(server: ServerProcess) -> None:
    initialize(server, toolNames=ALL_TOOLS, settings={"interceptor": {"enabled": True}})
    result = call_tool(server, command="  grep -rn TODO .  ")
    assert result["isError"] is True
    assert text_of(result) == (
        f"Blocked: {messages.INTERCEPT_GREP}\n\nOriginal command: grep -rn TODO ."
    )
    assert result["details"]["blocked"] == {"suggestedTool": "grep", "rule": "grep"}
    assert result["structuredContent"]["exitCode"] is None
    assert text_of(call_tool(server, command="ls | grep -c .")).strip().isdigit()


def test_interceptor_is_off_by_default_and_gated_on_tools(server: ServerProcess) -> None:
    initialize(server, toolNames=ALL_TOOLS)
    assert not call_tool(server, command="cat /dev/null").get("isError")
    initialize(server, toolNames=["bash"], settings={"interceptor": {"enabled": True}})
    assert not call_tool(server, command="cat /dev/null").get("isError")


def test_custom_rules_replace_the_defaults(server: ServerProcess) -> None:
    rules = [
        {"pattern": "([broken", "tool": "x", "message": "never"},
        {
            "pattern": "^make\\b",
            "tool": "build",
            "message": "Use the `build` tool.",
            "name": "make",
        },
    ]
    initialize(
        server,
        toolNames=["build", "grep"],
        settings={"interceptor": {"enabled": True, "rules": rules}},
    )
    result = call_tool(server, command="make all")
    assert result["details"]["blocked"] == {"suggestedTool": "build", "rule": "make"}
    # The defaults were replaced, so grep (a default rule's target) runs.
    assert text_of(call_tool(server, command="echo x | grep -c x")) == "1\n"
    assert server.stderr().count("([broken") == 1
    call_tool(server, command="make again")
    assert server.stderr().count("([broken") == 1


def test_interceptor_from_the_config_file(spawn, tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[interceptor]\nenabled = true\n")
    server = spawn("--config", str(cfg))
    initialize(server, toolNames=["read"])
    assert call_tool(server, command="cat README")["details"]["blocked"]["suggestedTool"] == "read"


def test_experimental_capability_carries_host_options(server: ServerProcess) -> None:
    server.result(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {
                "experimental": {
                    "bashrpc": {
                        "toolNames": ["grep"],
                        "settings": {"interceptor": {"enabled": True}},
                    }
                }
            },
        },
    )
    assert call_tool(server, command="rg x")["details"]["blocked"]["suggestedTool"] == "grep"


def test_cwd_is_resolved_against_the_workspace_on_every_call(server: ServerProcess) -> None:
    (server.tmp / "pkg").mkdir()
    (server.tmp / "file.txt").write_text("x")
    assert text_of(call_tool(server, command="pwd", cwd="pkg")) == f"{server.tmp}/pkg\n"
    # The next call starts in the workspace again, even after a cd.
    call_tool(server, command="cd /")
    assert text_of(call_tool(server, command="pwd")) == f"{server.tmp}\n"
    missing = call_tool(server, command="pwd", cwd="nope")
    assert missing["isError"]
    assert text_of(missing) == messages.CWD_MISSING.format(path=f"{server.tmp}/nope")
    not_dir = call_tool(server, command="pwd", cwd="file.txt")
    assert text_of(not_dir) == messages.CWD_NOT_A_DIRECTORY.format(path=f"{server.tmp}/file.txt")


def test_timeout_default_clamp_and_notice(server: ServerProcess) -> None:
    started = time.monotonic()
    result = call_tool(server, command="echo partial; sleep 30", timeout=0.2)
    assert time.monotonic() - started < 10
    text = text_of(result)
    assert result["isError"] and result["structuredContent"]["timedOut"]
    assert text.startswith(messages.timed_out_notice(1) + "\npartial\n")
    assert text.endswith(messages.TIMEOUT_CLAMPED.format(requested="0.2", applied="1"))
    big = call_tool(server, command="echo ok", timeout=99999)
    assert text_of(big) == "ok\n" + messages.TIMEOUT_CLAMPED.format(
        requested="99999", applied="3600"
    )
    assert not big.get("isError")


def test_configured_default_timeout(server: ServerProcess) -> None:
    initialize(server, settings={"tool": {"defaultTimeout": 1}})
    assert (
        server.result("tools/list")["tools"][0]["inputSchema"]["properties"]["timeout"]["default"]
        == 1
    )
    result = call_tool(server, command="sleep 20")
    assert result["structuredContent"]["timedOut"]


def test_truncation_meta_notice_and_resource_read(server: ServerProcess) -> None:
    result = call_tool(server, command="seq 1 200000; exit 2")
    text = text_of(result)
    truncation = result["details"]["meta"]["truncation"]
    assert result["isError"] and truncation == result["structuredContent"]["truncation"]
    artifact = truncation["artifactId"]
    assert truncation["direction"] == "tail" and truncation["truncatedBy"] == "lines"
    assert truncation["totalLines"] == 200000 and truncation["outputLines"] == 2000
    assert truncation["shownRange"] == {"start": 198001, "end": 200000}
    notice = messages.TRUNCATION_NOTICE.format(
        start=198001,
        end=200000,
        total=200000,
        limit="2000 lines",
        full=messages.TRUNCATION_FULL.format(id=artifact),
    )
    assert text.endswith("199999\n200000\n" + notice + messages.EXITED_WITH_CODE.format(code=2))
    expected = subprocess.run(["seq", "1", "200000"], capture_output=True).stdout.decode()
    read = server.result("resources/read", {"uri": f"artifact://{artifact}"})
    assert read["contents"] == [
        {"uri": f"artifact://{artifact}", "mimeType": "text/plain", "text": expected}
    ]


def test_byte_truncation_of_long_lines(server: ServerProcess) -> None:
    result = call_tool(server, command="head -c 200000 /dev/zero | tr '\\0' x; echo")
    truncation = result["structuredContent"]["truncation"]
    assert truncation["truncatedBy"] == "bytes" and truncation["totalLines"] == 1
    assert "(50KB limit)" in text_of(result)


def test_resources_list_templates_and_errors(server: ServerProcess) -> None:
    artifact = call_tool(server, command="seq 1 100000")["structuredContent"]["truncation"][
        "artifactId"
    ]
    listed = server.result("resources/list")["resources"]
    assert {"uri": f"artifact://{artifact}", "name": f"artifact {artifact}"}.items() <= listed[
        0
    ].items()
    templates = server.result("resources/templates/list")["resourceTemplates"]
    assert templates[0]["uriTemplate"] == "artifact://{id}"
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
        err = server.call("resources/read", {"uri": uri})["error"]
        assert err["code"] == ErrorCode.INVALID_PARAMS and err["message"] == message
    err = server.call("resources/read", {"uri": "artifact://999"})["error"]
    assert err["code"] == ErrorCode.ARTIFACT_NOT_FOUND
    assert err["message"] == messages.artifact_not_found(999, [artifact])


def test_cancel_answers_request_cancelled_with_the_output(server: ServerProcess) -> None:
    for method, key in (("notifications/cancelled", "requestId"), ("$/cancelRequest", "id")):
        ident = server.request(
            "tools/call", {"name": "bash", "arguments": {"command": "echo begun; exec sleep 60"}}
        )
        server.wait_for(
            lambda m, i=ident: m.get("method") == "tool/update" and m["params"]["requestId"] == i
        )
        server.notify(method, {key: ident, "reason": "user"})
        reply = server.response(ident, timeout=10)
        assert reply["error"]["code"] == ErrorCode.REQUEST_CANCELLED
        assert reply["error"]["message"] == messages.REQUEST_CANCELLED
        assert reply["error"]["data"]["output"] == "begun\n"
        assert not [c for c in server.owned_commands() if "sleep 60" in c]
    # Late, repeated and unknown cancels are harmless.
    done = server.request("tools/call", {"name": "bash", "arguments": {"command": "echo x"}})
    server.response(done)
    server.notify("notifications/cancelled", {"requestId": done})
    server.notify("notifications/cancelled", {"requestId": done})
    server.notify("notifications/cancelled", {"requestId": "never-was"})
    assert text_of(call_tool(server, command="echo healthy")) == "healthy\n"


def test_tool_updates_are_snapshots_and_throttled(server: ServerProcess) -> None:
    ident = server.request(
        "tools/call",
        {
            "name": "bash",
            "arguments": {"command": "for i in $(seq 40); do echo $i; sleep 0.02; done"},
        },
    )
    server.response(ident)
    updates = [
        m["params"]
        for m in server.notifications("tool/update")
        if m["params"]["requestId"] == ident
    ]
    assert 2 <= len(updates) <= 20  # ~0.8 s at most one per 100 ms
    texts = [u["content"][0]["text"] for u in updates]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))  # snapshots grow
    assert not server.notifications("notifications/progress")


def test_progress_only_with_a_token(server: ServerProcess) -> None:
    command = "for i in $(seq 20); do echo line-$i; sleep 0.03; done"
    call_tool(server, command=command, meta={"progressToken": "tok"})
    progress = [m["params"] for m in server.notifications("notifications/progress")]
    assert progress and all(p["progressToken"] == "tok" for p in progress)
    values = [p["progress"] for p in progress]
    assert values == sorted(values) and values[-1] > 0
    assert all(p["message"].startswith("line-") and len(p["message"]) <= 200 for p in progress)


def test_opt_out_of_notifications(server: ServerProcess) -> None:
    initialize(server, optOutNotifications=["tool/update", "notifications/progress"])
    call_tool(
        server, command="for i in 1 2 3; do echo $i; sleep 0.1; done", meta={"progressToken": 1}
    )
    assert not server.notifications("tool/update")
    assert not server.notifications("notifications/progress")


def test_unknown_tool_and_bad_arguments(server: ServerProcess) -> None:
    err = server.call("tools/call", {"name": "python", "arguments": {}})["error"]
    assert err["code"] == ErrorCode.INVALID_PARAMS
    assert err["data"] == messages.UNKNOWN_TOOL.format(name="python")
    err = server.call("tools/call", {"name": "bash", "arguments": {"command": 1}})["error"]
    assert err["code"] == ErrorCode.INVALID_PARAMS and "command" in err["data"]
    err = server.call("tools/call", {"name": "bash", "arguments": {"command": "x", "extra": 1}})
    assert "extra" in err["error"]["data"]


def test_tool_calls_share_a_shell(server: ServerProcess) -> None:
    call_tool(server, command="export SHARED=yes")
    assert text_of(call_tool(server, command="echo $SHARED")) == "yes\n"
    sessions = {s["sessionId"] for s in server.result("session/list")["sessions"]}
    assert "@tools" in sessions


def test_pty_is_used_only_when_all_three_conditions_hold(spawn) -> None:
    ui = {"cols": 100, "rows": 30}
    on = {"bash": {"virtualTerminal": "on"}}
    probe = 'if test -t 1; then echo "tty $(tput cols)"; else echo pipe; fi'
    cases = [
        ({}, {"ui": ui, "settings": on}, "tty 100\n"),
        ({}, {"ui": ui}, "pipe\n"),  # virtualTerminal off (the default)
        ({"BASHRPC_NO_PTY": "1"}, {"ui": ui, "settings": on}, "pipe\n"),
        ({"PI_NO_PTY": "1"}, {"ui": ui, "settings": on}, "pipe\n"),
        ({}, {"settings": on}, "pipe\n"),  # the host declared no ui
    ]
    for env, options, expected in cases:
        server = spawn(env=env)
        initialize(server, **options)
        assert text_of(call_tool(server, command=probe)) == expected, (env, options)


def test_tool_description_follows_the_settings(spawn, tmp_path) -> None:
    cfg = tmp_path / "limits.toml"
    cfg.write_text("[output]\nmaxBytes = 20480\n[tool]\ndefaultTimeout = 60\n")
    server = spawn("--config", str(cfg))
    description = server.result("tools/list")["tools"][0]["description"]
    assert "last 20KB" in description and "default 60," in description
