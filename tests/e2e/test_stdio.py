"""stdio itself: only protocol lines on stdout, and no child ever holds the protocol pipes."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.client import result_of
from bashrpc.protocol.envelope import Request, ServerMessage, encode
from bashrpc.protocol.methods import (
    AbortBashParams,
    AbortBashResult,
    BashParams,
    BashResult,
    SessionListResult,
)
from tests.rpc import ServerProcess, marked_processes, server_environment, wait_until

# Every case here starts processes of its own: slow (see tests/conftest.py).
pytestmark = pytest.mark.slow

# Shutdown promises 3 s; the bound only catches a hang.
EXIT_BOUND_SECONDS = 10.0

_decode_message = msgspec.json.Decoder(ServerMessage).decode
_decode_line = msgspec.json.Decoder(ServerMessage | list[ServerMessage]).decode


def test_children_never_hold_the_protocol_pipes(process: ServerProcess) -> None:
    assert process.proc.stdin is not None and process.proc.stdout is not None
    protocol_pipes = {
        os.fstat(process.proc.stdin.fileno()).st_ino,
        os.fstat(process.proc.stdout.fileno()).st_ino,
    }
    process.bash("sleep 30 & echo to-stdout; echo to-stderr >&2")
    children = process.owned_processes()
    assert len(children) >= 2  # the shell and the sleep
    for pid in children:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                inode = os.stat(f"/proc/{pid}/fd/{fd}").st_ino
            except OSError:
                continue
            assert inode not in protocol_pipes, (pid, fd)


def test_stdout_carries_only_protocol_lines(process: ServerProcess) -> None:
    process.bash("echo to-stdout; echo to-stderr >&2; exec 1>&2; echo more")
    process.close()
    assert process.garbage == []
    assert all(is_protocol_line(line) for line in process.raw_lines)


def is_protocol_line(line: bytes) -> bool:
    """A line is one JSON-RPC message, or a batch's replies."""
    try:
        _decode_line(line)
    except msgspec.DecodeError:
        return False
    return True


def run_server(tmp_path: Path, **stdin: Any) -> subprocess.CompletedProcess[bytes]:
    """The server to its end, its input given as `subprocess.run`'s `stdin` or `input`."""
    return subprocess.run(
        [sys.executable, "-m", "bashrpc", "--artifacts-dir", str(tmp_path / "artifacts")],
        capture_output=True,
        env=server_environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
        **stdin,
    )


def test_requests_from_a_file_are_answered(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(b"".join(encode(Request(id=n, method="ping")) for n in (1, 2)))
    with open(requests, "rb") as stdin:
        done = run_server(tmp_path, stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert [_decode_message(line).id for line in done.stdout.splitlines()] == [1, 2]


def test_stdin_that_cannot_be_polled_is_read_to_its_end(tmp_path: Path) -> None:
    # /dev/null is a character device that epoll refuses: still just an empty input.
    done = run_server(tmp_path, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    assert b"Traceback" not in done.stderr


def test_shutdown_during_the_rc_capture_is_not_blamed_on_the_rc(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # The capture is still sourcing this when the input ends.
    (home / ".bashrc").write_text("sleep 30\n")
    done = run_server(tmp_path, input=encode(Request(id=1, method="ping")))
    assert done.returncode == 0, done.stderr
    assert _decode_message(done.stdout).id == 1
    rc_blamed = messages.SNAPSHOT_FAILED.split("{", 1)[0].encode()
    assert rc_blamed not in done.stderr, done.stderr


def stopped_writing(pid: int) -> Callable[[], bool]:
    """A check that holds once the process wrote nothing since the previous check."""
    last = [-1]

    def check() -> bool:
        with open(f"/proc/{pid}/io") as f:
            written = next(int(line.split()[1]) for line in f if line.startswith("wchar:"))
        same, last[0] = written == last[0], written
        return same

    return check


def test_an_abort_gets_through_to_a_client_that_stopped_reading(process: ServerProcess) -> None:
    """Replies to inline requests never wait behind bulk output: while a flood fills
    stdout, `session/list` and `abort_bash` are still read, and the abort acts."""
    # Unique: the same case runs over stdio and attach at once, on other workers.
    marker = f"flood-marker-{uuid.uuid4().hex}"
    flood = process.request("bash", BashParams(command=f"yes {marker}", session_id="flood"))
    process.wait_for(lambda m: m.method == "bash/chunk", timeout=EXIT_BOUND_SECONDS)
    (producer,) = marked_processes(marker)
    process.pause_reading()
    # Stdout and the server's queue are full once the server stops taking the output.
    assert wait_until(stopped_writing(producer), timeout=EXIT_BOUND_SECONDS, interval=0.1)
    listed = process.request("session/list")
    abort = process.request("abort_bash", AbortBashParams(session_id="flood"))
    assert wait_until(lambda: not marked_processes(marker), timeout=EXIT_BOUND_SECONDS)
    process.resume_reading()
    assert result_of(process.response(abort), AbortBashResult) == AbortBashResult(aborted=True)
    sessions = result_of(process.response(listed), SessionListResult).sessions
    assert "flood" in {s.session_id for s in sessions}
    assert process.bash_result(flood).cancelled


# What serving stdio up to its first `bash` result must not import: each
# subcommand's code, the daemon and its HTTP and WebSocket listeners, the
# network proxy a sandbox without an allowlist never starts, and the bash
# parser only MCP's interception rules use.
DEFERRED = tuple(
    f"{name}."
    for name in (
        "bashrpc.server.cli.artifact",
        "bashrpc.server.cli.daemon",
        "bashrpc.server.cli.exec",
        "bashrpc.server.cli.record",
        "bashrpc.server.cli.replay",
        "bashrpc.server.daemon",
        "bashrpc.server.runtime.network.gateway",
        "bashrpc.server.runtime.network.proxy",
        "bashrpc.server.wire.wstransport",
        "tree_sitter",
        "websockets",
    )
)


def test_serving_stdio_to_the_first_result_imports_nothing_deferred(tmp_path: Path) -> None:
    """`-X importtime` names every module the process imports, up to its exit."""
    request = Request(id=1, method="bash", params=BashParams(command="echo served"))
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bashrpc", "--on-eof", "finish"],
        input=encode(request) + b"\n",
        capture_output=True,
        cwd=tmp_path,
        env=server_environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS * 3,
        check=True,
    )
    reply = _decode_message(proc.stdout.splitlines()[-1])  # after its chunk
    assert result_of(reply, BashResult).output == "served\n"
    # Each name with a dot after it, so a package's prefix matches it and its modules.
    imported = {
        line.rsplit(b"|", 1)[1].strip().decode() + "."
        for line in proc.stderr.splitlines()
        if line.startswith(b"import time:")
    }
    assert "bashrpc.server.serve." in imported
    assert sorted(name for name in imported if name.startswith(DEFERRED)) == []
