"""What the server hands a persistent shell and what comes back: the control
pipe (the shell's stdin) for driver lines, the fields file for a command's
text and values, and the status FIFO for its records (see `shellproto.py`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import anyio

from bashrpc.server import fdio
from bashrpc.server.runtime.seam.shelltypes import ShellDied
from bashrpc.server.runtime.shell.channels import StatusChannel
from bashrpc.server.runtime.shell.shellproto import BadRecord, StatusRecord, bootstrap, driver_line


class ShellWire:
    def __init__(
        self,
        directory: Path,
        name: str,
        on_record: Callable[[StatusRecord | None], None],
        on_bad: Callable[[BadRecord], None],
    ) -> None:
        self.status = StatusChannel(directory / f"{name}.status", on_record, on_bad)
        self._fields_path = directory / f"{name}.in"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
        self._fields = os.open(self._fields_path, flags, 0o600)
        # The shell's end of the control pipe, until it has its copy (`spawned`).
        self.stdin, self._control = os.pipe()
        os.set_blocking(self._control, False)

    def spawned(self) -> None:
        if self.stdin >= 0:
            os.close(self.stdin)
            self.stdin = -1

    async def start(self, snapshot: bool) -> None:
        """Define the driver, once, before the first command."""
        await self._send(bootstrap(str(self.status.path), str(self._fields_path), snapshot))

    async def hand(self, fields: bytes, output: str, env: Mapping[str, str]) -> None:
        """One command: its fields, then the line that runs it, with its output
        FIFO's name and a fresh token."""
        os.pwrite(self._fields, fields, 0)
        await self._send(driver_line(self.status.expect(), output, list(env)))

    async def _send(self, data: bytes) -> None:
        try:
            await fdio.write_all(self._control, data)
        except BrokenPipeError:
            raise ShellDied from None

    def close(self) -> None:
        self.spawned()
        self.status.close()
        anyio.notify_closing(self._control)
        os.close(self._control)
        os.close(self._fields)
