"""Streamed output reaches a client that keeps up, whole; skipping is for stalled clients."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.methods import BashParams
from bashrpc.server.output.chunks import CLIENT_STALL_SECONDS, MAX_PENDING_BYTES
from tests.inprocess import InProcessServer

SEQ_COUNT = 2_000_000


@pytest.mark.slow  # the exec CLI: a client process and a server process
def test_exec_prints_the_whole_output_byte_for_byte(tmp_path: Path) -> None:
    expected = subprocess.run(["seq", "1", str(SEQ_COUNT)], capture_output=True, check=True).stdout
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "bashrpc", "exec", f"seq 1 {SEQ_COUNT}"],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout) == len(expected)
    assert hashlib.sha256(proc.stdout).hexdigest() == hashlib.sha256(expected).hexdigest()


def test_a_client_that_keeps_up_loses_nothing(server: InProcessServer) -> None:
    expected = subprocess.run(["seq", "1", "300000"], capture_output=True, check=True).stdout
    ident = server.request("bash", BashParams(command="seq 1 300000"))
    result = server.bash_result(ident, timeout=120)
    streamed = "".join(c.text for c in server.chunks_for(ident))
    assert result.total_bytes == len(expected)
    assert "skipped because the client read slowly" not in streamed
    assert streamed.encode() == expected


def test_the_skip_threshold_is_the_documented_one() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "methods.md").read_text()
    assert MAX_PENDING_BYTES == 1024 * 1024
    assert CLIENT_STALL_SECONDS == 2.0
    assert "more than 1 MiB\nis pending **and** the client has taken nothing for 2 s" in page
    assert "client read slowly" in messages.NOTICE_CHUNKS_SKIPPED
