"""`exec` and `artifact` as Unix tools: a reader that goes away, usage errors
(exit 2, one line), and one flag, `--workspace`, for the workspace everywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from protocol import messages
from tests.rpc import server_environment

# Every case here starts processes of its own: slow (see tests/conftest.py).
pytestmark = pytest.mark.slow

EXIT_BOUND_SECONDS = 10.0
SERVER = [sys.executable, "-m", "server"]
EXIT_USAGE = 2


def environment(tmp_path: Path) -> dict[str, str]:
    return {**server_environment(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}


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
        [*SERVER, "exec", "--timeout", "1", "sleep 30"],
        capture_output=True,
        env=environment(tmp_path),
        timeout=EXIT_BOUND_SECONDS,
    )
    assert proc.returncode == 124


def one_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert text.count("\n") == 1 and text.endswith("\n"), text
    return text[:-1]


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
