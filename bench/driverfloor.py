"""The driver floor: the server's own shell protocol, driven by a bare relay,
so the bench can tell bash's share of a command from the server's Python.

Like `latencyfloor.py` it keeps one bash and relays one command per line on its
stdin, with no JSON and no event loop; but it speaks to bash as the server does
(`runtime/shell/protocol.py`): the driver defined once, each command's fields
in the fields file, the driver line with a fresh token and the name of an
output FIFO made ahead (as the server makes it: the server's own `Fifo`, made
while bash runs the command before, where the server makes its runtime
directory), the status record read from the status FIFO and checked, the output
FIFO read to its end and unlinked. What it writes back is the command's exit
status.

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
from bashrpc.server.runtime.shell.channels import Fifo
from bashrpc.server.runtime.shell.protocol import (
    TOKEN_BYTES,
    RecordReader,
    bootstrap,
    command_fields,
    driver_line,
)

READY = b"ready\n"


def drain(fifo: Fifo) -> None:
    """Read a command's output FIFO to EOF (our holding writer closed first),
    then unlink and close it."""
    os.close(fifo.hold())
    os.set_blocking(fifo.fd, True)
    while os.read(fifo.fd, 65536):
        pass
    fifo.close()


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
    output = Fifo(directory)
    os.write(1, READY)
    try:
        while command := sys.stdin.buffer.readline().rstrip(b"\n"):
            shell.hand(command.decode(), output.name)
            following = Fifo(directory)
            record = None
            while record is None:
                record = shell.records.feed(os.read(shell.status, 4096))
            drain(output)
            os.write(1, f"{record.status}\n".encode())
            output = following
    finally:
        shell.close()


if __name__ == "__main__":
    # Where the server makes its runtime directory (in memory, where it can).
    with tempfile.TemporaryDirectory(prefix="bashrpc-driverfloor-", dir=rundir.base()) as tmp:
        relay(Path(tmp))
