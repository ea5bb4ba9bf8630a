"""The latency floor: the least a persistent shell can cost a command, as a
program of its own, so the bench measures it in the same run as the server.

It keeps one bash. For each line on its stdin (a command), it writes one line
to bash's stdin, the command then `echo $? >&N`, reads the status line back
from a pipe, and writes it on stdout. Nothing else: no JSON, no output
channel, no event loop, no token, no traps, no directory. The bench times a
line out to its status line back, the same two process hops a request to the
server takes. Its first line says it is ready, so its own start is not timed.

    python bench/latencyfloor.py
"""

from __future__ import annotations

import os
import subprocess

READY = b"ready\n"


def read_line(fd: int) -> bytes:
    """One line from a pipe, read as it comes (a status line is one read)."""
    line = b""
    while not line.endswith(b"\n"):
        data = os.read(fd, 4096)
        if not data:
            raise EOFError("the shell exited")
        line += data
    return line


def relay() -> None:
    status_read, status_write = os.pipe()
    bash = subprocess.Popen(
        ["bash", "--noprofile", "--norc"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        pass_fds=(status_write,),
    )
    os.close(status_write)
    assert bash.stdin is not None
    shell_in = bash.stdin.fileno()
    tail = f"; echo $? >&{status_write}\n".encode()
    os.write(1, READY)
    try:
        while command := read_line(0).rstrip(b"\n"):
            os.write(shell_in, command + tail)
            os.write(1, read_line(status_read))
    except EOFError:
        pass
    finally:
        bash.stdin.close()
        bash.wait()


if __name__ == "__main__":
    relay()
