"""The loop floor: the server's shell protocol served the way the server serves
it, with nothing of the server's own, so the bench can tell what any Python
server of this design pays from what this one adds.

Like `driverfloor.py` it keeps one bash and speaks the server's shell protocol
to it (the fields file, a token, an output FIFO made ahead in the directory the
server would use, the status record checked). But like the server it runs under
uvloop, reads JSON-RPC `bash` requests from a non-blocking stdin as the loop
reports them, waits for the status record the same way, and answers with a
JSON-RPC result encoded by msgspec. It runs no task per request, no cancel
scope, no session queue, no sink, no artifact, no redaction: callbacks only,
the least an event loop can do per command.

    python -m bench.loopfloor
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import tempfile
from pathlib import Path

import msgspec
import uvloop

from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.methods import BashParams
from bashrpc.server import rundir
from bashrpc.server.runtime.shell.protocol import (
    TOKEN_BYTES,
    RecordReader,
    bootstrap,
    command_fields,
    driver_line,
)
from bench.driverfloor import READY, Output


class Request(msgspec.Struct):
    id: RequestId
    method: str
    params: BashParams


class Result(msgspec.Struct, rename="camel"):
    exit_code: int
    output: str = ""


class Reply(msgspec.Struct):
    id: RequestId
    result: Result
    jsonrpc: str = "2.0"


class Relay:
    """One bash, one command at a time, every step a loop callback."""

    def __init__(self, directory: Path, done: asyncio.Future[None]) -> None:
        self._dir = directory
        self._done = done
        status, fields = directory / "s.status", directory / "s.in"
        os.mkfifo(status, 0o600)
        self._status = os.open(status, os.O_RDONLY | os.O_NONBLOCK)
        self._status_hold = os.open(status, os.O_WRONLY)
        self._fields = os.open(fields, os.O_WRONLY | os.O_CREAT, 0o600)
        self._bash = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
        )
        assert self._bash.stdin is not None
        self._shell_in = self._bash.stdin.fileno()
        os.write(self._shell_in, bootstrap(str(status), str(fields), False))
        self._records = RecordReader()
        self._output = Output(directory)
        self._pending: RequestId | None = None
        self._buffer = b""
        self._decode = msgspec.json.Decoder(Request).decode
        self._encode = msgspec.json.Encoder().encode
        os.set_blocking(0, False)
        loop = asyncio.get_running_loop()
        loop.add_reader(0, self._on_stdin)
        loop.add_reader(self._status, self._on_status)

    def _on_stdin(self) -> None:
        data = os.read(0, 65536)
        if not data:
            asyncio.get_running_loop().remove_reader(0)
            self._done.set_result(None)
            return
        self._buffer += data
        while (end := self._buffer.find(b"\n")) >= 0:
            line, self._buffer = self._buffer[:end], self._buffer[end + 1 :]
            request = self._decode(line)
            token = secrets.token_hex(TOKEN_BYTES)
            self._records.expect(token)
            fields = command_fields(cwd=None, prefix="", command=request.params.command, env={})
            os.pwrite(self._fields, fields, 0)
            os.write(self._shell_in, driver_line(token, self._output.name, []))
            self._pending = request.id

    def _on_status(self) -> None:
        record = self._records.feed(os.read(self._status, 4096))
        if record is None or self._pending is None:
            return
        self._output.drain()
        reply = Reply(self._pending, Result(record.status))
        os.write(1, self._encode(reply) + b"\n")
        self._pending = None
        self._output = Output(self._dir)

    def close(self) -> None:
        assert self._bash.stdin is not None
        self._bash.stdin.close()
        self._bash.wait()
        os.close(self._status_hold)


async def serve(directory: Path) -> None:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    relay = Relay(directory, done)
    os.write(1, READY)
    try:
        await done
    finally:
        relay.close()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bashrpc-loopfloor-", dir=rundir.base()) as tmp:
        uvloop.run(serve(Path(tmp)))


if __name__ == "__main__":
    main()
