"""The `bash` method end to end: persistence, end detection, abort, timeout, output."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import time
from pathlib import Path

from bashrpc.protocol import messages
from bashrpc.protocol.client import notification_params
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import EmptyResult
from bashrpc.protocol.methods import (
    ArtifactReadParams,
    ArtifactReadResult,
    BashChunk,
    BashParams,
    SessionCloseParams,
    SessionCloseResult,
    SessionOpenParams,
    SessionOpenResult,
)
from bashrpc.server.runtime.seam import noterminal
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer
from tests.rpc import wait_until

# Generous bounds that only catch hangs (about 10x the expected figure).
HANG_SECONDS = 10.0


def test_state_persists_between_calls(server: InProcessServer) -> None:
    server.bash("export X=1")
    assert server.bash("echo $X").output == "1\n"
    server.bash('greet() { echo "hello $1"; }')
    assert server.bash("greet world").output == "hello world\n"
    server.bash("alias ll='echo aliased'")
    assert server.bash("ll").output == "aliased\n"
    result = server.bash("cd /tmp")
    assert result.working_dir == "/tmp"
    assert server.bash("pwd").output == "/tmp\n"


def test_cwd_param_is_relative_to_the_session_cwd(server: InProcessServer) -> None:
    (server.tmp / "sub" / "deeper").mkdir(parents=True)
    assert server.bash("pwd", cwd="sub").output == f"{server.tmp}/sub\n"
    assert server.bash("pwd", cwd="deeper").output == f"{server.tmp}/sub/deeper\n"
    missing = server.bash("pwd", cwd="nowhere")
    assert missing.exit_code != 0 and "nowhere" in missing.output


def test_exact_command_text_reaches_bash(server: InProcessServer) -> None:
    command = "printf '%s|' \"a  b\" '$HOME' \\\\ \"`echo x`\"; cat <<'EOF'\n  $literal\t\nEOF"
    assert server.bash(command).output == "a  b|$HOME|\\|x|  $literal\t\n"


def test_per_command_env_is_scoped_to_that_command(server: InProcessServer) -> None:
    out = server.bash('echo "$A|$B"; bash -c \'echo "child $A"\'', env={"A": "x y", "B": "$(id)"})
    assert out.output == "x y|$(id)\nchild x y\n"
    assert server.bash('echo "[$A]"').output == "[]\n"


def test_non_interactive_defaults_and_guards(server: InProcessServer) -> None:
    out = server.bash(
        'echo "$PAGER $GIT_PAGER $TERM $CI $GIT_EDITOR $GIT_TERMINAL_PROMPT [$AWS_PAGER]"',
        env={"CI": "0", "GIT_EDITOR": "vim", "PAGER": "less"},
    ).output
    assert out == f"less cat dumb 1 {noterminal.EDITOR} 0 []\n"


def test_background_job_does_not_hold_the_result(server: InProcessServer) -> None:
    started = time.monotonic()
    result = server.bash("sleep 60 & echo started")
    assert time.monotonic() - started < 2.5
    assert result.output == "started\n" and result.exit_code == 0
    # A background job that keeps printing neither blocks nor leaks into results.
    server.bash("(while :; do echo noise; sleep 0.05; done) &")
    assert server.bash("echo clean").output == "clean\n"


def test_stdin_is_dev_null(server: InProcessServer) -> None:
    started = time.monotonic()
    result = server.bash('read x; echo "rc=$? x=[$x]"; cat; echo done')
    assert result.output == "rc=1 x=[]\ndone\n"
    assert time.monotonic() - started < HANG_SECONDS


def test_stdout_and_stderr_are_merged_in_order(server: InProcessServer) -> None:
    out = server.bash("echo 1; echo 2 >&2; echo 3; echo 4 >&2").output
    assert out == "1\n2\n3\n4\n"


def test_exit_status_and_shell_death(server: InProcessServer) -> None:
    assert server.bash("false").exit_code == 1
    first_pid = server.sessions()["default"].pid
    assert server.bash("exit 7").exit_code == 7
    assert server.bash("echo next").output == "next\n"
    assert server.bash("set -e; false; echo unreachable").exit_code == 1
    assert server.bash("exec true").exit_code == 0
    assert server.bash("kill -9 $$").exit_code == 137
    result = server.bash("echo alive")
    assert result.output == "alive\n" and result.exit_code == 0
    assert server.sessions()["default"].pid != first_pid


def test_shell_killed_between_commands_is_replaced(server: InProcessServer) -> None:
    server.bash("true")
    pid = server.sessions()["default"].pid
    assert pid is not None
    os.kill(pid, 9)
    assert wait_until(lambda: pid not in server.owned_processes())
    # The new shell's first result says the old one's state is gone.
    result = server.bash("echo fresh")
    assert result.output == f"{messages.SHELL_RESTARTED}\nfresh\n" and result.shell_restarted


def test_abort_a_running_command(server: InProcessServer) -> None:
    ident = server.request("bash", BashParams(command="echo before; sleep 60"))
    server.wait_for(lambda m: m.method == "bash/chunk")
    started = time.monotonic()
    assert server.abort(session_id="default") is True
    result = server.bash_result(ident)
    assert time.monotonic() - started < 2.5
    assert result.cancelled and not result.timed_out and result.exit_code is None
    assert result.output == f"{messages.NOTICE_CANCELLED}\n{messages.SHELL_RESTARTED}\nbefore\n"
    assert not [c for c in server.owned_commands() if "sleep" in c]
    assert server.bash("echo next").output == "next\n"


def test_abort_kills_a_term_ignoring_child_after_the_grace(server: InProcessServer) -> None:
    ident = server.request(
        "bash", BashParams(command="bash -c 'trap \"\" TERM; echo armed; sleep 60'")
    )
    server.wait_for(lambda m: m.method == "bash/chunk")
    started = time.monotonic()
    assert server.abort(request_id=ident) is True
    result = server.bash_result(ident)
    elapsed = time.monotonic() - started
    assert result.cancelled
    # The 2 s grace was given, and the 60 s sleep was not waited for.
    assert 1.5 < elapsed < 2.0 + 10
    assert not [c for c in server.owned_commands() if "sleep" in c]


def test_abort_after_exec_replaced_the_shell(server: InProcessServer) -> None:
    ident = server.request("bash", BashParams(command="echo replaced; exec sleep 60"))
    server.wait_for(lambda m: m.method == "bash/chunk")
    assert server.abort()
    result = server.bash_result(ident, timeout=HANG_SECONDS)
    assert result.cancelled and result.output.endswith("replaced\n")
    assert not [c for c in server.owned_commands() if "sleep 60" in c]


def test_abort_is_idempotent(server: InProcessServer) -> None:
    assert server.abort() is False
    assert server.abort(request_id="never") is False
    ident = server.request("bash", BashParams(command="echo x"))
    server.response(ident)
    assert server.abort(request_id=ident) is False


def test_timeout_returns_partial_output(server: InProcessServer) -> None:
    # The shell up first: a fresh one's start counts in the command's second.
    assert server.bash("true").exit_code == 0
    started = time.monotonic()
    result = server.bash("echo partial; sleep 30", timeout=1)
    assert time.monotonic() - started < HANG_SECONDS
    assert result.timed_out and result.cancelled and result.exit_code is None
    assert result.output == f"{messages.timed_out_notice(1)}\n{messages.SHELL_RESTARTED}\npartial\n"
    assert result.output.startswith("[Command timed out after 1 second]\n")
    assert server.bash("echo ok").output == "ok\n"


def test_timeout_is_clamped(server: InProcessServer) -> None:
    result = server.bash("sleep 3", timeout=0.01)
    assert result.timed_out
    assert result.output.startswith(messages.timed_out_notice(1))


def test_large_output_is_truncated_and_spilled(server: InProcessServer) -> None:
    result = server.bash("seq 1 200000")
    expected = subprocess.run(["seq", "1", "200000"], capture_output=True, check=True).stdout
    assert result.truncated
    assert result.total_lines == 200000 and result.total_bytes == len(expected)
    assert result.output_bytes <= 51200
    assert expected.endswith(result.output.encode())
    artifact = server.artifacts_dir / f"{result.artifact_id}.bash.log"
    assert hashlib.sha256(artifact.read_bytes()).hexdigest() == hashlib.sha256(expected).hexdigest()
    # The same bytes come back through artifact/read, page by page.
    assert result.artifact_id is not None
    pieces: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = server.typed(
            ArtifactReadResult,
            "artifact/read",
            ArtifactReadParams(id=result.artifact_id, offset=offset, limit=1 << 20),
        )
        assert page.total_bytes == len(expected)
        pieces.append(page.text)
        offset = page.next_offset
    assert "".join(pieces).encode() == expected


def test_small_output_has_no_artifact(server: InProcessServer) -> None:
    result = server.bash("seq 1 10")
    assert result.total_lines == 10 and not result.truncated
    assert result.artifact_id is None


def test_artifact_read_errors(server: InProcessServer) -> None:
    error = server.error("artifact/read", ArtifactReadParams(id=42))
    assert error.code == ErrorCode.ARTIFACT_NOT_FOUND
    assert error.message == messages.artifact_not_found(42, [])
    traversal = {"id": "../etc/passwd"}
    assert server.error_raw("artifact/read", traversal).code == ErrorCode.INVALID_PARAMS
    limit = ArtifactReadParams(id=1, limit=10 << 20)
    assert server.error("artifact/read", limit).code == ErrorCode.INVALID_PARAMS


def test_output_is_sanitized(server: InProcessServer) -> None:
    out = server.bash(r"printf 'a\xffb\000c\033[31mred\033[0m\r\n'").output
    assert out == "a\ufffdbcred\n"
    split = server.bash(r"printf '\xe2\x82'; sleep 0.2; printf '\xac\n'").output
    assert split == "€\n"


def test_chunks_stream_in_order_before_the_response(server: InProcessServer) -> None:
    ident = server.request(
        "bash", BashParams(command="for i in 1 2 3 4 5; do echo $i; sleep 0.05; done")
    )
    reply = server.response(ident)
    chunks = server.chunks_for(ident)
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    assert "".join(c.text for c in chunks) == "1\n2\n3\n4\n5\n"
    assert all(c.session_id == "default" for c in chunks)
    positions = [i for i, m in enumerate(server.messages) if m is reply]
    last_chunk = max(i for i, m in enumerate(server.messages) if m.method == "bash/chunk")
    assert last_chunk < positions[0]


def test_chunks_are_coalesced(server: InProcessServer) -> None:
    ident = server.request("bash", BashParams(command="for i in $(seq 20000); do echo $i; done"))
    result = server.bash_result(ident)
    chunks = server.chunks_for(ident)
    assert result.total_lines == 20000
    assert len(chunks) < 1000


def test_first_chunk_arrives_before_the_command_ends(server: InProcessServer) -> None:
    ident = server.request("bash", BashParams(command="echo start; sleep 2; echo end"))
    first = server.wait_for(lambda m: m.method == "bash/chunk")
    assert notification_params(first, BashChunk).text == "start\n"
    assert server.bash_result(ident).output == "start\nend\n"


def test_two_sessions_run_in_parallel(server: InProcessServer) -> None:
    command = "date +%s.%N; sleep 1; date +%s.%N"
    a = server.request("bash", BashParams(command=command, session_id="a"))
    b = server.request("bash", BashParams(command=command, session_id="b"))
    ra, rb = server.bash_result(a), server.bash_result(b)
    a_start, a_end = map(float, ra.output.split())
    b_start, b_end = map(float, rb.output.split())
    assert b_start < a_end and a_start < b_end  # the runs overlapped


def test_a_busy_sessions_requests_wait_their_turn_in_its_own_shell(
    server: InProcessServer,
) -> None:
    """Sent without waiting, requests to one session run in order on its shell:
    each sees the directory and variables the earlier ones left."""
    (server.tmp / "sub").mkdir()
    first = server.request("bash", BashParams(command="sleep 0.5; cd sub"))
    second = server.request("bash", BashParams(command="X=hello"))
    third = server.request("bash", BashParams(command='pwd; echo "X=$X"', timeout=5))
    assert server.bash_result(first).exit_code == 0
    assert (server.bash_result(second).queued_seconds or 0) > 0
    result = server.bash_result(third)
    assert result.output == f"{server.tmp}/sub\nX=hello\n"
    assert (result.queued_seconds or 0) > 0 and not result.shell_restarted and not result.one_shot


def test_session_list_shows_the_queued_requests_and_abort_of_one_never_runs_it(
    server: InProcessServer,
) -> None:
    running = server.request("bash", BashParams(command="sleep 30"))
    queued = [
        server.request("bash", BashParams(command=f"echo ran {n} >> ran.txt")) for n in range(3)
    ]
    assert wait_until(lambda: server.sessions()["default"].queued == queued)
    # Methods that run no command answer at once, behind no command.
    assert server.sessions()["default"].state == "busy"
    assert server.abort(request_id=queued[1])
    skipped = server.bash_result(queued[1])
    assert skipped.cancelled and skipped.exit_code is None and not skipped.shell_restarted
    assert server.sessions()["default"].queued == [queued[0], queued[2]]
    assert server.abort(request_id=running)
    assert server.bash_result(running).cancelled
    for ident in (queued[0], queued[2]):
        assert server.bash_result(ident).exit_code == 0
    assert (server.tmp / "ran.txt").read_text() == "ran 0\nran 2\n"


def test_aborting_a_session_aborts_what_runs_and_what_waits(server: InProcessServer) -> None:
    running = server.request("bash", BashParams(command="sleep 30"))
    queued = server.request("bash", BashParams(command="touch never"))
    assert wait_until(lambda: server.sessions()["default"].queued == [queued])
    assert server.abort(session_id="default")
    assert server.bash_result(running).cancelled
    assert server.bash_result(queued).cancelled
    assert not (server.tmp / "never").exists()
    assert server.bash("echo after").output.endswith("after\n")


def test_a_queued_requests_timeout_counts_from_its_start(server: InProcessServer) -> None:
    first = server.request("bash", BashParams(command="sleep 2"))
    second = server.request("bash", BashParams(command="sleep 0.2; echo done", timeout=1))
    assert server.bash_result(first).exit_code == 0
    result = server.bash_result(second)
    assert not result.timed_out and result.output == "done\n"
    assert (result.queued_seconds or 0) >= 1


def test_a_pty_request_waits_its_turn_and_starts_where_the_session_went(
    server: InProcessServer,
) -> None:
    (server.tmp / "sub").mkdir()
    first = server.request("bash", BashParams(command="sleep 0.5; cd sub"))
    on_pty = server.request("bash", BashParams(command="pwd", pty=True))
    server.bash_result(first)
    result = server.bash_result(on_pty)
    assert result.output.strip() == f"{server.tmp}/sub" and (result.queued_seconds or 0) > 0


def test_a_one_shot_request_runs_at_once_without_the_sessions_state(
    server: InProcessServer,
) -> None:
    server.bash("export KEEP=kept")
    slow = server.request("bash", BashParams(command="sleep 1; echo slow"))
    time.sleep(0.2)
    quick = server.bash('echo "quick $KEEP"; export ONESHOT=1', one_shot=True)
    # A one-shot shell has the session's configuration, not its variables.
    assert quick.output == "quick \n" and quick.one_shot and quick.queued_seconds is None
    assert server.bash_result(slow).output == "slow\n"
    # The one-shot shell's state did not leak into the session.
    assert server.bash('echo "[$ONESHOT] $KEEP"').output == "[] kept\n"


def test_sessions_open_list_close(server: InProcessServer) -> None:
    (server.tmp / "work").mkdir()
    opened = server.result(
        "session/open", SessionOpenParams(session_id="w", cwd="work", env={"MODE": "test"})
    )
    assert opened == SessionOpenResult(session_id="w", cwd=str(server.tmp / "work"))
    assert server.bash("pwd; echo $MODE", session_id="w").output == f"{server.tmp}/work\ntest\n"
    auto = server.typed(SessionOpenResult, "session/open", SessionOpenParams())
    assert auto.session_id and auto.session_id != "w"
    listed = server.sessions()
    pid = listed["w"].pid
    assert listed["w"].state == "idle" and pid is not None and pid > 0
    server.bash("sleep 300 &", session_id="w")
    close_w = SessionCloseParams(session_id="w")
    assert server.result("session/close", close_w) == SessionCloseResult(closed=True)
    assert wait_until(lambda: not server.owned_processes() or pid not in server.owned_processes())
    assert server.result("session/close", close_w) == SessionCloseResult(closed=False)
    assert (
        server.error("session/open", SessionOpenParams(cwd="missing-dir")).code
        == ErrorCode.INVALID_PARAMS
    )


def test_session_close_aborts_its_running_command(server: InProcessServer) -> None:
    ident = server.request("bash", BashParams(command="sleep 60", session_id="x"))
    time.sleep(0.3)
    server.result("session/close", SessionCloseParams(session_id="x"))
    assert server.bash_result(ident, timeout=HANG_SECONDS).cancelled


def test_a_working_directory_that_is_not_utf8(server: InProcessServer) -> None:
    raw = os.fsencode(str(server.tmp)) + b"/d\xff"
    result = server.bash("mkdir $'d\\xff' && cd $'d\\xff' && printf done")
    assert result.output == "done"
    # The text is lossy (U+FFFD); the base64 form is the exact path.
    assert result.working_dir == f"{server.tmp}/d\ufffd"
    assert result.working_dir_base64 is not None
    assert base64.b64decode(result.working_dir_base64) == raw
    listed = server.sessions()["default"]
    assert listed.cwd == f"{server.tmp}/d\ufffd"
    assert listed.cwd_base64 is not None and base64.b64decode(listed.cwd_base64) == raw
    # A path that is valid UTF-8 carries no second form.
    plain = server.bash("cd /tmp")
    assert plain.working_dir == "/tmp" and plain.working_dir_base64 is None
    assert server.bash("echo alive").output == "alive\n"
    assert server.result("ping") == EmptyResult()


def test_tilde_means_home_on_pipes_and_ptys_alike(server: InProcessServer) -> None:
    home = server.tmp / "home"
    (home / "sub").mkdir(parents=True, exist_ok=True)
    for pty in (False, True):
        assert server.bash("pwd", cwd="~", pty=pty).output == f"{home}\n", pty
        assert server.bash("pwd", cwd="~/sub", pty=pty).output == f"{home}/sub\n", pty


def test_the_driver_works_under_the_users_set_u(server: InProcessServer) -> None:
    server.bash("set -u")
    for _ in range(2):
        result = server.bash("echo still")
        assert result.output == "still\n" and result.exit_code == 0
    assert server.bash("sleep 0.01 & wait; echo jobs").output == "jobs\n"
    assert server.bash('echo "$undefined_variable"').exit_code != 0
    # Taking the driver's alias away, even under set -u, costs nothing.
    server.bash("unalias -a; shopt -u expand_aliases")
    assert server.bash("echo back").output == "back\n"


def test_user_traps_never_see_the_driver(server: InProcessServer) -> None:
    server.bash("trap 'echo DEBUG: $BASH_COMMAND' DEBUG")
    assert server.bash("echo hi").output == "DEBUG: echo hi\nhi\n"
    assert server.bash("echo again", cwd=".").output == "DEBUG: echo again\nagain\n"
    server.bash("trap - DEBUG")
    assert server.bash("echo quiet").output == "quiet\n"
    server.bash("trap 'echo ERR: $BASH_COMMAND' ERR")
    failed = server.bash("false")
    assert failed.output == "ERR: false\n" and failed.exit_code == 1
    assert server.bash("true").output == ""
    assert server.bash("echo x; false; echo y").output == "x\nERR: false\ny\n"
    server.bash("trap - ERR")
    assert server.bash("false").output == ""
    server.bash("set -x")
    # Commands under `eval` trace one level deep ("++"); no driver step shows.
    traced = server.bash("echo traced").output
    assert traced.endswith("+ echo traced\ntraced\n") and traced.count("\n") == 2
    server.bash("set +x; trap 'echo RETURN' RETURN")
    assert server.bash("echo plain").output == "plain\n"


# What Linux execs: one `NAME=value` of at most 32 pages with its NUL, and all of
# argv and envp, pointers included, within a quarter of the stack (at most 6 MiB).
EXEC_STRING_BYTES = 32 * os.sysconf("SC_PAGE_SIZE")
EXEC_TOTAL_BYTES = min(os.sysconf("SC_ARG_MAX"), 6 * 1024 * 1024)


def test_an_env_the_kernel_cannot_exec_is_refused(server: InProcessServer) -> None:
    longest = "x" * (EXEC_STRING_BYTES - len("BIG=") - 1)
    too_long = longest + "x"
    # Each value fits; together they pass what one exec may carry.
    count = EXEC_TOTAL_BYTES // len(longest) + 1
    too_many = {f"V{i}": longest for i in range(count)}
    for env, limit in (({"BIG": too_long}, "MAX_ARG_STRLEN"), (too_many, "ARG_MAX")):
        error = server.error("session/open", SessionOpenParams(session_id="big", env=env))
        assert error.code == ErrorCode.INVALID_PARAMS and limit in error.message
        error = server.error("bash", BashParams(command="echo ran", env=env))
        assert error.code == ErrorCode.INVALID_PARAMS and limit in error.message
    assert "big" not in server.sessions()
    # The longest value the kernel takes is taken, and its session runs commands.
    server.result("session/open", SessionOpenParams(session_id="big", env={"BIG": longest}))
    assert server.bash('echo "${#BIG}"', session_id="big").output == f"{len(longest)}\n"
    out = server.bash("bash -c 'echo \"${#BIG}\"'", env={"BIG": longest})
    assert out.output == f"{len(longest)}\n"


def _error_line(output: str) -> str:
    """The `line N: ...` of bash's error message, without the name bash was run by."""
    return output.replace("\r\n", "\n").partition(": ")[2]


def _bash_c_error(command: str) -> str:
    """What `bash -c` says of the command on stderr."""
    return _error_line(
        subprocess.run(["bash", "-c", command], capture_output=True, text=True).stderr
    )


def test_errors_name_the_line_bash_c_would(spawn: SpawnInProcess, tmp_path: Path) -> None:
    # An rc snapshot: a PTY command replays it first, a shell at its start.
    (tmp_path / "home" / ".bashrc").write_text("alias greet='echo hello'\n")
    server = spawn()
    one_line, third_line = "nosuch_command_17", "true\ntrue\nnosuch_command_17"
    assert _bash_c_error(one_line) == "line 1: nosuch_command_17: command not found\n"
    assert _bash_c_error(third_line) == "line 3: nosuch_command_17: command not found\n"
    for command in (one_line, third_line, one_line):
        for pty in (False, True):
            output = _error_line(server.bash(command, pty=pty).output)
            assert output == _bash_c_error(command), (command, pty)
        # Traps to restore come before the command's own text, and count for nothing.
        server.bash("trap 'true' DEBUG; set -x; set +x")
    assert server.bash("echo $LINENO; greet", pty=True).output == "1\nhello\n"


def test_a_full_queue_is_refused_as_busy(server: InProcessServer) -> None:
    """Waiting requests count toward the requests in flight: beyond, -32003."""
    running = server.request("bash", BashParams(command="sleep 30"))
    waiting = [server.request("bash", BashParams(command="true")) for _ in range(300)]
    codes = [server.response(ident).error for ident in waiting[255:]]
    assert [c is not None and c.code for c in codes] == [ErrorCode.SERVER_BUSY] * 45
    assert server.abort(session_id="default")
    assert server.bash_result(running).cancelled
    assert all(server.bash_result(ident).cancelled for ident in waiting[:255])
