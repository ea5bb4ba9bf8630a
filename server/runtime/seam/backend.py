"""The seam between the runtime and where commands run: a `Backend` makes
shells and PTY programs and answers the questions about their filesystem.

The pool, the runners and the services see shells and PTYs only through
`ShellHandle` and `PtyHandle`, and ask a directory's kind or a HOME of the
backend, so a backend that runs elsewhere (or nowhere, in tests) is one
module that implements these and its line in `backends.py`. What the pool
does with a shell (limits, leases, eviction) stays the pool's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal, Protocol

import anyio
import anyio.abc
import msgspec

from bashrpc.server.runtime.containment.containment import Containment
from bashrpc.server.runtime.containment.procs import Scan
from bashrpc.server.runtime.pty.screen import Snapshot, TerminalScreen
from bashrpc.server.runtime.sandbox.sandbox import Policy
from bashrpc.server.runtime.sandbox.startlog import StartLog
from bashrpc.server.runtime.seam.shelltypes import Completion, ShellConfig
from bashrpc.server.runtime.shell.channels import Backpressure

DirKind = Literal["dir", "missing", "other"]


class ShellHandle(Protocol):
    """A persistent shell: started by `serve` (in the pool's task group), then
    one command at a time."""

    name: str
    # A sandboxed shell's launcher output, read by the pool while it starts.
    start_log: StartLog | None
    dead: bool

    @property
    def pid(self) -> int | None: ...

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None: ...

    async def run(
        self,
        command: str,
        *,
        cwd: str | None,
        env: Mapping[str, str],
        on_output: Callable[[bytes], None],
        backpressure: Backpressure | None = None,
    ) -> Completion:
        """Raises ShellDied when the shell was gone before it took the command."""
        ...

    async def close(self, grace_seconds: float) -> None: ...

    def tree(self, scan: Scan | None = None) -> set[int]: ...

    def jobs(self, scan: Scan | None = None) -> set[int]: ...


class PtyHandle(Protocol):
    """A started program on a terminal, as its runner and its lane drive it."""

    start_log: StartLog | None
    # What the program drew, as a terminal would show it (its cursor-key mode too).
    screen: TerminalScreen
    # Set when the terminal's output ended; `last_data` is when bytes last came.
    eof: anyio.Event
    last_data: float

    @property
    def pid(self) -> int | None: ...

    async def pump(self) -> None: ...

    async def wait(self) -> int: ...

    async def write(self, data: bytes) -> None: ...

    def resize(self, cols: int, rows: int) -> None: ...

    async def snapshot(self) -> Snapshot: ...

    async def kill(self, grace_seconds: float) -> None: ...

    def close(self) -> None: ...


class PtySpec(msgspec.Struct, frozen=True):
    """One program for a terminal, ready to start."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    cols: int
    rows: int
    feed: Callable[[bytes], None]
    sandbox: Policy | None = None
    # Files the program reads that a sandbox must show it (the rc snapshot).
    read_only_files: tuple[str, ...] = ()


class PtyStartFailed(Exception):
    """The program could not start; the reason is shown as its output."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Backend(Protocol):
    def shell(
        self, config: ShellConfig, env: Mapping[str, str], cwd: str, name: str
    ) -> ShellHandle:
        """A shell not yet started (the pool starts it)."""
        ...

    async def pty(self, spec: PtySpec) -> PtyHandle:
        """The program started; PtyStartFailed when it could not start, or
        SandboxUnavailable when its sandbox cannot."""
        ...

    def directory(self, path: str) -> DirKind:
        """What is at `path`, as the backend's shells would see it."""
        ...

    def can_enter(self, directory: str, sandbox: Policy | None) -> bool:
        """Whether a new shell (in that sandbox) would start in `directory`, the
        same directory the host means by it."""
        ...

    def home(self, env: Mapping[str, str] | None) -> str | None:
        """The HOME of a shell with this environment; None: the server's own."""
        ...


class BackendSetup(msgspec.Struct, frozen=True):
    """What every backend is made with."""

    # Every shell's private directory is in it.
    runtime_dir: Path
    containment: Containment


BackendFactory = Callable[[BackendSetup], Backend]
