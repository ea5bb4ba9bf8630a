"""Background jobs on an in-process server: bounds that need many jobs."""

from __future__ import annotations

import itertools
import socket
import time
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.client import ClientCore
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import BashToolArguments, CallToolResult, CancelledParams
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import (
    AbortBashParams,
    BashParams,
    SessionListParams,
    SessionListResult,
)
from bashrpc.protocol.terminals import (
    Readiness,
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalEmptyResult,
    TerminalListParams,
    TerminalListResult,
    TerminalOutputParams,
    TerminalOutputResult,
    TerminalParams,
    TerminalWaitResult,
)
from bashrpc.server.runtime.jobs.job import Job
from bashrpc.server.runtime.jobs.table import MAX_EXITED_KEPT
from bashrpc.server.services.held import Hold
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer
from tests.rpc import error_of, ok_result, request_line, wait_until

BOUND_SECONDS = 60.0
RC = "alias greet='echo hello from the rc'\n"
PREFIX = "prefix = 'FROM_PREFIX=set'\n"
SANDBOXES = {"off": "", "workspace-write": '[sandbox]\nmode = "workspace-write"\n'}


def listing(server: InProcessServer) -> TerminalListResult:
    return server.typed(TerminalListResult, "terminal/list", TerminalListParams())


# Long enough for a call that was not cancelled to start its job, many times over.
WENT_AHEAD_SECONDS = 3.0
# A command that would outlive any test, were it started.
LONG_COMMAND = "exec sleep 300"
BACKGROUND_REQUESTS = {
    "background": BashParams(command=LONG_COMMAND, background=True),
    "backgroundAfter": BashParams(command=LONG_COMMAND, background_after=BOUND_SECONDS),
}


@pytest.mark.parametrize("kind", BACKGROUND_REQUESTS)
def test_a_background_request_aborted_before_it_starts_starts_nothing(
    server: InProcessServer, kind: str
) -> None:
    """The abort comes in the same write, so it is read before the request's task
    starts: the request is cancelled, and no job runs for it."""
    server.send_raw(
        request_line("run", "bash", BACKGROUND_REQUESTS[kind])
        + request_line("stop", "abort_bash", AbortBashParams(request_id="run"))
    )
    assert error_of(server.response("run", BOUND_SECONDS)).code == ErrorCode.REQUEST_CANCELLED
    assert listing(server).terminals == []
    assert not [c for c in server.owned_commands() if "sleep 300" in c]


def test_a_background_tool_call_cancelled_before_it_starts_gets_no_response(
    server: InProcessServer,
) -> None:
    call = bash_tool_call(BashToolArguments(command=LONG_COMMAND, run_in_background=True))
    cancel = ClientCore().notification(
        "notifications/cancelled", CancelledParams(request_id="call")
    )
    server.send_raw(request_line("call", "tools/call", call) + cancel)
    # What a call that went ahead shows within a few seconds, here not at all.
    went_ahead = wait_until(
        lambda: bool(listing(server).terminals) or any(m.id == "call" for m in server.messages),
        WENT_AHEAD_SECONDS,
    )
    assert not went_ahead
    assert not [c for c in server.owned_commands() if "sleep 300" in c]


def test_a_running_job_released_ends_without_an_error(server: InProcessServer) -> None:
    """Its program's end comes after the release: the job is gone, and the end is
    no error in the server's log."""
    params = TerminalCreateParams(session_id="rel", command=LONG_COMMAND)
    job = server.typed(TerminalCreateResult, "terminal/create", params).terminal_id
    ident = TerminalParams(session_id="rel", terminal_id=job)
    server.typed(TerminalEmptyResult, "terminal/release", ident)
    assert listing(server).terminals == []
    assert not [c for c in server.owned_commands() if "sleep 300" in c]
    assert server.stderr() == ""


def finished_output(server: InProcessServer, params: TerminalCreateParams) -> str:
    """The whole output of a job started with `params`, once it has exited."""
    job = server.typed(TerminalCreateResult, "terminal/create", params).terminal_id
    ident = TerminalParams(session_id=params.session_id, terminal_id=job)
    waited = server.typed(TerminalWaitResult, "terminal/wait_for_exit", ident)
    assert waited.exit_code == 0
    asked = TerminalOutputParams(session_id=params.session_id, terminal_id=job)
    return server.typed(TerminalOutputResult, "terminal/output", asked).output


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_shell_text_replays_the_rc_and_the_prefix_a_program_runs_as_given(
    spawn: SpawnInProcess, tmp_path: Path, sandbox: str
) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".bashrc").write_text(RC)
    server = spawn(PREFIX + SANDBOXES[sandbox])
    # The prefix goes before the text, as a PTY command's: its first command sees it.
    text = TerminalCreateParams(session_id="rc", command="env | grep -c ^FROM_PREFIX=set$; greet")
    assert finished_output(server, text) == "1\nhello from the rc\n"
    # A program with arguments: no shell, no rc, no prefix.
    program = TerminalCreateParams(session_id="rc", command="echo", args=["greet", "$HOME"])
    assert finished_output(server, program) == "greet $HOME\n"


def test_ended_jobs_nobody_released_are_kept_to_a_bound(spawn: SpawnInProcess) -> None:
    server = spawn("[jobs]\nmaxPerSession = 100\nmaxTotal = 100\n")
    ids = []
    for _ in range(MAX_EXITED_KEPT + 6):
        params = TerminalCreateParams(session_id="many", command="true")
        ids.append(server.typed(TerminalCreateResult, "terminal/create", params).terminal_id)
        assert wait_until(
            lambda: all(t.state == "exited" for t in listing(server).terminals), BOUND_SECONDS
        )
    kept = [t.terminal_id for t in listing(server).terminals]
    # The newest are kept, the oldest forgotten.
    assert kept == ids[-MAX_EXITED_KEPT:]


def test_a_background_tool_call_past_the_job_limit_is_a_tool_error(
    spawn: SpawnInProcess,
) -> None:
    """The model reads why (an MCP client raises on a JSON-RPC error, and the
    model never sees it); the job it has is untouched."""
    server = spawn("[jobs]\nmaxPerSession = 1\nmaxTotal = 4\n")
    call = bash_tool_call(BashToolArguments(command=LONG_COMMAND, run_in_background=True))
    first = server.typed(CallToolResult, "tools/call", call, BOUND_SECONDS)
    assert not first.is_error
    refused = server.typed(CallToolResult, "tools/call", call, BOUND_SECONDS)
    assert refused.is_error
    assert refused.text == messages.TOO_MANY_JOBS_TOOL.format(live=1, limit=1)
    assert [t.state for t in listing(server).terminals] == ["running"]


# `(a+)+$` over this many a's and a `!` backtracks for minutes (2^30 ways to split,
# about 0.1 us each): a search on the event loop would freeze it far longer than
# any machine's load delays a ping.
CATASTROPHIC_LINE = "a" * 30 + "!"
# A ping takes about a millisecond, and up to a second on a loaded machine (the
# OS runs the loop late): a gap ten times that is a frozen loop.
PING_BOUND_SECONDS = 10.0


def test_a_catastrophic_ready_pattern_never_freezes_the_server(
    server: InProcessServer, tmp_path: Path
) -> None:
    """The search runs off the event loop, and `ready.timeout` wins over it."""
    go = tmp_path / "go"
    command = (
        f"until [ -e {go} ]; do sleep 0.05; done; printf '{CATASTROPHIC_LINE}'; exec sleep 300"
    )
    params = TerminalCreateParams(
        session_id="default", command=command, ready=Readiness(log="(a+)+$", timeout=2.0)
    )
    creating = server.request("terminal/create", params)
    go.touch()
    # A frozen loop holds the interpreter too, this thread's sleeps included: what
    # shows it is the time between two answers.
    answered = [time.monotonic()]
    while not any(m.id == creating for m in server.messages):
        server.result("ping", timeout=BOUND_SECONDS)
        answered.append(time.monotonic())
        time.sleep(0.05)
    created = ok_result(server.response(creating, BOUND_SECONDS), TerminalCreateResult)
    assert created.ready is not None and created.ready.state == "timeout"
    gaps = [later - earlier for earlier, later in itertools.pairwise(answered)]
    assert max(gaps) < PING_BOUND_SECONDS, gaps
    assert created.ready.seconds < 2.0 + PING_BOUND_SECONDS


def test_a_ready_port_another_process_listens_on_is_not_the_jobs(
    server: InProcessServer,
) -> None:
    with socket.socket() as theirs:
        theirs.bind(("127.0.0.1", 0))
        theirs.listen()
        port = int(theirs.getsockname()[1])
        params = TerminalCreateParams(
            session_id="default",
            command="exec sleep 300",
            ready=Readiness(port=port, timeout=1.0),
        )
        created = server.typed(TerminalCreateResult, "terminal/create", params, BOUND_SECONDS)
    assert created.ready is not None and created.ready.state == "timeout"


def test_a_command_whose_session_closed_is_not_kept_as_a_job_of_a_new_one(
    server: InProcessServer,
) -> None:
    """A command that waits for its person goes on as a job of its session
    (`held.py`). When that session was closed as its wait was told (the close
    aborts it, and its end comes a moment later), it is no job: its session is
    not made again for it, and its request waits for its end."""
    assert server.connection is not None
    services = server.connection.services

    async def adopt_into_a_closed_session() -> Job | None:
        hold = Hold(services.commands, "held", "closed-meanwhile")
        try:
            return services.jobs.adopt(hold, "read answer", None, announce=True)
        finally:
            # Its command's end, which the close brings.
            hold.end_of_output()
            hold.finished(None)

    assert server.run(adopt_into_a_closed_session) is None
    listed = server.typed(SessionListResult, "session/list", SessionListParams())
    assert "closed-meanwhile" not in {s.session_id for s in listed.sessions}
    assert listing(server).terminals == []
