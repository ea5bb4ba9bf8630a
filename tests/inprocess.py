"""A real server in this process: the connection, the runtime and real shells,
on an in-memory transport instead of stdin and stdout.

The server's event loop runs in a thread of its own (an anyio blocking
portal), so tests stay plain functions and talk to it as to a process:
`InProcessServer` is an `RpcClient` like `ServerProcess`. No process is
spawned for the server, which is what makes most of the suite fast; what
needs a process (stdio, signals, the subreaper, the CLI) uses `ServerProcess`.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgspec
from anyio.from_thread import BlockingPortal, start_blocking_portal

from bashrpc.server.connection import Connection
from bashrpc.server.output.artifactroot import workspace_key
from bashrpc.server.runtime.containment.cgroups import CgroupRoot
from bashrpc.server.runtime.containment.registry import Containment
from bashrpc.server.runtime.instance import Options, Runtime
from bashrpc.server.serve import dispatcher
from bashrpc.server.services.api import Services
from bashrpc.server.settings import Settings
from bashrpc.server.wire.transport import Transport, memory_pair
from tests.rpc import RpcClient, cmdline, owned_processes

STOP_SECONDS = 10.0


class _Capture(logging.Handler):
    """The server's log, as the stderr of a process would show it."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("bashrpc: %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


class InProcessServer(RpcClient):
    def __init__(self, *, tmp: Path, settings: str = "", workspace: Path | None = None) -> None:
        super().__init__()
        self.tmp = tmp
        self.artifacts_root = tmp / "artifacts"
        # This server's workspace's own directory under the root.
        self.artifacts_dir = self.artifacts_root / workspace_key(workspace or tmp)
        config = msgspec.toml.decode(settings.encode(), type=Settings)
        self.options = Options(
            settings=config,
            workspace=workspace or tmp,
            shell=shutil.which("bash") or "/bin/bash",
            artifacts_dir=self.artifacts_root,
        )
        self._log = _Capture()
        logging.getLogger("bashrpc").addHandler(self._log)
        self.connection: Connection[Services] | None = None
        self._portal_context = start_blocking_portal()
        self.portal: BlockingPortal = self._portal_context.__enter__()
        server_end, self._client = memory_pair()
        self._served: Future[None] = self.portal.start_task_soon(self._serve, server_end)
        self.portal.start_task_soon(self._pump)

    async def _serve(self, transport: Transport) -> None:
        runtime_dir = Path(tempfile.mkdtemp(prefix="bashrpc-test-", dir=self.tmp))
        settings = self.options.settings
        root = CgroupRoot.create() if settings.kill.cgroups else None
        try:
            async with Runtime.open(self.options, runtime_dir, Containment(root)) as runtime:
                services = Services(runtime)
                self.connection = Connection(services, dispatcher(), transport, settings)
                services.attached(self.connection.notify)
                await self.connection.serve()
        finally:
            await transport.send.aclose()

    async def _pump(self) -> None:
        pending = b""
        try:
            async for data in self._client.receive:
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._received(line + b"\n")
        finally:
            self._ended()

    def send_raw(self, data: bytes) -> None:
        self.portal.call(self._client.send.send, data)

    def stderr(self) -> str:
        return "".join(line + "\n" for line in self._log.lines)

    def owned_processes(self) -> list[int]:
        """Live processes started through a server of this process (owner tag)."""
        return owned_processes(os.getpid())

    def owned_commands(self) -> list[str]:
        return [cmdline(pid) for pid in self.owned_processes()]

    def run(self, fn: Any, *args: Any) -> Any:
        """Call a coroutine function on the server's event loop."""
        return self.portal.call(fn, *args)

    def close(self, timeout: float = STOP_SECONDS) -> int:
        """End the input, as a client closing stdin would; wait for the wind-down."""
        if not self._served.done():
            self.portal.call(self._client.send.aclose)
            self._served.result(timeout)
        return 0

    def stop(self) -> None:
        try:
            self.close()
        finally:
            self._portal_context.__exit__(None, None, None)
            logging.getLogger("bashrpc").removeHandler(self._log)


def environment(tmp: Path) -> dict[str, str]:
    """What an in-process server's shells see besides os.environ: a private HOME.

    Both are made: in the workspace, a global git config's directory that does not
    exist could be made by a sandboxed command, which the git guard refuses."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    (tmp / "config").mkdir(exist_ok=True)
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(tmp / "config")}
