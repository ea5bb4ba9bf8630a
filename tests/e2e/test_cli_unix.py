"""`exec` and `artifact` as Unix tools: a reader that goes away, usage errors
(exit 2, one line), and one flag, `--workspace`, for the workspace everywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
