"""The stderr queue: bounded, never blocking its caller, counting what it drops."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

from bashrpc.protocol import messages
from bashrpc.server.log import StderrQueue

LINE = b"x" * 99 + b"\n"


def read_until(fd: int, wanted: bytes, timeout: float = 10.0) -> bytes:
    seen, deadline = b"", time.monotonic() + timeout
    while wanted not in seen:
        assert time.monotonic() < deadline, seen[-200:]
        seen += os.read(fd, 65536)
    return seen


def test_a_reader_that_stops_costs_lines_never_a_wait() -> None:
    r, w = os.pipe()
    try:
        queue = StderrQueue(fd=w, limit=10 * len(LINE))
        started = time.monotonic()
        for _ in range(2000):  # 200 KB: past the pipe's 64 KiB and the queue's 1 KB
            queue.put(LINE)
        assert time.monotonic() - started < 5.0  # never waited for the reader
        assert queue.dropped > 0
        # The reader comes back: what was kept goes out, then how much was not.
        lost = messages.LOG_LINES_DROPPED.format(count=queue.dropped).encode()
        seen = read_until(r, lost)
        assert seen.count(LINE) == 2000 - queue.dropped
        assert queue.flush(10.0)
    finally:
        os.close(r)
        os.close(w)


def test_a_line_goes_out_whole_and_in_order() -> None:
    r, w = os.pipe()
    try:
        queue = StderrQueue(fd=w)
        for n in range(100):
            queue.put(f"line {n}\n".encode())
        assert queue.flush(10.0)
        seen = read_until(r, b"line 99\n")
        assert seen == b"".join(f"line {n}\n".encode() for n in range(100))
        assert queue.dropped == 0
    finally:
        os.close(r)
        os.close(w)


# Once the server's log is set up, even what is written to sys.stderr directly
# (a warning, a stray print, a traceback) goes through the queue.
STRAY_WRITES = """
import sys
from bashrpc.server import log
log.setup("WARNING")
for n in range(2000):
    print("x" * 99, file=sys.stderr)
sys.stdout.write("done\\n")
sys.stdout.flush()
"""


def test_writes_to_sys_stderr_never_wait_for_an_unread_stderr() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", STRAY_WRITES], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 30.0)
        assert ready, "blocked on a stderr nobody reads"
        assert process.stdout.readline() == b"done\n"
    finally:
        process.kill()
        process.wait()
