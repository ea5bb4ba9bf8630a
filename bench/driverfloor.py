"""The driver floor: the server's own shell protocol, driven by a bare relay,
so the bench can tell bash's share of a command from the server's Python.

Like `latencyfloor.py` it keeps one bash and relays one command per line on its
stdin, with no JSON and no event loop; but it speaks to bash as the server does
(`runtime/shell/protocol.py`): the driver defined once, each command's fields
in the fields file, the driver line with a fresh token and the name of an
output FIFO made ahead (as the server makes it, while the shell is idle, where
the server makes its runtime directory), the
status record read from the status FIFO and checked, the output FIFO read to
its end and unlinked. What it writes back is the command's exit status.

    python bench/driverfloor.py
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from bashrpc.server import rundir
from bashrpc.server.runtime.shell.protocol import (
    TOKEN_BYTES,
    RecordReader,
    bootstrap,
    command_fields,
    driver_line,
)

READY = b"ready\n"
# As the server's output FIFOs are named (`runtime/shell/channels.py`).
OUTPUT_NAME_BYTES = 12


class Output:
    """The next command's output FIFO, with our reader and holding writer."""

    def __init__(self, directory: Path) -> None:
        self.name = f"{secrets.token_hex(OUTPUT_NAME_BYTES)}.out"
        self.path = directory / self.name
        os.mkfifo(self.path, 0o600)
        self.reader = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self.writer = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)

    def drain(self) -> None:
        """Read to EOF (the holding writer closed first), then unlink and close."""
        os.close(self.writer)
        os.set_blocking(self.reader, True)
        while os.read(self.reader, 65536):
            pass
        os.unlink(self.path)
        os.close(self.reader)


class DrivenShell:
    """One bash driven by the server's shell protocol: its driver defined once,
    the status FIFO (with our holding writer) and the fields file."""

    def __init__(self, directory: Path) -> None:
        status, fields = directory / "s.status", directory / "s.in"
        os.mkfifo(status, 0o600)
        self.status = os.open(status, os.O_RDONLY | os.O_NONBLOCK)
        self._status_hold = os.open(status, os.O_WRONLY)
        self._fields = os.open(fields, os.O_WRONLY | os.O_CREAT, 0o600)
        self._bash = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
        )
        assert self._bash.stdin is not None
        self._in = self._bash.stdin.fileno()
        os.write(self._in, bootstrap(str(status), str(fields), False))
        self.records = RecordReader()

    def hand(self, command: str, output: str) -> None:
        """The command to bash: its fields, then the driver line with a fresh token."""
        token = secrets.token_hex(TOKEN_BYTES)
        self.records.expect(token)
        os.pwrite(self._fields, command_fields(cwd=None, prefix="", command=command, env={}), 0)
        os.write(self._in, driver_line(token, output, []))

    def close(self) -> None:
        assert self._bash.stdin is not None
        self._bash.stdin.close()
        self._bash.wait()
        os.close(self._status_hold)


def relay(directory: Path) -> None:
    shell = DrivenShell(directory)
    os.set_blocking(shell.status, True)
    output = Output(directory)
    os.write(1, READY)
    try:
        while command := sys.stdin.buffer.readline().rstrip(b"\n"):
            shell.hand(command.decode(), output.name)
            record = None
            while record is None:
                record = shell.records.feed(os.read(shell.status, 4096))
            output.drain()
            os.write(1, f"{record.status}\n".encode())
            output = Output(directory)
    finally:
        shell.close()


if __name__ == "__main__":
    # Where the server makes its runtime directory (in memory, where it can).
    with tempfile.TemporaryDirectory(prefix="bashrpc-driverfloor-", dir=rundir.base()) as tmp:
        relay(Path(tmp))
