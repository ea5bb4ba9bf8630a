"""The stderr queue: bounded, never blocking its caller, counting what it drops."""

from __future__ import annotations

import contextlib
import os
import re
import select
import subprocess
import sys
import threading
import time

from bashrpc.protocol import messages
from bashrpc.server.log import QueuedText, StderrQueue

LINE = b"x" * 99 + b"\n"
DROPPED = re.compile(re.escape(messages.LOG_LINES_DROPPED).replace(r"\{count\}", r"(\d+)").encode())


def parse_dropped(line: bytes) -> int:
    """The count a note of dropped lines gives (it must be one)."""
    found = DROPPED.fullmatch(line)
    assert found is not None, line
    return int(found.group(1))


def read_until(fd: int, wanted: bytes, timeout: float = 10.0) -> bytes:
    """What `fd` gives until `wanted` is in it; fails at `timeout`, never hangs."""
    seen, deadline = b"", time.monotonic() + timeout
    while wanted not in seen:
        left = deadline - time.monotonic()
        assert left > 0, seen[-200:]
        if select.select([fd], [], [], left)[0]:
            seen += os.read(fd, 65536)
    return seen


def read_all(fd: int, queue: StderrQueue, timeout: float = 10.0) -> bytes:
    """What `fd` gives until `queue` has written everything and said so (its notes
    of lines dropped come after the line that let them out)."""
    seen, deadline = b"", time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, seen[-200:]
        if select.select([fd], [], [], 0.2)[0]:
            seen += os.read(fd, 65536)
        elif queue.flush(0.0) and queue.told == queue.dropped:
            return seen


def test_a_reader_that_stops_costs_lines_never_a_wait() -> None:
    r, w = os.pipe()
    try:
        queue = StderrQueue(fd=w, limit=10 * len(LINE))
        started = time.monotonic()
        for n in range(2000):  # 200 KB: past the pipe's 64 KiB and the queue's 1 KB
            queue.put(LINE)
            if n % 100 == 0:
                time.sleep(0.001)  # the writer runs meanwhile, as on a loaded machine
        assert time.monotonic() - started < 5.0  # never waited for the reader
        assert queue.dropped > 0
        # The reader comes back: what was kept goes out, and how much was not, said
        # once or in parts (the writer may tell of drops while lines still come).
        seen = read_all(r, queue)
        assert seen.count(LINE) == 2000 - queue.dropped
        said = re.findall(rb"WARNING (.*)\n", seen)
        counts = [parse_dropped(line) for line in said]
        assert sum(counts) == queue.dropped
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


def test_a_printed_line_is_kept_or_dropped_with_its_newline() -> None:
    """`print` writes a line's text and its newline apart. Queued apart, the text
    could be kept and its newline dropped, or another process's line, in a log
    two daemons share, land between them (racing daemons tore their one line
    each so): what goes to sys.stderr is queued a whole line at a time."""
    r, w = os.pipe()
    try:
        # A full pipe holds the writer on the first line, so the room left is known.
        os.set_blocking(w, False)
        filled = 0
        with contextlib.suppress(BlockingIOError):
            while True:
                filled += os.write(w, b"f" * 65536)
        os.set_blocking(w, True)
        queue = StderrQueue(fd=w, limit=len(LINE) + len("hello"))
        queue.put(LINE)
        print("hello", file=QueuedText(queue))
        seen = read_all(r, queue)
        assert queue.dropped == 1
        [said] = re.findall(rb"WARNING (.*)\n", seen)
        assert parse_dropped(said) == 1
        assert seen[filled:].startswith(LINE) and b"hello" not in seen
    finally:
        os.close(r)
        os.close(w)


def test_text_with_no_newline_still_goes_out_at_exit() -> None:
    script = (
        "import sys; from bashrpc.server import log; log.setup(); sys.stderr.write('last words')"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30)
    assert done.returncode == 0 and done.stderr == b"last words"


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


def test_a_forked_child_logs_though_a_thread_held_the_queue_at_the_fork() -> None:
    """The watchdog is forked from a server whose stderr thread may hold the
    queue's lock at that moment; the child has no such thread, and once waited
    on the lock for ever (it ignores SIGTERM, so it was left behind)."""
    read_end, write_end = os.pipe()
    queue = StderrQueue(write_end)
    queue.put(b"before the fork\n")
    assert queue.flush(10.0)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # as the writer thread holds it, mid-line
        with queue._ready:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        try:
            queue.put(b"from the child\n")
            os._exit(0 if queue.flush(10.0) else 1)
        finally:
            os._exit(2)
    release.set()
    holder.join()
    os.close(write_end)
    try:
        deadline = time.monotonic() + 20.0
        while (waited := os.waitpid(pid, os.WNOHANG)) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                raise AssertionError("the forked child waited for a lock nobody holds")
            time.sleep(0.01)
        assert os.waitstatus_to_exitcode(waited[1]) == 0
        assert read_until(read_end, b"from the child\n").endswith(b"from the child\n")
    finally:
        os.close(read_end)
