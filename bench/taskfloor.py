"""The structured floor: the loop floor served in the shape the server must
have, so the bench can tell what that shape costs from what the server adds.

The server is written in anyio's structured concurrency: every request runs
in a task owned by the connection's task group, inside a cancel scope of its
own (an abort or a cancel of one request ends only it), and a task waits for
its shell's status record on an event. Here is exactly that and nothing else:
a reader task woken by the loop's stdin callback, each request handed to a task
of a task group as the server hands it (its `Workers`: one that waits for a
request, or a new one), a cancel scope around its command, and an event set by
the status FIFO's callback. The protocol to bash, the JSON and the loop are the
loop floor's (`loopfloor.py`).

    python -m bench.taskfloor
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from pathlib import Path

import anyio
import anyio.abc

from bashrpc.server import rundir
from bashrpc.server.runtime.shell.protocol import StatusRecord
from bashrpc.server.wire.workers import Workers
from bench.driverfloor import READY
from bench.loopfloor import Relay, Request


class TaskRelay(Relay):
    def __init__(self, directory: Path, tasks: anyio.abc.TaskGroup) -> None:
        super().__init__(directory)
        self._workers = Workers(tasks)
        # Read by the loop's callback, as the server's stdin is; the reader task
        # wakes on `_readable` (None: stdin ended).
        self._read: deque[Request | None] = deque()
        self._readable = anyio.Event()
        self._record: StatusRecord | None = None
        self._ended = anyio.Event()
        self.loop.add_reader(0, self._on_stdin)

    def _on_stdin(self) -> None:
        requests = self.requests()
        self._read.extend([None] if requests is None else requests)
        self._readable.set()

    async def read(self) -> None:
        """The reader task: each request read is handed to a request task."""
        while True:
            while not self._read:
                self._readable = anyio.Event()
                await self._readable.wait()
            request = self._read.popleft()
            if request is None:
                return
            self._workers.start_soon(self._serve, request)

    async def _serve(self, request: Request) -> None:
        with anyio.CancelScope():
            self._ended = anyio.Event()
            self.hand(request)
            await self._ended.wait()
            assert self._record is not None
            self.answer(request, self._record)

    def ended(self, record: StatusRecord) -> None:
        self._record = record
        self._ended.set()


async def serve(directory: Path) -> None:
    async with anyio.create_task_group() as tasks:
        relay = TaskRelay(directory, tasks)
        os.write(1, READY)
        try:
            await relay.read()
        finally:
            relay.close()
        # The request tasks that wait for the next request: as the server's, they
        # end with their group.
        tasks.cancel_scope.cancel()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bashrpc-taskfloor-", dir=rundir.base()) as tmp:
        anyio.run(serve, Path(tmp), backend_options={"use_uvloop": True})


if __name__ == "__main__":
    main()
