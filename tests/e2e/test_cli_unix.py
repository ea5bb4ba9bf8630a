"""`exec` and `artifact` as Unix tools: a reader that goes away, usage errors
(exit 2, one line), and one flag, `--workspace`, for the workspace everywhere."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from tests.rpc import marked_processes, server_environment, wait_until

# Every case here starts processes of its own: slow (see tests/conftest.py).
pytestmark = pytest.mark.slow

# Only a hang exceeds this: a run takes a few seconds even on a loaded machine.
EXIT_BOUND_SECONDS = 30.0
SERVER = [sys.executable, "-m", "bashrpc"]
EXIT_USAGE = 2


def environment(tmp_path: Path) -> dict[str, str]:
    return {**server_environment(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}


def read_one_line_and_hang_up(argv: list[str], tmp_path: Path) -> subprocess.Popen[bytes]:
    """Run `argv` into a real pipe, as `… | head -1` would: one line, then the
    reading end closes while the writer still has output to give."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment(tmp_path)
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() != b""
    proc.stdout.close()
    proc.wait(timeout=EXIT_BOUND_SECONDS)
    return proc


def test_exec_into_a_closed_pipe_dies_of_sigpipe_and_leaves_nothing(tmp_path: Path) -> None:
    # The marker tags the server (its artifacts dir) and the command alike.
    marker = f"bashrpc-pipe-{uuid.uuid4().hex}"
    argv = [
        *SERVER,
        "exec",
        "--artifacts-dir",
        str(tmp_path / marker),
        f"exec -a {marker} yes",
    ]
    proc = read_one_line_and_hang_up(argv, tmp_path)
    assert proc.stderr is not None
    assert proc.returncode == -signal.SIGPIPE  # 141 from a shell's view
    assert proc.stderr.read() == b""
    assert wait_until(lambda: marked_processes(marker) == [], timeout=EXIT_BOUND_SECONDS)


def test_exec_of_an_ended_command_into_a_closed_pipe_dies_of_sigpipe(tmp_path: Path) -> None:
    proc = read_one_line_and_hang_up([*SERVER, "exec", "seq 1 100000"], tmp_path)
    assert proc.stderr is not None
    assert proc.returncode == -signal.SIGPIPE
    assert proc.stderr.read() == b""


def test_artifact_into_a_closed_pipe_dies_of_sigpipe(tmp_path: Path) -> None:
    env = environment(tmp_path)
    made = subprocess.run(
        [*SERVER, "exec", "seq 1 300000"], capture_output=True, env=env, cwd=tmp_path
    )
    assert made.returncode == 0 and b"artifact://1" in made.stderr
    proc = subprocess.Popen(
        [*SERVER, "artifact", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"1\n"
    proc.stdout.close()
    assert proc.wait(timeout=EXIT_BOUND_SECONDS) == -signal.SIGPIPE
    assert proc.stderr.read() == b""


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-5", "0", "0.5", "3601", "soon"])
def test_exec_timeout_out_of_range_is_a_usage_error(tmp_path: Path, value: str) -> None:
    proc = subprocess.run(
        [*SERVER, "exec", "--timeout", value, "echo ran"],
        capture_output=True,
        env=environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
    )
    assert proc.returncode == EXIT_USAGE and proc.stdout == b""
    assert b"usage: bashrpc exec" in proc.stderr and b"--timeout" in proc.stderr


def test_exec_timeout_in_range_is_taken(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*SERVER, "exec", "--timeout", "1", "echo ran"],
        capture_output=True,
        env=environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
    )
    assert proc.returncode == 0 and proc.stdout == b"ran\n"


def one_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert text.count("\n") == 1 and text.endswith("\n"), text
    return text[:-1]


def test_exec_with_a_missing_workspace_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    proc = subprocess.run(
        [*SERVER, "exec", "--workspace", str(missing), "echo ran"],
        capture_output=True,
        env=environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
    )
    assert proc.returncode == EXIT_USAGE and proc.stdout == b""
    problem = messages.CLI_WORKSPACE_NOT_DIRECTORY.format(path=missing)
    assert one_line(proc.stderr) == messages.CLI_ERROR.format(message=problem)


def test_exec_with_a_bad_config_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("shell = [\n")
    proc = subprocess.run(
        [*SERVER, "exec", "--config", str(config), "echo ran"],
        capture_output=True,
        env=environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
    )
    assert proc.returncode == EXIT_USAGE and proc.stdout == b""
    assert one_line(proc.stderr).startswith(f"bashrpc: config {config}: ")


def test_one_workspace_flag_everywhere_and_the_old_one_still_works(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    env = environment(tmp_path)
    for argv in ([*SERVER, "--help"], [*SERVER, "exec", "--help"], [*SERVER, "artifact", "-h"]):
        shown = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        assert "--workspace" in shown and "--cwd" not in shown
    for flag in ("--workspace", "--cwd"):
        ran = subprocess.run(
            [*SERVER, "exec", flag, str(workspace), "pwd"], capture_output=True, env=env
        )
        assert ran.returncode == 0 and ran.stdout == f"{workspace}\n".encode()


def test_artifact_not_found_names_the_workspace_and_the_flag(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    env = environment(tmp_path)
    made = subprocess.run(
        [*SERVER, "exec", "seq 1 100000"], capture_output=True, env=env, cwd=workspace
    )
    assert b"artifact://1" in made.stderr
    missing = subprocess.run(
        [*SERVER, "artifact", "1"], capture_output=True, env=env, cwd=workspace / "sub"
    )
    assert missing.returncode == 1
    message = messages.CLI_ARTIFACT_NOT_FOUND.format(
        not_found=messages.artifact_not_found(1, []), workspace=workspace / "sub"
    )
    assert one_line(missing.stderr) == messages.CLI_ERROR.format(message=message)
    assert "--workspace" in message
    found = subprocess.run(
        [*SERVER, "artifact", "1", "--workspace", ".."],
        capture_output=True,
        env=env,
        cwd=workspace / "sub",
    )
    assert found.returncode == 0 and found.stdout.startswith(b"1\n2\n")
