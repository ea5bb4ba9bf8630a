"""The command line a person uses: `exec` (help, Ctrl-C, the summary) and `artifact`."""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.methods import BashParams
from tests.conftest import SpawnProcess
from tests.daemon import DaemonProcess, introduce
from tests.rpc import marked_processes, server_environment, wait_until

# Every case here starts processes of its own: slow (see tests/conftest.py).
pytestmark = pytest.mark.slow

EXIT_BOUND_SECONDS = 30.0
SERVER = [sys.executable, "-m", "bashrpc"]


def environment(tmp_path: Path) -> dict[str, str]:
    """A private HOME (the developer's rc stays out) and state directory."""
    return {**server_environment(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}


def test_exec_streams_and_exits_with_the_command_status(tmp_path: Path) -> None:
    env = environment(tmp_path)
    go = tmp_path / "go"
    os.mkfifo(go)
    # The command waits for the test, which waits for the first line: only output
    # streamed while the command runs lets either go on.
    command = f"echo first; read x < {go}; echo second; exit 3"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bashrpc", "exec", command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    readable, _, _ = select.select([proc.stdout], [], [], EXIT_BOUND_SECONDS)
    assert readable, "no output while the command ran"
    assert proc.stdout.readline() == b"first\n"
    go.write_text("go\n")
    assert proc.wait(timeout=EXIT_BOUND_SECONDS) == 3
    assert proc.stdout.read() == b"second\n"
    summary = proc.stderr.read().decode()
    assert "exit 3" in summary and "2 lines" in summary


def test_exec_prints_carriage_returns_as_bash_printed_them(tmp_path: Path) -> None:
    """A terminal shows a progress bar redrawn with CRs as it would for `bash -c`."""
    command = 'printf "\\r33%%\\r66%%\\r100%%\\n"; printf "a\\r\\nb\\r"'
    proc = subprocess.run(
        [*SERVER, "exec", command],
        capture_output=True,
        env=environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
    )
    assert proc.returncode == 0, proc.stderr
    expected = subprocess.run(["bash", "-c", command], capture_output=True).stdout
    assert proc.stdout == expected == b"\r33%\r66%\r100%\na\r\nb\r"


def test_console_script_runs(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("bashrpc")
    if not exe.exists():
        pytest.skip("console script not installed next to this interpreter")
    proc = subprocess.run(
        [str(exe), "exec", "echo via-script"],
        capture_output=True,
        timeout=EXIT_BOUND_SECONDS,
        env=environment(tmp_path),
    )
    assert proc.returncode == 0 and proc.stdout == b"via-script\n"


def test_exec_help_names_the_exit_codes_and_the_timeout_range() -> None:
    proc = subprocess.run([*SERVER, "exec", "--help"], capture_output=True, text=True, check=True)
    assert messages.EXEC_EPILOG.format(min=1, max=3600) in proc.stdout
    assert "124" in proc.stdout and "130" in proc.stdout and "in [1, 3600]" in proc.stdout
    assert "141" in proc.stdout and "SIGPIPE" in proc.stdout
    # A session would die with the server each run starts, so there is none.
    refused = subprocess.run([*SERVER, "exec", "--session", "s", "true"], capture_output=True)
    assert refused.returncode == 2 and b"--session" in refused.stderr


def test_ctrl_c_aborts_the_command_and_prints_the_summary(tmp_path: Path) -> None:
    # Its own session, so the SIGINT goes to its group as a terminal's Ctrl-C would.
    marker = f"bashrpc-ctrl-c-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [*SERVER, "exec", f"echo started; printf partial; exec -a {marker} sleep 60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(tmp_path),
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    # Both printed before the interrupt: the summary then counts them exactly.
    assert proc.stdout.read(15) == b"started\npartial"
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=EXIT_BOUND_SECONDS) == 130
    assert proc.stdout.read() == b"\n"  # the line the output left open is ended
    summary = proc.stderr.read().decode()
    assert re.fullmatch(r"\[bashrpc\] exit - · cancelled · 2 lines, 15 bytes · [\d.]+s\n", summary)
    assert wait_until(lambda: marked_processes(marker) == [], timeout=EXIT_BOUND_SECONDS)


def test_the_summary_names_the_command_that_prints_the_artifact(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = environment(tmp_path)
    proc = subprocess.run(
        [*SERVER, "exec", "--workspace", str(workspace), "seq 1 100000"],
        capture_output=True,
        env=env,
        timeout=EXIT_BOUND_SECONDS,
    )
    expected = subprocess.run(["seq", "1", "100000"], capture_output=True).stdout
    assert proc.returncode == 0 and proc.stdout == expected
    found = re.search(r"artifact://1 \((bashrpc artifact 1 [^)]*)\)", proc.stderr.decode())
    assert found is not None
    argv = shlex.split(found.group(1))
    assert argv == ["bashrpc", "artifact", "1", "--workspace", str(workspace)]
    # Run from elsewhere: the workspace option finds it.
    shown = subprocess.run([*SERVER, *argv[1:]], capture_output=True, env=env, cwd="/")
    assert shown.returncode == 0 and shown.stdout == expected
    # Without it, the current directory is the workspace, which has no artifacts.
    missing = subprocess.run([*SERVER, "artifact", "1"], capture_output=True, env=env, cwd="/")
    assert missing.returncode == 1
    message = messages.CLI_ARTIFACT_NOT_FOUND.format(
        not_found=messages.artifact_not_found(1, []), workspace="/"
    )
    assert missing.stderr.decode() == messages.CLI_ERROR.format(message=message) + "\n"


def test_no_sandbox_is_an_error_never_an_unsandboxed_shell(
    spawn_process: SpawnProcess, tmp_path: Path
) -> None:
    """Without bwrap on PATH: -32006 for the command, and `exec --sandbox` exits 2."""
    reason = messages.SANDBOX_UNAVAILABLE.format(reason=messages.SANDBOX_NO_BWRAP)
    server = spawn_process("--sandbox", "read-only", env={"PATH": "/nonexistent"})
    error = server.error("bash", BashParams(command="touch ran"))
    assert error.code == ErrorCode.SANDBOX_UNAVAILABLE and error.message == reason
    assert not (tmp_path / "ran").exists()
    proc = subprocess.run(
        [*SERVER, "exec", "--sandbox", "read-only", "touch ran"],
        capture_output=True,
        env={**environment(tmp_path), "PATH": "/nonexistent"},
        cwd=tmp_path,
        timeout=EXIT_BOUND_SECONDS,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode() == messages.CLI_ERROR.format(message=reason) + "\n"
    assert not (tmp_path / "ran").exists()


def test_artifact_reads_a_daemon_clients_own_with_its_client_id(tmp_path: Path) -> None:
    """Under the daemon artifacts are each client's: `--client-id` (or `--scope`)
    names whose, and without it the workspace's own have none of them."""
    config = tmp_path / "config.toml"
    config.write_text("[output]\nmaxBytes = 1024\n")
    daemon = DaemonProcess("--config", str(config), tmp=tmp_path).wait_listening()
    try:
        alice = introduce(daemon.connect(), "alice")
        artifact_id = alice.bash("echo alice-own; seq 1 2000").artifact_id
        assert artifact_id is not None
        alice.close()
    finally:
        daemon.kill()
    where = ["--workspace", str(tmp_path), "--artifacts-dir", str(tmp_path / "artifacts")]
    show = [*SERVER, "artifact", str(artifact_id), *where]
    env = environment(tmp_path)
    shown = subprocess.run([*show, "--client-id", "alice"], capture_output=True, env=env)
    assert shown.returncode == 0 and shown.stdout.startswith(b"alice-own\n1\n")
    for other in ([], ["--client-id", "bob"], ["--scope", "alice"]):
        assert subprocess.run([*show, *other], capture_output=True, env=env).returncode == 1


# Not UTF-8: a lone continuation byte first (an artifact's first byte too), then
# bytes that never start a character, and a character cut short.
NOT_UTF8 = b"\x80start\n" + b"".join(b"line %d \xff\xfe \xe2\x82 end\n" % i for i in range(6000))


def test_exec_and_its_artifact_keep_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    env = environment(tmp_path)
    data = tmp_path / "data.bin"
    data.write_bytes(NOT_UTF8)
    done = subprocess.run(
        [*SERVER, "exec", "--workspace", str(tmp_path), f"cat {data}"],
        capture_output=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=EXIT_BOUND_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == NOT_UTF8
    assert b"artifact://1" in done.stderr  # long enough to be kept whole
    printed = subprocess.run(
        [*SERVER, "artifact", "1", "--workspace", str(tmp_path)],
        capture_output=True,
        env=env,
        timeout=EXIT_BOUND_SECONDS,
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == NOT_UTF8


def test_exec_keeps_a_short_output_that_is_not_utf8(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SERVER, "exec", r"printf 'a\377b\n'"],
        capture_output=True,
        env=environment(tmp_path),
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        timeout=EXIT_BOUND_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"a\xffb\n"


def test_exec_refuses_piped_stdin_it_would_drop(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SERVER, "exec", "cat"],
        capture_output=True,
        env=environment(tmp_path),
        input=b"hello\n",
        cwd=tmp_path,
        timeout=EXIT_BOUND_SECONDS,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert messages.EXEC_STDIN_REFUSED.format(kind="a pipe").encode() in done.stderr
    assert done.stdout == b""


@pytest.mark.parametrize("empty", ["/dev/null", "empty-file"])
def test_exec_runs_with_stdin_that_holds_nothing(tmp_path: Path, empty: str) -> None:
    source = Path(empty) if empty.startswith("/") else tmp_path / empty
    source.touch()
    with source.open("rb") as stdin:
        done = subprocess.run(
            [*SERVER, "exec", "cat; echo ran"],
            capture_output=True,
            env=environment(tmp_path),
            stdin=stdin,
            cwd=tmp_path,
            timeout=EXIT_BOUND_SECONDS,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"ran\n"
