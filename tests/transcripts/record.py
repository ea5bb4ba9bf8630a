"""Record the golden transcripts of tests/transcripts/ again, through `bashrpc record`.

    python -m tests.transcripts.record            # all of them
    python -m tests.transcripts.record NAME...    # some

Each scenario is a host's session, lockstep unless pipelining is the point.
Review the diff of the .jsonl files before committing them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import msgspec

from bashrpc.protocol.client import result_of
from bashrpc.protocol.mcp import (
    BASH_TOOL,
    TASK_NOTIFICATION,
    TASK_STATUS,
    TASKS_EXTENSION,
    BashToolArguments,
    CancelledParams,
    CancelRequestParams,
    ConnectionSettings,
    EmptyParams,
    HostOptions,
    Implementation,
    InterceptorOverrides,
    RequestMeta,
    ResourcesReadParams,
    TaskMetadata,
    TaskParams,
    TaskUpdateParams,
    ToolsCallParams,
)
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.protocol.methods import (
    AbortBashParams,
    ArtifactReadParams,
    BashAttachParams,
    BashParams,
    ExitParams,
    PtyInputParams,
    PtyResizeParams,
    PtyScreenParams,
    PtySize,
    SecretsAddParams,
    SecretValue,
    ServerStatsParams,
    SessionCloseParams,
    SessionListParams,
    SessionOpenParams,
    SessionResetParams,
    ShutdownParams,
)
from bashrpc.protocol.terminals import (
    CancelAcpRequestParams,
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalListParams,
    TerminalOutputParams,
    TerminalParams,
    TerminalWriteParams,
)
from tests.transcripts.host import Host

HERE = Path(__file__).resolve().parent
CLIENT = Implementation(name="golden-host", version="1")
ALL_TOOLS = ["read", "grep", "find", "edit", "write", "bash"]

Scenario = Callable[[Host], None]
SCENARIOS: dict[str, tuple[Scenario, list[str]]] = {}


def scenario(*server_args: str) -> Callable[[Scenario], Scenario]:
    def register(function: Scenario) -> Scenario:
        SCENARIOS[function.__name__] = (function, list(server_args))
        return function

    return register


def bash(command: str, **fields: object) -> BashParams:
    return BashParams(command=command, **fields)  # type: ignore[arg-type]


def initialize(host: Host, **options: object) -> None:
    host.call("initialize", initialize_params(HostOptions(**options), client=CLIENT))  # type: ignore[arg-type]
    host.notify("notifications/initialized", EmptyParams())


def tool(command: str, token: str | int | None = None, **arguments: object) -> ToolsCallParams:
    args = BashToolArguments(command=command, **arguments)  # type: ignore[arg-type]
    return ToolsCallParams(
        name=BASH_TOOL,
        arguments=msgspec.Raw(msgspec.json.encode(args)),
        meta=None if token is None else RequestMeta(progress_token=token),
    )


# -- bash ------------------------------------------------------------------------


@scenario()
def bash_state_carries_across_requests(host: Host) -> None:
    host.call("bash", bash("export GREETING=hello; mkdir -p sub && cd sub"))
    host.call("bash", bash('echo "$GREETING from $(basename "$PWD")"'))
    host.call("bash", bash('greet() { echo "hi $1"; }; greet one'))
    host.call("bash", bash("greet two; (exit 3)"))


@scenario()
def bash_output_merges_stdout_and_stderr(host: Host) -> None:
    host.call("bash", bash("echo out; echo err >&2; printf 'no newline'"))
    host.call("bash", bash("printf '\\033[31mred\\033[0m and t\\bbold\\n'; echo 'héllo ✓'"))


@scenario()
def bash_cwd_and_env_per_request(host: Host) -> None:
    host.call("bash", bash("mkdir -p a/b"))
    host.call("bash", bash('echo "$ONE $TWO"; pwd', cwd="a/b", env={"ONE": "1", "TWO": "2"}))
    host.call("bash", bash('echo "[$ONE]"; pwd'))


@scenario()
def bash_timeout(host: Host) -> None:
    host.call("bash", bash("echo before; sleep 30; echo never", timeout=1))
    host.call("bash", bash("echo the shell lives on"))


@scenario()
def bash_abort_by_request(host: Host) -> None:
    ident = host.request("bash", bash("echo started; sleep 30; echo never"))
    host.output_has(ident, "started")
    host.call("abort_bash", AbortBashParams(request_id=ident))
    host.reply(ident)
    host.call("abort_bash", AbortBashParams(request_id=ident))


@scenario()
def bash_abort_by_session(host: Host) -> None:
    ident = host.request("bash", bash("echo go; sleep 30", session_id="worker"))
    host.output_has(ident, "go")
    host.call("abort_bash", AbortBashParams(session_id="worker"))
    host.reply(ident)
    host.call("bash", bash("echo after the abort", session_id="worker"))


@scenario()
def bash_shell_exit_restarts_it(host: Host) -> None:
    host.call("bash", bash("X=kept; exit 5"))
    host.call("bash", bash('echo "X=[$X]"'))


@scenario()
def bash_truncated_output_and_artifact_read(host: Host) -> None:
    host.call("bash", bash("seq 1 50000"))
    host.call("artifact/read", ArtifactReadParams(id=1, limit=64))
    host.call("artifact/read", ArtifactReadParams(id=1, offset=288885, limit=100))


@scenario()
def artifact_read_errors(host: Host) -> None:
    host.call("artifact/read", ArtifactReadParams(id=42))
    host.raw(b'{"jsonrpc":"2.0","id":"zero","method":"artifact/read","params":{"id":1,"limit":0}}')
    host.raw(b'{"jsonrpc":"2.0","id":"neg","method":"artifact/read","params":{"id":-1}}')


# -- sessions ----------------------------------------------------------------------


@scenario()
def session_open_list_close(host: Host) -> None:
    host.call("bash", bash("mkdir -p proj"))
    host.call("session/open", SessionOpenParams(session_id="s1", cwd="proj", env={"X": "y"}))
    host.call("bash", bash('echo "X=$X in $(basename "$PWD")"', session_id="s1"))
    host.call("session/list")
    host.call("session/close", SessionCloseParams(session_id="s1"))
    host.call("session/close", SessionCloseParams(session_id="s1"))
    host.call("session/list")


@scenario()
def secrets_are_redacted(host: Host) -> None:
    """The transcript holds no secret either: the host's values are redacted in
    its requests as the server redacts them in its output."""
    added = SecretsAddParams(secrets=[SecretValue(name="DEPLOY_KEY", value="hunter2-hunter2")])
    host.call("secrets/add", added)
    host.call("bash", bash("printf 'key: %s\\n' hunter2-hunter2"))
    env = {"PLAIN": "plain-secret-1", "API_TOKEN": "tok-0123456789"}
    host.call("bash", bash('echo "$PLAIN"; echo "$API_TOKEN"', env=env, secret_env=["PLAIN"]))
    host.call("secrets/add", SecretsAddParams(secrets=[SecretValue(name="SHORT", value="1234567")]))


@scenario()
def session_generated_ids(host: Host) -> None:
    host.call("session/open", SessionOpenParams())
    host.call("session/open", SessionOpenParams())
    host.call("session/list")


@scenario()
def sessions_are_isolated(host: Host) -> None:
    host.call("bash", bash("SECRET=a-only", session_id="a"))
    host.call("bash", bash('echo "a sees [$SECRET]"', session_id="a"))
    host.call("bash", bash('echo "b sees [$SECRET]"', session_id="b"))


@scenario()
def sessions_pipelined(host: Host) -> None:
    """Pipelining is the point: two sessions at once, replies compared as a set."""
    host.call("session/open", SessionOpenParams(session_id="left"))
    host.call("session/open", SessionOpenParams(session_id="right"))
    slow = host.request("bash", bash("sleep 0.3; echo left done", session_id="left"))
    fast = host.request("bash", bash("echo right done", session_id="right"))
    host.reply(slow)
    host.reply(fast)


# -- PTY -----------------------------------------------------------------------------


@scenario()
def pty_input_answers_a_prompt(host: Host) -> None:
    ident = host.request("bash", bash("read -p 'name? ' who; echo \"hello $who\"", pty=True))
    host.output_has(ident, "name? ")
    host.call("pty/input", PtyInputParams(request_id=ident, data="ada", keys=["enter"]))
    host.reply(ident)


@scenario()
def pty_needs_input_and_a_secret(host: Host) -> None:
    command = "read -s -p 'Password: ' pw; echo; echo done"
    ident = host.request("bash", bash(command, pty=True))
    host.notified_for("bash/needsInput", ident)
    host.call("session/list", SessionListParams())
    # As long as the placeholder a replay types in its place.
    data = "not-a-real-passwd"
    host.call("pty/input", PtyInputParams(request_id=ident, data=data, keys=["enter"], secret=True))
    host.reply(ident)


@scenario()
def pty_resize_and_screen(host: Host) -> None:
    command = "echo ready; read line; stty size"
    ident = host.request("bash", bash(command, pty=PtySize(cols=80, rows=24)))
    host.output_has(ident, "ready")
    host.call("pty/resize", PtyResizeParams(request_id=ident, cols=100, rows=30))
    host.call("pty/screen", PtyScreenParams(request_id=ident))
    host.call("pty/input", PtyInputParams(request_id=ident, keys=["enter"]))
    host.reply(ident)
    host.call("pty/screen", PtyScreenParams(request_id=ident))


@scenario()
def pty_ctrl_c(host: Host) -> None:
    ident = host.request("bash", bash("echo waiting; sleep 30", pty=True))
    host.output_has(ident, "waiting")
    host.call("pty/input", PtyInputParams(request_id=ident, keys=["ctrl+c"]))
    host.reply(ident)


# -- MCP -------------------------------------------------------------------------------


@scenario()
def mcp_initialize_tools_list_ping(host: Host) -> None:
    initialize(host)
    host.call("tools/list")
    host.call("ping")


@scenario()
def tools_call_results(host: Host) -> None:
    initialize(host)
    host.call("tools/call", tool("echo hello from the tool"))
    host.call("tools/call", tool("echo failing; exit 1"))
    host.call("tools/call", tool("seq 1 10", head=3))
    host.call("tools/call", tool("true"))


@scenario()
def tools_call_as_a_task(host: Host) -> None:
    """2025-11-25's tasks: one polled to its result, one cancelled."""
    initialize(host)
    finished = TaskParams(task_id="term-1")
    host.call("tools/call", as_task(tool("echo from a task; exit 3"), ttl=60_000))
    host.call("tasks/result", finished)
    host.notified(TASK_STATUS)
    host.call("tasks/get", finished)
    host.call("tools/call", as_task(tool("exec sleep 60")))
    host.call("tasks/list")
    host.call("tasks/cancel", TaskParams(task_id="term-2"))
    host.notified(TASK_STATUS, 2)
    host.call("tasks/get", TaskParams(task_id="term-9"))


@scenario()
def mcp_modern_without_initialize(host: Host) -> None:
    """2026-07-28: no initialize; each request names its revision in `_meta`."""
    modern = RequestMeta(
        protocol_version="2026-07-28",
        client_capabilities={},
        client_info={"name": "golden-host", "version": "1"},
    )
    host.call("server/discover", EmptyParams(meta=modern))
    host.call("tools/list", EmptyParams(meta=modern))
    call = tool("echo modern")
    call.meta = modern
    host.call("tools/call", call)
    host.call("ping", EmptyParams(meta=modern))
    unknown = msgspec.structs.replace(modern, protocol_version="2099-01-01")
    host.call("tools/list", EmptyParams(meta=unknown))
    # A client that declares the tasks extension: a background call is a task.
    tasking = msgspec.structs.replace(
        modern, client_capabilities={"extensions": {TASKS_EXTENSION: {}}}
    )
    background = tool("echo from a task", run_in_background=True)
    background.meta = tasking
    host.call("tools/call", background)
    host.notified(TASK_NOTIFICATION)
    host.call("tasks/get", TaskParams(task_id="term-1", meta=tasking))
    host.call("tasks/update", TaskUpdateParams(task_id="term-1", meta=tasking))


def as_task(call: ToolsCallParams, ttl: int | None = None) -> ToolsCallParams:
    call.task = TaskMetadata(ttl=ttl)
    return call


@scenario()
def tools_call_blocked(host: Host) -> None:
    interceptor = ConnectionSettings(interceptor=InterceptorOverrides(enabled=True))
    initialize(host, tool_names=ALL_TOOLS, settings=interceptor)
    host.call("tools/call", tool("grep -rn TODO ."))
    host.call("tools/call", tool("ls | grep -c ."))


@scenario()
def tools_call_truncated(host: Host) -> None:
    initialize(host)
    host.call("tools/call", tool("seq 1 5000"))
    host.call("resources/read", ResourcesReadParams(uri="artifact://1"))


@scenario()
def tools_call_cancelled(host: Host) -> None:
    initialize(host, notifications=["tool/update"])
    first = host.request("tools/call", tool("echo begun; exec sleep 60", token="first"))
    host.notified_for("tool/update", first)
    # MCP's cancel gets no reply (the spec: the receiver SHOULD NOT respond).
    host.notify("notifications/cancelled", CancelledParams(request_id=first, reason="user"))
    second = host.request("tools/call", tool("echo again; exec sleep 60"))
    host.notified_for("tool/update", second)
    host.notify("$/cancelRequest", CancelRequestParams(id=second))
    host.reply(second)
    host.call("tools/call", tool("echo healthy"))


@scenario()
def tools_call_progress_and_updates(host: Host) -> None:
    initialize(host, notifications=["tool/update"])
    command = "for i in 1 2 3; do echo line-$i; sleep 0.1; done"
    host.call("tools/call", tool(command, token=7))


@scenario()
def resources_list_templates_read(host: Host) -> None:
    initialize(host)
    host.call("bash", bash("seq 1 30000"))
    host.call("resources/list")
    host.call("resources/templates/list")
    host.call("resources/read", ResourcesReadParams(uri="artifact://1"))
    host.call("resources/read", ResourcesReadParams(uri="artifact://99"))
    host.call("resources/read", ResourcesReadParams(uri="artifact://x"))


# -- bad input ---------------------------------------------------------------------------


@scenario()
def errors_for_bad_lines(host: Host) -> None:
    host.raw(b"this is not json")
    host.raw(b"[]")
    host.raw(b"42")
    host.raw(b'{"jsonrpc":"1.0","id":"v1","method":"bash","params":{"command":"true"}}')
    host.raw(b'{"jsonrpc":"2.0","id":"str","method":"bash","params":"echo"}')
    host.raw(b'{"jsonrpc":"2.0","id":"utf8","method":"bash","params":{"command":"\xff"}}')
    host.call("bash", bash("echo still serving"))


@scenario()
def errors_for_bad_params(host: Host) -> None:
    host.raw(b'{"jsonrpc":"2.0","id":"missing","method":"bash","params":{}}')
    host.raw(b'{"jsonrpc":"2.0","id":"unknown","method":"bash","params":{"command":"x","y":1}}')
    host.raw(b'{"jsonrpc":"2.0","id":"type","method":"bash","params":{"command":5}}')
    host.raw(b'{"jsonrpc":"2.0","id":"method","method":"no/such/method"}')
    host.call("session/close", SessionCloseParams(session_id="never-opened"))
    host.call("pty/input", PtyInputParams(request_id="nothing", data="x"))
    host.call("bash/attach", BashAttachParams(request_id="nothing"))
    host.call("abort_bash", AbortBashParams())


@scenario()
def batches(host: Host) -> None:
    host.raw(
        b'[{"jsonrpc":"2.0","id":"b1","method":"bash","params":{"command":"echo in a batch"}},'
        b'{"jsonrpc":"2.0","id":"b2","method":"ping"}]'
    )
    host.raw(b'[{"jsonrpc":"2.0","id":"ok","method":"ping"},17]')


@scenario()
def shutdown_then_exit(host: Host) -> None:
    host.call("bash", bash("echo last words"))
    host.call("shutdown", ShutdownParams())
    host.notify("exit", ExitParams())


# -- the daemon ---------------------------------------------------------------------------


@scenario("attach")
def daemon_bash_attach_replays_a_request(host: Host) -> None:
    """An attach from the request's own connection follows it: the chunks so
    far, then the live ones, then its result."""
    initialize(host, client_id="golden-host")
    waiting = "echo one; until [ -e go ]; do sleep 0.05; done; echo two"
    ident = host.request("bash", bash(waiting))
    host.output_has(ident, "one")
    attach = host.request("bash/attach", BashAttachParams(request_id=ident))
    # From another session: the command ends only once the attach follows it.
    host.call("bash", bash("touch go", session_id="other"))
    host.reply(ident)
    host.reply(attach)
    host.call("bash/attach", BashAttachParams(request_id=ident))


@scenario("attach")
def daemon_sessions_of_a_client(host: Host) -> None:
    initialize(host, client_id="golden-host")
    host.call("session/open", SessionOpenParams(session_id="mine"))
    host.call("bash", bash("echo in the daemon", session_id="mine"))
    host.call("session/list")


# -- fleet and background jobs ----------------------------------------------------------


@scenario()
def server_stats_and_session_reset(host: Host) -> None:
    # First, before any command: every figure is still zero, whatever the machine.
    host.call("server/stats", ServerStatsParams())
    host.call("bash", bash("mkdir -p sub && cd sub && export LEFT=over"))
    host.call("session/reset", SessionResetParams(session_id="default"))
    host.call("bash", bash('pwd; echo "LEFT=[$LEFT]"'))
    host.call("session/reset", SessionResetParams(session_id="nope"))


@scenario()
def terminals_acp_lifecycle(host: Host) -> None:
    created = host.call(
        "terminal/create",
        TerminalCreateParams(session_id="jobs", command="printf", args=["one\\ntwo\\n"]),
    )
    terminal = result_of(created, TerminalCreateResult).terminal_id
    job = TerminalParams(session_id="jobs", terminal_id=terminal)
    host.call("terminal/wait_for_exit", job)
    host.notified("terminal/exited")
    host.call("terminal/output", TerminalOutputParams(session_id="jobs", terminal_id=terminal))
    host.call("terminal/list", TerminalListParams(session_id="jobs"))
    host.call("terminal/kill", job)
    host.call("terminal/release", job)
    host.call("terminal/output", TerminalOutputParams(session_id="jobs", terminal_id=terminal))
    # ACP's cancel: the wait answers -32800, the job runs on until its release.
    created = host.call(
        "terminal/create", TerminalCreateParams(session_id="jobs", command="sleep 60")
    )
    sleeper = TerminalParams(
        session_id="jobs", terminal_id=result_of(created, TerminalCreateResult).terminal_id
    )
    wait = host.request("terminal/wait_for_exit", sleeper)
    host.call(
        "terminal/output", TerminalOutputParams(session_id="jobs", terminal_id=sleeper.terminal_id)
    )
    host.notify("$/cancel_request", CancelAcpRequestParams(request_id=wait))
    host.reply(wait)
    host.call("terminal/release", sleeper)


@scenario()
def terminals_stdin_and_cursor(host: Host) -> None:
    created = host.call("terminal/create", TerminalCreateParams(session_id="jobs", command="cat"))
    terminal = result_of(created, TerminalCreateResult).terminal_id
    job = TerminalParams(session_id="jobs", terminal_id=terminal)
    host.call(
        "terminal/write",
        TerminalWriteParams(session_id="jobs", terminal_id=terminal, data="first\n"),
    )
    host.call("terminal/close_stdin", job)
    host.call("terminal/wait_for_exit", job)
    host.notified("terminal/exited")
    host.call(
        "terminal/output",
        TerminalOutputParams(session_id="jobs", terminal_id=terminal, after_offset=0),
    )
    host.call(
        "terminal/output",
        TerminalOutputParams(session_id="jobs", terminal_id=terminal, after_offset=6),
    )
    host.call("terminal/release", job)


def record(names: list[str]) -> None:
    for name in names:
        function, server_args = SCENARIOS[name]
        with Host(HERE / f"{name}.jsonl", server_args) as host:
            function(host)
        print(f"recorded {name}")


if __name__ == "__main__":
    chosen = sys.argv[1:] or sorted(SCENARIOS)
    unknown = [n for n in chosen if n not in SCENARIOS]
    if unknown:
        sys.exit(f"no such scenario: {', '.join(unknown)}")
    record(chosen)
