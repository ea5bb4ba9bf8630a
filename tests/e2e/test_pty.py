"""The PTY path with real pseudo-terminals: input, keys, resize, screen, results."""

from __future__ import annotations

import base64
import hashlib
import time
from pathlib import Path

from bashrpc.protocol import messages
from bashrpc.protocol.client import result_of
from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    BashOverrides,
    CallToolResult,
    ConnectionSettings,
    InterceptorOverrides,
    UiSize,
)
from bashrpc.protocol.methods import (
    BashParams,
    PtyInputParams,
    PtyInputResult,
    PtyOutput,
    PtyResizeParams,
    PtyResizeResult,
    PtyScreen,
    PtyScreenParams,
    PtySize,
)
from tests.conftest import SpawnInProcess
from tests.e2e.test_tools import call_tool, initialize, tool_call
from tests.inprocess import InProcessServer
from tests.rpc import ServerProcess, request_line, wait_until

HANG_SECONDS = 10.0

RAW_KEY_REPORTER = r"""
import os, sys, tty
fd = sys.stdin.fileno()
tty.setraw(fd)
def say(text):
    os.write(1, text.encode() + b"\r\n")
say("ready-normal")
say("normal:" + os.read(fd, 16).hex())
os.write(1, b"\x1b[?1h")
say("ready-app")
say("app:" + os.read(fd, 16).hex())
"""


# What a host that renders a terminal declares, with tool calls allowed on a PTY.
HOST_UI = UiSize(cols=90, rows=20)
VIRTUAL_TERMINAL = BashOverrides(virtual_terminal="on")


def raw_output(server: InProcessServer, ident: RequestId) -> bytes:
    return b"".join(
        base64.b64decode(p.data)
        for p in server.notified("pty/output", PtyOutput)
        if p.request_id == ident
    )


def wait_for_output(server: InProcessServer, ident: RequestId, needle: bytes) -> None:
    server.receive_until(lambda: needle in raw_output(server, ident), timeout=HANG_SECONDS)


def test_both_ends_are_a_terminal(server: InProcessServer) -> None:
    result = server.bash(
        "python3 -c 'import sys; print(sys.stdin.isatty(), sys.stdout.isatty())';"
        ' echo "$TERM [${NO_COLOR-unset}]"',
        pty=True,
    )
    assert result.output == "True True\nxterm-256color [unset]\n"
    assert result.exit_code == 0


def test_prompt_answered_through_pty_input(server: InProcessServer) -> None:
    ident = server.request(
        "bash", BashParams(command="read -p 'name? ' n; echo \"hi $n\"", pty=True)
    )
    wait_for_output(server, ident, b"name? ")
    typed = server.typed(
        PtyInputResult, "pty/input", PtyInputParams(request_id=ident, data="bob", keys=["enter"])
    )
    assert typed.bytes_written == 4
    result = server.bash_result(ident)
    assert result.output == "name? bob\nhi bob\n" and result.exit_code == 0
    # The raw stream kept the terminal's own bytes: CRLF line ends, in order.
    assert b"hi bob\r\n" in raw_output(server, ident)


def test_pty_output_is_numbered_from_zero_in_order(server: InProcessServer) -> None:
    command = "for i in 1 2 3 4 5; do echo piece$i; sleep 0.1; done"
    result = server.bash(command, pty=True)
    assert result.exit_code == 0
    outputs = server.notified("pty/output", PtyOutput)
    assert len(outputs) >= 2
    assert [p.seq for p in outputs] == list(range(len(outputs)))
    raw = b"".join(base64.b64decode(p.data) for p in outputs)
    assert raw == b"".join(f"piece{i}\r\n".encode() for i in range(1, 6))


def test_a_client_far_behind_is_told_how_many_terminal_bytes_it_lost(
    process: ServerProcess, tmp_path: Path
) -> None:
    """A client that takes nothing while a PTY command prints 8 MB: past 1 MiB
    pending, the oldest bytes are dropped, and the next `pty/output` counts
    them, so what came and what was skipped add up to what the terminal got."""
    size = 8_000_000
    done = tmp_path / "done"
    process.pause_reading()
    command = f"head -c {size} /dev/zero | tr '\\0' a; touch {done}"
    ident = process.request("bash", BashParams(command=command, pty=True, cwd=str(tmp_path)))
    assert wait_until(done.exists, HANG_SECONDS)
    process.resume_reading()
    assert process.bash_result(ident).exit_code == 0
    outputs = [p for p in process.notified("pty/output", PtyOutput) if p.request_id == ident]
    assert [p.seq for p in outputs] == list(range(len(outputs)))
    assert sum(len(base64.b64decode(p.data)) + p.skipped for p in outputs) == size
    assert sum(p.skipped for p in outputs) > 0


def test_arrow_keys_follow_application_cursor_mode(server: InProcessServer) -> None:
    command = f"python3 -c '{RAW_KEY_REPORTER}'"
    ident = server.request("bash", BashParams(command=command, pty=True))
    wait_for_output(server, ident, b"ready-normal")
    server.result("pty/input", PtyInputParams(request_id=ident, keys=["up"]))
    wait_for_output(server, ident, b"ready-app")
    server.result("pty/input", PtyInputParams(request_id=ident, keys=["up"]))
    output = server.bash_result(ident).output
    assert "normal:1b5b41" in output  # ESC [ A
    assert "app:1b4f41" in output  # ESC O A


def test_resize_reaches_the_program(server: InProcessServer) -> None:
    command = "trap 'echo winch' WINCH; echo ready; read -r _; tput cols; stty size"
    ident = server.request("bash", BashParams(command=command, pty=PtySize(cols=80, rows=24)))
    wait_for_output(server, ident, b"ready")
    resized = server.typed(
        PtyResizeResult, "pty/resize", PtyResizeParams(request_id=ident, cols=132, rows=50)
    )
    assert (resized.cols, resized.rows) == (132, 50)
    server.result("pty/input", PtyInputParams(request_id=ident, keys=["enter"]))
    output = server.bash_result(ident).output
    assert output.endswith("132\n50 132\n")
    assert "winch" in output


def test_the_pty_size_wins_over_the_servers_columns_and_lines(spawn: SpawnInProcess) -> None:
    server = spawn(env={"COLUMNS": "80", "LINES": "24"})
    size = PtySize(cols=100, rows=30)
    output = server.bash("tput cols; tput lines; stty size", pty=size).output
    assert output == "100\n30\n30 100\n"
    # On pipes, nothing is a terminal: the caller's values stay.
    assert server.bash("echo $COLUMNS").output == "80\n"


def test_resize_is_clamped(server: InProcessServer) -> None:
    ident = server.request(
        "bash", BashParams(command="echo ready; read -r _; stty size", pty=PtySize(cols=5))
    )
    wait_for_output(server, ident, b"ready")
    resized = server.typed(
        PtyResizeResult, "pty/resize", PtyResizeParams(request_id=ident, cols=9999, rows=1)
    )
    assert (resized.cols, resized.rows) == (400, 5)
    server.result("pty/input", PtyInputParams(request_id=ident, keys=["enter"]))
    assert server.bash_result(ident).output.endswith("5 400\n")


def test_default_size_and_clamped_request(server: InProcessServer) -> None:
    assert server.bash("stty size", pty=True).output == "40 120\n"
    assert server.bash("stty size", pty=PtySize(cols=1, rows=1000)).output == "200 20\n"


def test_screen_shows_what_the_program_shows(server: InProcessServer) -> None:
    ident = server.request(
        "bash",
        BashParams(
            command="printf 'a\\nb\\n'; read -r _; clear; printf 'after clear'; read -r _",
            pty=PtySize(cols=30, rows=6),
        ),
    )
    wait_for_output(server, ident, b"b\r\n")
    screen = server.typed(PtyScreen, "pty/screen", PtyScreenParams(request_id=ident))
    assert screen.cols == 30 and screen.rows == 6
    assert screen.lines == ["a", "b", "", "", "", ""]
    assert (screen.cursor.x, screen.cursor.y) == (0, 2)
    server.result("pty/input", PtyInputParams(request_id=ident, keys=["enter"]))
    wait_for_output(server, ident, b"after clear")
    screen = server.typed(PtyScreen, "pty/screen", PtyScreenParams(request_id=ident))
    assert screen.lines == ["after clear", "", "", "", "", ""]
    assert (screen.cursor.x, screen.cursor.y) == (len("after clear"), 0)
    server.result("pty/input", PtyInputParams(request_id=ident, keys=["enter"]))
    server.response(ident)


def test_carriage_return_progress_bar_collapses(server: InProcessServer) -> None:
    command = "for i in $(seq 10000); do printf '\\rprogress %5d' $i; done; printf '\\ndone\\n'"
    result = server.bash(command, pty=True)
    assert result.output == "progress 10000\ndone\n"
    assert result.total_lines == 2 and not result.truncated
    assert result.artifact_id is None


def test_exit_status_and_signals(server: InProcessServer) -> None:
    assert server.bash("exit 5", pty=True).exit_code == 5
    assert server.bash("kill -9 $$", pty=True).exit_code == 137


def test_timeout_leaves_nothing_behind(server: InProcessServer) -> None:
    started = time.monotonic()
    result = server.bash("echo started; sleep 60 & sleep 60", pty=True, timeout=1)
    assert time.monotonic() - started < HANG_SECONDS
    assert result.timed_out and result.cancelled and result.exit_code is None
    assert result.output == messages.timed_out_notice(1) + "\nstarted\n"
    assert wait_until(lambda: server.owned_processes() == [], timeout=5)


def test_abort_during_sleep(server: InProcessServer) -> None:
    ident = server.request("bash", BashParams(command="echo go; sleep 60", pty=True))
    wait_for_output(server, ident, b"go")
    assert server.abort(request_id=ident)
    result = server.bash_result(ident, timeout=HANG_SECONDS)
    assert result.cancelled and not result.timed_out
    assert result.output == f"{messages.NOTICE_CANCELLED}\ngo\n"
    assert wait_until(lambda: server.owned_processes() == [], timeout=5)


def test_background_jobs_do_not_outlive_a_pty_command(server: InProcessServer) -> None:
    result = server.bash("sleep 300 & setsid sleep 301 & echo spawned", pty=True)
    assert result.output == "spawned\n" and result.exit_code == 0
    assert wait_until(lambda: server.owned_processes() == [], timeout=5)


def test_input_to_finished_or_unknown_requests_is_an_error(server: InProcessServer) -> None:
    ident = server.request("bash", BashParams(command="true", pty=True))
    server.response(ident)
    asked: list[tuple[str, PtyInputParams | PtyResizeParams | PtyScreenParams]] = [
        ("pty/input", PtyInputParams(request_id=ident, data="x")),
        ("pty/resize", PtyResizeParams(request_id=ident, cols=80, rows=24)),
        ("pty/screen", PtyScreenParams(request_id="nope")),
    ]
    for method, params in asked:
        error = server.error(method, params)
        assert error.code == ErrorCode.NO_SUCH_PTY
        assert error.message == messages.NO_SUCH_PTY.format(request_id=params.request_id)
    pipe = server.request("bash", BashParams(command="sleep 1"))
    time.sleep(0.2)
    error = server.error("pty/input", PtyInputParams(request_id=pipe, data="x"))
    assert error.code == ErrorCode.NO_SUCH_PTY
    server.response(pipe)


def test_unknown_key_is_invalid_params(server: InProcessServer) -> None:
    ident = server.request("bash", BashParams(command="echo ready; read -r _", pty=True))
    wait_for_output(server, ident, b"ready")
    error = server.error("pty/input", PtyInputParams(request_id=ident, keys=["enter", "hyper+q"]))
    assert error.code == ErrorCode.INVALID_PARAMS
    assert error.data == messages.UNKNOWN_KEY.format(key="hyper+q", index=1)
    server.result("pty/input", PtyInputParams(request_id=ident, keys=["ctrl+d"]))
    server.response(ident)


def test_start_failure_is_a_pty_error(server: InProcessServer) -> None:
    result = server.bash("true", pty=True, cwd="/no/such/dir")
    assert result.exit_code is None and not result.cancelled
    assert result.output.startswith("PTY error: ")


def test_tool_path_pty_timeout_reads_like_pipes(server: InProcessServer) -> None:
    initialize(server, ui=HOST_UI, settings=ConnectionSettings(bash=VIRTUAL_TERMINAL))
    reply = call_tool(server, "tty >/dev/null && echo on-tty; sleep 30", timeout=1)
    text = reply.text
    assert reply.is_error
    assert reply.structured_content is not None and reply.structured_content.timed_out
    assert text.startswith(messages.timed_out_notice(1) + "\non-tty\n")
    assert server.notifications("pty/output")
    assert wait_until(lambda: not [c for c in server.owned_commands() if "sleep 30" in c])


def test_children_get_default_signal_dispositions(server: InProcessServer) -> None:
    result = server.bash("yes | head -1; grep SigIgn /proc/self/status", pty=True)
    assert result.output == "y\nSigIgn:\t0000000000000000\n"


def lines(*requests: bytes) -> bytes:
    """Several requests in one write, as a host that types ahead sends them."""
    return b"".join(requests)


def test_input_and_size_sent_with_the_request_are_applied(server: InProcessServer) -> None:
    command = "read x; echo got=$x; stty size"
    server.send_raw(
        lines(
            request_line("run", "bash", BashParams(command=command, pty=PtySize(cols=80, rows=24))),
            request_line(
                "size", "pty/resize", PtyResizeParams(request_id="run", cols=100, rows=30)
            ),
            request_line(
                "typed",
                "pty/input",
                PtyInputParams(request_id="run", data="hello", keys=["enter"]),
            ),
        )
    )
    resized = server.response("size", timeout=HANG_SECONDS)
    assert result_of(resized, PtyResizeResult) == PtyResizeResult(cols=100, rows=30), resized
    typed = server.response("typed", timeout=HANG_SECONDS)
    assert result_of(typed, PtyInputResult) == PtyInputResult(bytes_written=6), typed
    result = server.bash_result("run", timeout=HANG_SECONDS)
    assert result.output.endswith("got=hello\n30 100\n"), result.output


def test_input_for_a_pty_that_never_starts_is_an_error(server: InProcessServer) -> None:
    server.send_raw(
        lines(
            request_line("run", "bash", BashParams(command="true", pty=True, cwd="/no/such/dir")),
            request_line("typed", "pty/input", PtyInputParams(request_id="run", data="x")),
        )
    )
    typed = server.response("typed", timeout=HANG_SECONDS)
    assert typed.error is not None and typed.error.code == ErrorCode.NO_SUCH_PTY, typed
    assert server.bash_result("run").output.startswith("PTY error: ")


def test_concurrent_input_is_written_whole_and_in_order(server: InProcessServer) -> None:
    # Writes bigger than the terminal's input queue wait for the program to read.
    count, size = 16, 16384
    parts = [f"{n:04d}".encode() * (size // 4) for n in range(count)]
    command = f"stty raw -echo; echo ready; head -c {count * size} | sha256sum"
    ident = server.request("bash", BashParams(command=command, pty=True))
    wait_for_output(server, ident, b"ready")
    writes = [
        request_line(f"w{n}", "pty/input", PtyInputParams(request_id=ident, data=part.decode()))
        for n, part in enumerate(parts)
    ]
    server.send_raw(lines(*writes))
    for n in range(count):
        reply = server.response(f"w{n}", timeout=HANG_SECONDS)
        assert result_of(reply, PtyInputResult) == PtyInputResult(bytes_written=size), reply
    result = server.bash_result(ident, timeout=HANG_SECONDS)
    assert hashlib.sha256(b"".join(parts)).hexdigest() in result.output, result.output


def test_blocked_input_is_answered_when_the_pty_goes(server: InProcessServer) -> None:
    # The program never reads: its terminal's input queue fills and writes wait.
    ident = server.request("bash", BashParams(command="echo ready; sleep 2", pty=True))
    wait_for_output(server, ident, b"ready")
    big = "x" * 65536
    writes = [f"w{n}" for n in range(8)]
    server.send_raw(
        lines(
            *[
                request_line(w, "pty/input", PtyInputParams(request_id=ident, data=big))
                for w in writes
            ]
        )
    )
    assert server.bash_result(ident, timeout=HANG_SECONDS).exit_code == 0
    for w in writes:
        reply = server.response(w, timeout=HANG_SECONDS)
        if reply.error is not None:
            assert reply.error.code == ErrorCode.NO_SUCH_PTY, reply
        else:
            written = result_of(reply, PtyInputResult)
            assert written == PtyInputResult(bytes_written=len(big)), reply
    error = server.error("pty/input", PtyInputParams(request_id=ident, data="x"))
    assert error.code == ErrorCode.NO_SUCH_PTY


def test_tool_call_input_sent_with_the_call_is_applied(server: InProcessServer) -> None:
    initialize(server, ui=HOST_UI, settings=ConnectionSettings(bash=VIRTUAL_TERMINAL))
    server.send_raw(
        lines(
            request_line("run", "tools/call", tool_call("read x; echo got=$x")),
            request_line(
                "typed", "pty/input", PtyInputParams(request_id="run", data="hi", keys=["enter"])
            ),
        )
    )
    typed = server.response("typed", timeout=HANG_SECONDS)
    assert result_of(typed, PtyInputResult) == PtyInputResult(bytes_written=3), typed
    reply = server.response("run", timeout=HANG_SECONDS)
    assert "got=hi" in result_of(reply, CallToolResult).text, reply


def test_screen_asked_with_the_request_waits_for_the_program(server: InProcessServer) -> None:
    server.send_raw(
        lines(
            request_line(
                "run", "bash", BashParams(command="read -r _", pty=PtySize(cols=30, rows=6))
            ),
            request_line("look", "pty/screen", PtyScreenParams(request_id="run")),
        )
    )
    look = server.response("look", timeout=HANG_SECONDS)
    assert look.error is None, look
    assert result_of(look, PtyScreen).cols == 30, look
    server.result("pty/input", PtyInputParams(request_id="run", keys=["enter"]))
    assert server.bash_result("run", timeout=HANG_SECONDS).exit_code == 0


def test_input_for_a_blocked_tool_call_is_an_error(server: InProcessServer) -> None:
    # The call ends before any command runs: the input queued for its PTY is answered.
    settings = ConnectionSettings(
        bash=VIRTUAL_TERMINAL, interceptor=InterceptorOverrides(enabled=True)
    )
    initialize(server, tool_names=["read"], ui=HOST_UI, settings=settings)
    server.send_raw(
        lines(
            request_line("run", "tools/call", tool_call("cat notes.txt")),
            request_line("typed", "pty/input", PtyInputParams(request_id="run", data="x")),
        )
    )
    typed = server.response("typed", timeout=HANG_SECONDS)
    assert typed.error is not None and typed.error.code == ErrorCode.NO_SUCH_PTY, typed
    assert result_of(server.response("run"), CallToolResult).is_error
