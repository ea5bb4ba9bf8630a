"""Background jobs through the real `bashrpc` process: ACP's `terminal/*` with
ACP's own example payloads, bashrpc's cursor, stdin, listing, readiness,
the wake-up, and the bounds (counted in /proc)."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import ServerMessage
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.methods import (
    ArtifactReadParams,
    ArtifactReadResult,
    BashParams,
    SessionCloseParams,
    SessionOpenParams,
)
from bashrpc.protocol.terminals import (
    EnvVariable,
    Readiness,
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalEmptyResult,
    TerminalExited,
    TerminalListParams,
    TerminalListResult,
    TerminalOutputParams,
    TerminalOutputResult,
    TerminalParams,
    TerminalWaitResult,
    TerminalWriteParams,
    TerminalWriteResult,
)
from tests.conftest import SpawnProcess
from tests.rpc import (
    RpcClient,
    ServerProcess,
    error_of,
    marked_processes,
    ok_result,
    wait_until,
)
from tests.sandboxing import skip_without_sandbox

pytestmark = pytest.mark.slow

# Generous: only to catch a hang.
BOUND_SECONDS = 60.0
SESSION = "sess_abc123def456"


def acp_line(ident: int, method: str, params_json: str) -> bytes:
    """A request exactly as an ACP client writes it (the payload is ACP's text)."""
    return (
        f'{{"jsonrpc": "2.0", "id": {ident}, "method": "{method}", "params": {params_json}}}\n'
    ).encode()


def acp_call(client: RpcClient, ident: int, method: str, params_json: str) -> ServerMessage:
    client.send_raw(acp_line(ident, method, params_json))
    return client.response(ident, BOUND_SECONDS)


def create(client: RpcClient, command: str, session: str = SESSION, **fields: Any) -> str:
    params = TerminalCreateParams(session_id=session, command=command, **fields)
    return client.typed(TerminalCreateResult, "terminal/create", params, BOUND_SECONDS).terminal_id


def ref(terminal_id: str, session: str = SESSION) -> TerminalParams:
    return TerminalParams(session_id=session, terminal_id=terminal_id)


def output(
    client: RpcClient, terminal_id: str, session: str = SESSION, **fields: Any
) -> TerminalOutputResult:
    params = TerminalOutputParams(session_id=session, terminal_id=terminal_id, **fields)
    return client.typed(TerminalOutputResult, "terminal/output", params)


def wait_exit(client: RpcClient, terminal_id: str, session: str = SESSION) -> TerminalWaitResult:
    params = ref(terminal_id, session)
    return client.typed(TerminalWaitResult, "terminal/wait_for_exit", params, BOUND_SECONDS)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_acp_example_payloads_forwarded_unchanged(process: ServerProcess, tmp_path: Path) -> None:
    # ACP's example of terminal/create, with a command and a cwd that exist here.
    create_json = (
        '{"sessionId": "sess_abc123def456", "command": "sh",'
        ' "args": ["-c", "echo Running tests; echo env=$NODE_ENV; pwd"],'
        ' "env": [{"name": "NODE_ENV", "value": "test"}],'
        f' "cwd": "{tmp_path}", "outputByteLimit": 1048576,'
        ' "_meta": {"editor": "ignored"}}'
    )
    created = ok_result(acp_call(process, 5, "terminal/create", create_json), TerminalCreateResult)
    ids = f'{{"sessionId": "sess_abc123def456", "terminalId": "{created.terminal_id}"}}'
    waited = ok_result(acp_call(process, 7, "terminal/wait_for_exit", ids), TerminalWaitResult)
    assert (waited.exit_code, waited.signal) == (0, None)
    got = ok_result(acp_call(process, 6, "terminal/output", ids), TerminalOutputResult)
    assert got.output == f"Running tests\nenv=test\n{tmp_path}\n"
    assert got.truncated is False
    assert got.exit_status is not None
    assert (got.exit_status.exit_code, got.exit_status.signal) == (0, None)
    raw = process.raw_lines
    assert any(b'"exitStatus":{"exitCode":0,"signal":null}' in line for line in raw)
    assert ok_result(acp_call(process, 8, "terminal/kill", ids), TerminalEmptyResult) == (
        TerminalEmptyResult()
    )
    assert ok_result(acp_call(process, 9, "terminal/release", ids), TerminalEmptyResult) == (
        TerminalEmptyResult()
    )
    gone = error_of(acp_call(process, 10, "terminal/output", ids))
    assert gone.code == ErrorCode.RESOURCE_NOT_FOUND


def test_create_does_not_wait_and_kill_keeps_the_terminal(process: ServerProcess) -> None:
    terminal = create(process, "echo started; exec sleep 300")
    assert wait_until(lambda: output(process, terminal).output == "started\n", BOUND_SECONDS)
    assert output(process, terminal).exit_status is None
    assert (
        process.typed(TerminalEmptyResult, "terminal/kill", ref(terminal)) == TerminalEmptyResult()
    )
    status = wait_exit(process, terminal)
    assert (status.exit_code, status.signal) == (None, "SIGKILL")
    # Killed, not released: its output and status are still there.
    after = output(process, terminal)
    assert after.output == "started\n"
    assert after.exit_status is not None and after.exit_status.signal == "SIGKILL"
    assert process.owned_processes() == []
    process.typed(TerminalEmptyResult, "terminal/release", ref(terminal))
    gone = error_of(process.call("terminal/output", ref(terminal)))
    assert gone.code == ErrorCode.RESOURCE_NOT_FOUND


def test_a_released_job_leaves_no_process_setsid_escapees_included(process: ServerProcess) -> None:
    terminal = create(process, "setsid sleep 300 & setsid -f sleep 301; echo up; sleep 302")
    assert wait_until(lambda: len(process.owned_processes()) >= 4, BOUND_SECONDS)
    process.typed(TerminalEmptyResult, "terminal/release", ref(terminal), BOUND_SECONDS)
    assert process.owned_processes() == []


def test_what_a_job_leaves_running_dies_with_it(process: ServerProcess) -> None:
    terminal = create(process, "setsid sleep 300 & echo done")
    assert wait_exit(process, terminal).exit_code == 0
    assert wait_until(lambda: process.owned_processes() == [], BOUND_SECONDS)


def test_a_job_runs_in_its_sessions_directory_and_environment(
    process: ServerProcess, tmp_path: Path
) -> None:
    place = tmp_path / "place"
    place.mkdir()
    opened = SessionOpenParams(session_id=SESSION, cwd="place", env={"FROM_SESSION": "yes"})
    process.result("session/open", opened)
    terminal = create(
        process,
        "echo $FROM_SESSION $ONLY_HERE; pwd",
        env=[EnvVariable(name="ONLY_HERE", value="too")],
    )
    wait_exit(process, terminal)
    assert output(process, terminal).output == f"yes too\n{place}\n"


def test_a_job_runs_in_its_sessions_sandbox(spawn_process: SpawnProcess, tmp_path: Path) -> None:
    skip_without_sandbox()
    server = spawn_process("--sandbox", "read-only")
    terminal = create(server, f"touch {tmp_path}/written")
    assert wait_exit(server, terminal).exit_code != 0
    assert not (tmp_path / "written").exists()


def test_a_sandboxed_job_killed_or_released_leaves_no_process(
    spawn_process: SpawnProcess,
) -> None:
    skip_without_sandbox()
    server = spawn_process("--sandbox", "workspace-write")
    killed = create(server, "setsid sleep 300 & echo up; exec sleep 301")
    released = create(server, "exec sleep 302", session="second")
    assert wait_until(lambda: output(server, killed).output == "up\n", BOUND_SECONDS)
    server.typed(TerminalEmptyResult, "terminal/kill", ref(killed), BOUND_SECONDS)
    assert wait_exit(server, killed).signal is not None
    server.typed(TerminalEmptyResult, "terminal/release", ref(released, "second"), BOUND_SECONDS)
    assert server.owned_processes() == []


def test_stdin_write_then_close(process: ServerProcess) -> None:
    terminal = create(process, "while read -r line; do echo got:$line; done; echo eof")
    params = TerminalWriteParams(session_id=SESSION, terminal_id=terminal, data="hello\nworld\n")
    written = process.typed(TerminalWriteResult, "terminal/write", params)
    assert written.bytes_written == len("hello\nworld\n")
    assert wait_until(lambda: output(process, terminal).output == "got:hello\ngot:world\n")
    process.typed(TerminalEmptyResult, "terminal/close_stdin", ref(terminal))
    assert wait_exit(process, terminal).exit_code == 0
    assert output(process, terminal).output.endswith("eof\n")
    closed = error_of(process.call("terminal/write", params))
    assert closed.code == ErrorCode.INVALID_PARAMS


def test_a_cursor_returns_only_new_output_and_names_a_gap(
    spawn_process: SpawnProcess, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[jobs]\nringBytes = 1024\n")
    server = spawn_process("--config", str(config))
    terminal = create(server, "echo first; read -r; seq 1 2000")
    assert wait_until(lambda: output(server, terminal, after_offset=0).output == "first\n")
    first = output(server, terminal, after_offset=0)
    assert (first.next_offset, first.gap) == (6, None)
    assert output(server, terminal, after_offset=first.next_offset).output == ""
    write = TerminalWriteParams(session_id=SESSION, terminal_id=terminal, data="\n")
    server.typed(TerminalWriteResult, "terminal/write", write)
    wait_exit(server, terminal)
    whole = "first\n" + "".join(f"{n}\n" for n in range(1, 2001))
    later = output(server, terminal, after_offset=first.next_offset)
    # Memory keeps 1 KiB: the cursor's bytes are gone, and the answer says which.
    assert later.truncated is True and later.gap is not None
    assert later.gap.from_offset == first.next_offset
    assert later.gap.to_offset == len(whole) - len(later.output)
    assert later.next_offset == len(whole)
    assert whole.endswith(later.output) and 0 < len(later.output) <= 1024
    assert later.gap.artifact_id is not None
    read = ArtifactReadParams(id=later.gap.artifact_id, limit=1024 * 1024)
    assert server.typed(ArtifactReadResult, "artifact/read", read).text == whole
    # ACP's answer (no cursor) is the newest output, flagged truncated.
    newest = output(server, terminal)
    assert newest.truncated is True and newest.output == later.output


def test_the_gap_of_a_running_job_is_in_its_artifact_already(
    spawn_process: SpawnProcess, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[jobs]\nringBytes = 1024\n")
    server = spawn_process("--config", str(config))
    terminal = create(server, "seq 1 3000; exec sleep 300")
    whole = "".join(f"{n}\n" for n in range(1, 3001))
    assert wait_until(lambda: output(server, terminal).output.endswith("3000\n"), BOUND_SECONDS)
    got = output(server, terminal, after_offset=0)
    assert got.gap is not None and got.gap.artifact_id is not None
    assert got.exit_status is None
    read = ArtifactReadParams(id=got.gap.artifact_id, limit=got.gap.to_offset)
    missed = server.typed(ArtifactReadResult, "artifact/read", read).text
    assert missed + got.output == whole


def test_output_byte_limit_keeps_the_newest_bytes(process: ServerProcess) -> None:
    terminal = create(process, "printf 'aaaa\\nbbbb\\n'", output_byte_limit=5)
    wait_exit(process, terminal)
    got = output(process, terminal)
    assert (got.output, got.truncated) == ("bbbb\n", True)


def test_listing_shows_state_pid_exit_and_bytes(process: ServerProcess) -> None:
    running = create(process, "echo hi; exec sleep 300")
    done = create(process, "exit 3", session="other")
    assert wait_until(lambda: output(process, running).output == "hi\n")
    wait_exit(process, done, session="other")
    listing = process.typed(TerminalListResult, "terminal/list", TerminalListParams())
    by_id = {t.terminal_id: t for t in listing.terminals}
    assert by_id[running].state == "running" and by_id[running].pid is not None
    assert by_id[running].total_bytes == 3 and by_id[running].exit_status is None
    ended = by_id[done]
    assert ended.state == "exited" and ended.pid is None
    assert ended.exit_status is not None
    assert ended.exit_status.exit_code == 3
    mine = process.typed(
        TerminalListResult, "terminal/list", TerminalListParams(session_id="other")
    )
    assert [t.terminal_id for t in mine.terminals] == [done]


def test_a_job_from_another_session_is_not_found(process: ServerProcess) -> None:
    terminal = create(process, "true")
    refused = error_of(process.call("terminal/output", ref(terminal, session="elsewhere")))
    assert refused.code == ErrorCode.RESOURCE_NOT_FOUND


def test_the_end_of_a_job_is_notified(process: ServerProcess) -> None:
    terminal = create(process, "exit 7")
    process.wait_for(lambda m: m.method == "terminal/exited", BOUND_SECONDS)
    told = process.notified("terminal/exited", TerminalExited)
    assert [(t.terminal_id, t.exit_status.exit_code) for t in told] == [(terminal, 7)]


def test_jobs_per_session_are_bounded(spawn_process: SpawnProcess, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[jobs]\nmaxPerSession = 2\nmaxTotal = 3\n")
    server = spawn_process("--config", str(config))
    for _ in range(2):
        create(server, "exec sleep 300")
    params = TerminalCreateParams(session_id=SESSION, command="exec sleep 300")
    refused = error_of(server.call("terminal/create", params))
    assert refused.code == ErrorCode.TOO_MANY_JOBS
    create(server, "exec sleep 300", session="second")
    other = TerminalCreateParams(session_id="third", command="exec sleep 300")
    assert error_of(server.call("terminal/create", other)).code == ErrorCode.TOO_MANY_JOBS
    assert len(server.owned_processes()) == 3


@pytest.mark.parametrize("how", ["exit", "shutdown", "sigterm", "eof"])
def test_every_end_of_the_server_ends_all_jobs(spawn_process: SpawnProcess, how: str) -> None:
    server = spawn_process()
    for session in ("a", "b"):
        create(server, "setsid sleep 300 & exec sleep 301", session=session)
    assert wait_until(lambda: len(server.owned_processes()) == 4, BOUND_SECONDS)
    pid = server.server_pid
    if how == "exit":
        server.notify("exit")
    elif how == "shutdown":
        server.result("shutdown")
        server.notify("exit")
    elif how == "sigterm":
        os.kill(pid, signal.SIGTERM)
    server.close(BOUND_SECONDS)
    assert server.owned_processes() == []


def test_session_close_ends_its_jobs(process: ServerProcess) -> None:
    create(process, "exec sleep 300")
    kept = create(process, "exec sleep 300", session="kept")
    assert wait_until(lambda: len(process.owned_processes()) == 2, BOUND_SECONDS)
    process.result("session/close", SessionCloseParams(session_id=SESSION))
    assert len(process.owned_processes()) == 1
    assert output(process, kept, session="kept").exit_status is None


@pytest.mark.parametrize("by", ["port", "log"])
def test_a_dev_server_waited_for_by_port_and_by_log_line(process: ServerProcess, by: str) -> None:
    port = free_port()
    ready = (
        Readiness(port=port, timeout=BOUND_SECONDS)
        if by == "port"
        else Readiness(log=rf"Serving HTTP on \S+ port {port}", timeout=BOUND_SECONDS)
    )
    params = TerminalCreateParams(
        session_id=SESSION,
        command=sys.executable,
        args=["-m", "http.server", "--bind", "127.0.0.1", str(port)],
        ready=ready,
    )
    created = process.typed(TerminalCreateResult, "terminal/create", params, BOUND_SECONDS)
    assert created.ready is not None and created.ready.state == "ready"
    if by == "log":
        assert created.ready.matched == f"Serving HTTP on 127.0.0.1 port {port}"
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND_SECONDS) as conn:
        conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert conn.recv(12).startswith(b"HTTP/1.0 200")
    process.typed(TerminalEmptyResult, "terminal/kill", ref(created.terminal_id), BOUND_SECONDS)
    assert process.owned_processes() == []


def test_readiness_says_when_the_job_exits_first_or_the_time_is_up(process: ServerProcess) -> None:
    exits = TerminalCreateParams(
        session_id=SESSION, command="echo nope", ready=Readiness(log="never")
    )
    early = process.typed(TerminalCreateResult, "terminal/create", exits, BOUND_SECONDS)
    assert early.ready is not None and early.ready.state == "exited"
    slow = TerminalCreateParams(
        session_id=SESSION, command="exec sleep 300", ready=Readiness(port=free_port(), timeout=0.5)
    )
    late = process.typed(TerminalCreateResult, "terminal/create", slow, BOUND_SECONDS)
    assert late.ready is not None and late.ready.state == "timeout"
    assert output(process, late.terminal_id).exit_status is None


def test_a_bad_pattern_is_refused_before_anything_starts(process: ServerProcess) -> None:
    params = TerminalCreateParams(
        session_id=SESSION, command="exec sleep 300", ready=Readiness(log="(")
    )
    refused = error_of(process.call("terminal/create", params))
    assert refused.code == ErrorCode.INVALID_PARAMS
    assert "ready.log" in refused.message
    listing = process.typed(TerminalListResult, "terminal/list", TerminalListParams())
    assert listing.terminals == []


def test_a_missing_program_is_refused(process: ServerProcess) -> None:
    params = TerminalCreateParams(session_id=SESSION, command="no-such-program-here", args=[])
    refused = error_of(process.call("terminal/create", params))
    assert refused.code == ErrorCode.INVALID_PARAMS


def test_bash_background_answers_at_once_in_the_sessions_cwd_and_env(
    process: ServerProcess, tmp_path: Path
) -> None:
    (tmp_path / "sub").mkdir()
    process.result("session/open", SessionOpenParams(session_id=SESSION, env={"MINE": "kept"}))
    process.bash("cd sub", session_id=SESSION)
    command = "echo $MINE; pwd; exec -a bg-marker-1 sleep 300"
    started = process.bash(command, session_id=SESSION, background=True)
    assert started.terminal_id is not None and started.exit_code is None
    assert started.output == messages.JOB_STARTED.format(terminal_id=started.terminal_id) + "\n"
    expected = f"kept\n{tmp_path / 'sub'}\n"
    assert wait_until(lambda: output(process, started.terminal_id or "").output == expected)
    # The session's own shell is free meanwhile.
    assert process.bash("echo free", session_id=SESSION).output == "free\n"
    assert marked_processes("bg-marker-1") != []
    process.typed(TerminalEmptyResult, "terminal/release", ref(started.terminal_id))
    assert marked_processes("bg-marker-1") == []


def test_bash_background_after_answers_a_quick_command_as_usual(process: ServerProcess) -> None:
    done = process.bash("echo quick; exit 4", background_after=BOUND_SECONDS)
    assert (done.output, done.exit_code, done.terminal_id) == ("quick\n", 4, None)
    listing = process.typed(TerminalListResult, "terminal/list", TerminalListParams())
    assert listing.terminals == []


def test_bash_background_after_hands_a_slow_command_over_to_a_job(process: ServerProcess) -> None:
    slow = process.bash("echo early; exec -a bg-marker-2 sleep 300", background_after=1)
    assert slow.terminal_id is not None and slow.exit_code is None
    notice = messages.JOB_STILL_RUNNING.format(seconds=1, terminal_id=slow.terminal_id)
    assert slow.output == f"{notice}\nearly\n"
    listing = process.typed(TerminalListResult, "terminal/list", TerminalListParams())
    assert [(t.terminal_id, t.state) for t in listing.terminals] == [(slow.terminal_id, "running")]
    assert marked_processes("bg-marker-2") != []
    process.typed(TerminalEmptyResult, "terminal/kill", ref(slow.terminal_id, "default"))
    assert marked_processes("bg-marker-2") == []


def test_bash_background_refuses_what_a_job_cannot_do(process: ServerProcess) -> None:
    for params in (
        BashParams(command="true", background=True, timeout=5),
        BashParams(command="true", background_after=1, pty=True),
    ):
        assert error_of(process.call("bash", params)).code == ErrorCode.INVALID_PARAMS


def test_an_aborted_background_after_request_takes_its_command_with_it(
    process: ServerProcess,
) -> None:
    params = BashParams(command="exec -a bg-marker-3 sleep 300", background_after=BOUND_SECONDS)
    ident = process.request("bash", params)
    assert wait_until(lambda: marked_processes("bg-marker-3") != [], BOUND_SECONDS)
    assert process.abort(request_id=ident)
    assert error_of(process.response(ident, BOUND_SECONDS)).code == ErrorCode.REQUEST_CANCELLED
    assert marked_processes("bg-marker-3") == []
    listing = process.typed(TerminalListResult, "terminal/list", TerminalListParams())
    assert listing.terminals == []
