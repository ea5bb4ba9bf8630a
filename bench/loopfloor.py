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
import tempfile
from pathlib import Path

import msgspec
import uvloop

from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.methods import BashParams
from bashrpc.server import rundir
from bashrpc.server.runtime.shell.channels import Fifo
from bashrpc.server.runtime.shell.protocol import StatusRecord
from bench.driverfloor import READY, DrivenShell, drain


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
    """One bash and the server's shell protocol to it, one command at a time:
    what a floor does per request, whichever way it is served."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._shell = DrivenShell(directory)
        self._output = Fifo(directory)
        self._following: Fifo | None = None
        self._buffer = b""
        self._decode = msgspec.json.Decoder(Request).decode
        self._encode = msgspec.json.Encoder().encode
        os.set_blocking(0, False)
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(self._shell.status, self._on_status)

    def requests(self) -> list[Request] | None:
        """The whole requests read from stdin now; None at its end."""
        data = os.read(0, 65536)
        if not data:
            self.loop.remove_reader(0)
            return None
        self._buffer += data
        lines = self._buffer.split(b"\n")
        self._buffer = lines.pop()
        return [self._decode(line) for line in lines]

    def hand(self, request: Request) -> None:
        """The command to bash, with the output FIFO made ahead for it; then,
        while bash runs it, the next command's."""
        self._shell.hand(request.params.command, self._output.name)
        self._following = Fifo(self._dir)

    def answer(self, request: Request, record: StatusRecord) -> None:
        """Its output read to EOF, its reply written."""
        drain(self._output)
        os.write(1, self._encode(Reply(request.id, Result(record.status))) + b"\n")
        assert self._following is not None
        self._output, self._following = self._following, None

    def _on_status(self) -> None:
        record = self._shell.records.feed(os.read(self._shell.status, 4096))
        if record is not None:
            self.ended(record)

    def ended(self, record: StatusRecord) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._shell.close()


class CallbackRelay(Relay):
    """Every step a loop callback: no task at all."""

    def __init__(self, directory: Path, done: asyncio.Future[None]) -> None:
        super().__init__(directory)
        self._done = done
        self._pending: Request | None = None
        self.loop.add_reader(0, self._on_stdin)

    def _on_stdin(self) -> None:
        requests = self.requests()
        if requests is None:
            self._done.set_result(None)
            return
        for request in requests:
            self.hand(request)
            self._pending = request

    def ended(self, record: StatusRecord) -> None:
        if self._pending is not None:
            self.answer(self._pending, record)
            self._pending = None


async def serve(directory: Path) -> None:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    relay = CallbackRelay(directory, done)
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
