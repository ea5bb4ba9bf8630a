"""The seam between the runtime and where commands run: a `Backend` makes
shells and PTY programs and answers the questions about their filesystem.

The pool, the runners and the services see shells and PTYs only through
`ShellHandle` and `PtyHandle`, and ask a directory's kind, a HOME or the
background jobs of idle shells of the backend, so a backend that runs
elsewhere (or nowhere, in tests) is one module that implements these, given
to `Runtime` as its factory. What the pool does with a shell (limits, leases,
eviction) stays the pool's; how a backend makes one (the rc snapshot, /proc
scans, bwrap) stays the backend's.

The seam imports no implementation: only the protocol, the errors, and its
own types (the sandbox's `Policy` is a value here; what it means on a
filesystem is the sandbox's). What a local backend needs beyond
`BackendSetup` (the containment its processes live in) it is given by whoever
makes it, as `Runtime` makes the default one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol

import anyio
import anyio.abc
import msgspec

from bashrpc.server.runtime.seam.policy import Policy
from bashrpc.server.runtime.seam.shelltypes import Completion, ShellConfig

DirKind = Literal["dir", "missing", "other"]


class Backpressure(Protocol):
    """A consumer that may ask the reader to pause, as a full pipe would."""

    @property
    def backlogged(self) -> bool: ...

    async def wait_for_room(self) -> None: ...


class LaunchLog(Protocol):
    """What a sandbox's launcher says while it starts a shell or a program:
    read for as long as the launch holds it; its own words explain a start
    that failed."""

    async def collect(self) -> None: ...

    def started(self) -> None: ...

    async def bwrap_message(self) -> str | None: ...


class Snapshot(msgspec.Struct, frozen=True):
    """A terminal's viewport as a terminal would show it."""

    cols: int
    rows: int
    lines: list[str]
    cursor_x: int
    cursor_y: int


class InputLook(msgspec.Struct, frozen=True):
    """One look at whether a program waits for a person (see `PtyHandle.input_look`)."""

    waiting: bool
    # The process that reads the terminal, and its name.
    pid: int | None = None
    program: str | None = None
    # The terminal does not echo, yet reads lines: a password's prompt.
    secret: bool = False
    # All its processes' CPU time, in clock ticks: a real wait adds nothing to it.
    cpu: int = 0


class InputWait(msgspec.Struct, frozen=True):
    """A command that waits for its person, as told to the host."""

    request_id: object
    session_id: str
    # The terminal's last line: what the program asks.
    prompt: str
    secret: bool
    # When it was first seen waiting: ISO 8601, UTC.
    since: str
    pid: int | None
    program: str | None
    # The background job that waits (its request, if it had one, is over).
    terminal_id: str | None = None


class ShellHandle(Protocol):
    """A persistent shell: started by `serve` (in the pool's task group), then
    one command at a time."""

    name: str
    dead: bool
    # What its sandbox's start did that the first result on it says (the git guard's).
    start_notices: tuple[str, ...]

    @property
    def start_log(self) -> LaunchLog | None:
        """A sandboxed shell's launcher output, read by the pool while it starts."""
        ...

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


class PtyHandle(Protocol):
    """A started program on a terminal, as its runner and its lane drive it."""

    # Set when the terminal's output ended; `last_data` is when bytes last came.
    eof: anyio.Event
    last_data: float
    # What its sandbox's start did that its result says (the git guard's notices).
    start_notices: tuple[str, ...]
    # When input was last written to it (0: never).
    last_input: float

    @property
    def pid(self) -> int | None: ...

    @property
    def start_log(self) -> LaunchLog | None: ...

    @property
    def app_cursor(self) -> bool:
        """Whether the program asked for arrow keys in application mode."""
        ...

    async def pump(self) -> None: ...

    async def wait(self) -> int: ...

    async def write(self, data: bytes) -> None: ...

    def resize(self, cols: int, rows: int) -> None: ...

    async def snapshot(self) -> Snapshot: ...

    def echoes(self) -> bool:
        """Whether the terminal echoes what is typed (a secret must not be typed then)."""
        ...

    def input_look(self) -> InputLook:
        """Whether the program and what it started wait for their terminal now,
        from the kernel's view of their processes (a few reads of /proc)."""
        ...

    async def kill(self, grace_seconds: float) -> None: ...

    def close(self) -> None: ...


class PtySpec(msgspec.Struct, frozen=True):
    """One command for a terminal, ready to start: the backend runs it as a
    one-shot `bash -c` of the session's shell configuration."""

    command: str
    config: ShellConfig
    cwd: str
    env: dict[str, str]
    cols: int
    rows: int
    feed: Callable[[bytes], None]


class PtyStartFailed(Exception):
    """The program could not start; the reason is shown as its output."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class JobLaunch(msgspec.Struct, frozen=True):
    """One background program, ready to start: `args` given, the program `command`
    with them; else `command` as a one-shot `bash -c` of the session's shell
    configuration, as a terminal's command runs."""

    command: str
    args: list[str] | None
    config: ShellConfig
    cwd: str
    env: dict[str, str]


class ProcessHandle(Protocol):
    """A started background program: its stdout and stderr merged on one pipe, its
    stdin a pipe of its own, and every process it starts in its tree."""

    @property
    def pid(self) -> int: ...

    @property
    def input_open(self) -> bool: ...

    async def read(self) -> bytes:
        """Its next output; b"" once every writer has closed it."""
        ...

    async def write(self, data: bytes) -> None:
        """All of `data` to its stdin; BrokenPipeError or ClosedResourceError when
        the input is closed or nobody reads it."""
        ...

    def close_input(self) -> None: ...

    def listens(self, port: int) -> bool:
        """Whether one of its processes (in its tree) listens on this TCP port."""
        ...

    def input_look(self) -> InputLook:
        """Whether its processes wait for their person now: blocked reading its stdin
        (the pipe its owner writes), from the kernel's view (a few reads of /proc)."""
        ...

    async def wait(self) -> int | None:
        """Its program's raw wait status once it exits (what it started may run on);
        None when its status was collected elsewhere."""
        ...

    async def kill(self, grace_seconds: float) -> None:
        """Its program first while it runs, then everything it started."""
        ...

    def close(self) -> None:
        """Its pipes and its place in the containment freed (idempotent)."""
        ...


class Backend(Protocol):
    def shell(
        self, config: ShellConfig, env: Mapping[str, str], cwd: str, name: str
    ) -> ShellHandle:
        """A shell not yet started (the pool starts it)."""
        ...

    async def configure(self, config: ShellConfig, env: Mapping[str, str]) -> ShellConfig:
        """The configuration a new shell or PTY program of `config` starts with:
        what the backend prepares itself (the user's rc snapshot) filled in."""
        ...

    async def pty(self, spec: PtySpec) -> PtyHandle:
        """The program started; PtyStartFailed when it could not start, or
        SandboxUnavailable when its sandbox cannot."""
        ...

    async def job(self, launch: JobLaunch) -> ProcessHandle:
        """The program started; OSError when it cannot start, or SandboxUnavailable
        when its sandbox cannot."""
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

    def background_jobs(self, shells: Sequence[ShellHandle]) -> list[int]:
        """For each idle shell, how many processes it started still run: one
        look at the process table for them all."""
        ...

    def note_members(self, shells: Iterable[ShellHandle]) -> None:
        """Record what the shells have started so far, where nothing else would."""
        ...

    def processes(self, shell: ShellHandle) -> set[int]:
        """Live processes the shell started, itself included, escapees too (what a
        session reset kills)."""
        ...

    def pids(self) -> set[int]:
        """Children of the server the backend awaits itself (the orphan reaper
        leaves them alone)."""
        ...

    async def wind_down(self) -> None:
        """Hang up on what the backend runs of its own, before everything is killed."""
        ...


class BackendSetup(msgspec.Struct, frozen=True):
    """What every backend is made with."""

    # Every shell's private directory is in it.
    runtime_dir: Path
    # How long capturing the user's rc snapshot may take; None: no snapshot.
    snapshot_timeout: float | None = None


BackendFactory = Callable[[BackendSetup], Backend]
