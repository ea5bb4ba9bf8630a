"""The input issue's list through the real `bashrpc`: thirty commands that wait
for their person, each told once by `bash/needsInput` (a secret one as such),
and twenty busy ones never told (`tests/inputcases.py` holds the list)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.client import notification_params, result_of
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    BashToolArguments,
    CallToolResult,
)
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import BashParams, NeedsInput, PtyInputParams, PtyInputResult
from tests.inputcases import (
    BOUND_SECONDS,
    BUSY,
    WAITING,
    Case,
    missing,
    on_a_terminal,
    run_case,
    sandboxed_server,
)
from tests.rpc import ServerProcess

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[None]:
    """An sshd of the case's own on loopback, its port in `sshd/port` beside the
    case's directory."""
    binary = shutil.which("sshd") or "/usr/sbin/sshd"
    if os.geteuid() != 0 or not os.path.exists(binary):
        pytest.skip("needs root and sshd (.ci/run installs openssh-server)")
    here = tmp_path / "sshd"
    here.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", here / "key"], check=True)
    port = _free_port()
    config = here / "config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {here / 'key'}\n"
        "PasswordAuthentication yes\nUsePAM no\nPidFile none\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    server = subprocess.Popen([binary, "-D", "-e", "-f", str(config)], stderr=subprocess.DEVNULL)
    try:
        (here / "port").write_text(str(port))
        yield
    finally:
        server.kill()
        server.wait()


def _prepare(process: ServerProcess, case: Case, tmp_path: Path) -> str:
    if reason := missing(case):
        pytest.skip(reason)
    directory = tmp_path / "case"
    directory.mkdir()
    if case.setup:
        done = process.bash(case.setup, cwd=str(directory), timeout=BOUND_SECONDS)
        assert done.exit_code == 0, done.output
    return str(directory / case.cwd)


@pytest.mark.parametrize("case", WAITING, ids=[c.name for c in WAITING])
def test_a_wait_for_input_is_told_once(
    process: ServerProcess, tmp_path: Path, case: Case, request: pytest.FixtureRequest
) -> None:
    if "sshd" in case.needs:
        request.getfixturevalue("sshd")
    seen = run_case(process, case, _prepare(process, case, tmp_path))
    assert seen.wait is not None, f"{case.name}: not told"
    assert seen.wait.secret == case.secret, seen.wait
    assert seen.after_output is not None and seen.after_output < BOUND_SECONDS
    assert seen.wait.pid is not None and seen.wait.program
    told = [m for m in process.notifications("bash/needsInput")]
    assert len(told) == 1, told


@pytest.mark.parametrize("case", BUSY, ids=[c.name for c in BUSY])
def test_a_busy_command_is_never_told(process: ServerProcess, tmp_path: Path, case: Case) -> None:
    seen = run_case(process, case, _prepare(process, case, tmp_path))
    assert seen.ended, f"{case.name}: did not end"
    assert seen.wait is None, seen.wait
    assert process.notifications("bash/needsInput") == []


SECRET = "hunter2-correct-horse"


def _told(process: ServerProcess, ident: object) -> NeedsInput:
    message = process.wait_for(
        lambda m: (
            m.method == "bash/needsInput" and notification_params(m, NeedsInput).request_id == ident
        ),
        BOUND_SECONDS,
    )
    return notification_params(message, NeedsInput)


def test_a_secret_answer_is_written_nowhere(process: ServerProcess, tmp_path: Path) -> None:
    command = "read -s -p 'Password: ' x; echo; echo \"got ${#x} characters\""
    ident = process.request("bash", BashParams(command=command, pty=True, timeout=BOUND_SECONDS))
    told = _told(process, ident)
    assert told.secret and told.prompt == "Password:"
    listed = process.sessions()["default"].needs_input
    assert listed is not None and [w.request_id for w in listed] == [ident]
    written = process.typed(
        PtyInputResult,
        "pty/input",
        PtyInputParams(request_id=ident, data=SECRET, keys=["enter"], secret=True),
    )
    assert written.bytes_written == len(SECRET) + 1
    result = process.bash_result(ident, BOUND_SECONDS)
    assert f"got {len(SECRET)} characters" in result.output
    assert process.sessions()["default"].needs_input is None
    wrote = [line.decode(errors="replace") for line in process.raw_lines]
    assert not [line for line in wrote if SECRET in line]
    assert SECRET not in process.stderr()
    kept = [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert kept == []


def test_a_secret_is_refused_while_the_terminal_echoes(process: ServerProcess) -> None:
    ident = process.request(
        "bash", BashParams(command="read -p 'Name: ' x", pty=True, timeout=BOUND_SECONDS)
    )
    assert not _told(process, ident).secret
    refused = process.error("pty/input", PtyInputParams(request_id=ident, data=SECRET, secret=True))
    assert (refused.code, refused.data) == (ErrorCode.INVALID_PARAMS, messages.SECRET_WOULD_ECHO)
    assert process.abort(request_id=ident)
    assert SECRET not in process.bash_result(ident, BOUND_SECONDS).output


@pytest.mark.parametrize("user", ["server-user", "uid-65534"])
def test_a_sandboxed_wait_is_told_as_root_and_as_nobody(user: str) -> None:
    """In the sandbox (bwrap's own processes wait on their child and signals), run
    by root and by uid 65534, whose server reads only its own processes' /proc."""
    with sandboxed_server(user) as (server, workspace):
        secret = next(c for c in WAITING if c.name == "read-s")
        seen = run_case(server, secret, str(workspace))
        assert seen.wait is not None and seen.wait.secret
        busy = run_case(server, next(c for c in BUSY if c.name == "slow-pipe"), str(workspace))
        assert busy.ended and busy.wait is None


def test_a_tool_call_on_a_terminal_tells_its_host(process: ServerProcess) -> None:
    """A host with a UI and `virtualTerminal` on runs tool calls on a PTY: it is
    told when one waits, as for `bash`; the call answers then, its command going
    on as a job (`test_input_answers.py`)."""
    on_a_terminal(process)
    call = bash_tool_call(BashToolArguments(command="read -p 'Continue? ' x", timeout=4))
    ident = process.request("tools/call", call)
    told = _told(process, ident)
    assert (told.prompt, told.secret, told.program) == ("Continue?", False, "bash")
    answer = result_of(process.response(ident, BOUND_SECONDS), CallToolResult)
    assert not answer.is_error and '"Continue?"' in answer.text


def test_each_wait_is_told_once_and_the_next_one_again(process: ServerProcess) -> None:
    """The same process asks twice, spending no CPU between: the answer's echo
    moved it on, so the second prompt is a wait of its own."""
    command = "read -p 'First: ' a; read -p 'Second: ' b; echo \"$a $b\""
    ident = process.request("bash", BashParams(command=command, pty=True, timeout=BOUND_SECONDS))
    assert _told(process, ident).prompt == "First:"
    process.typed(PtyInputResult, "pty/input", PtyInputParams(request_id=ident, data="one\r"))
    assert _told(process, ident).prompt == "Second:"
    process.typed(PtyInputResult, "pty/input", PtyInputParams(request_id=ident, data="two\r"))
    assert "one two" in process.bash_result(ident, BOUND_SECONDS).output
    assert len(process.notifications("bash/needsInput")) == 2


def test_a_full_screen_program_that_redraws_is_told_once(process: ServerProcess) -> None:
    """`top` redraws every 3 s while it waits for a key: one wait, not one per redraw."""
    if shutil.which("top") is None:
        pytest.skip("not installed: top")
    ident = process.request("bash", BashParams(command="top", pty=True, timeout=10))
    assert _told(process, ident).program == "top"
    process.bash_result(ident, BOUND_SECONDS)
    assert len(process.notifications("bash/needsInput")) == 1
