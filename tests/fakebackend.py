"""A backend with no processes, for tests of the services and the connection
that need no bash: its shells understand a handful of words, its filesystem
is a table, and it has no terminals.

It is chosen with `Options(backend=FAKE)`, the factory a real backend is
given by: that is all a new backend takes, and it imports the seam alone. It
lives under tests/ because the server must never run commands this way.

The shells' words, `;`-separated: `echo TEXT`, `true`, `false`, `cd DIR`,
`mkdir DIR`, `wait GATE` (blocks until the test opens `backend.gate(GATE)`),
`exit` (the shell dies); anything else is "command not found" (127).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable, Mapping, Sequence

import anyio
import anyio.abc

from bashrpc.server.runtime.seam.backend import (
    BackendFactory,
    BackendSetup,
    Backpressure,
    DirKind,
    JobLaunch,
    LaunchLog,
    ProcessHandle,
    PtyHandle,
    PtySpec,
    PtyStartFailed,
    ShellHandle,
)
from bashrpc.server.runtime.seam.policy import Policy
from bashrpc.server.runtime.seam.shelltypes import Completion, ShellConfig, ShellDied

NO_TERMINALS = "the fake backend has no terminals"
NO_PROGRAMS = "the fake backend runs no background programs"
COMMAND_NOT_FOUND = 127


class FakeShell:
    def __init__(self, backend: FakeBackend, cwd: str, name: str) -> None:
        self.name = name
        self.start_log: LaunchLog | None = None
        self.start_notices: tuple[str, ...] = ()
        self.dead = False
        self.cwd = cwd
        self._backend = backend
        self._closed = anyio.Event()

    @property
    def pid(self) -> int | None:
        return None

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()
        try:
            await self._closed.wait()
        finally:
            self.dead = True

    async def run(
        self,
        command: str,
        *,
        cwd: str | None,
        env: Mapping[str, str],
        on_output: Callable[[bytes], None],
        backpressure: Backpressure | None = None,
    ) -> Completion:
        if self.dead:
            raise ShellDied
        self._backend.ran.append(command)
        status = 0 if cwd is None else self._cd(cwd)
        for step in command.split(";"):
            if status:
                break
            status = await self._step(step.strip(), on_output)
            if self.dead:
                return Completion(exit_code=None, cwd=None, shell_died=True)
        return Completion(exit_code=status, cwd=self.cwd, shell_died=False)

    async def _step(self, step: str, out: Callable[[bytes], None]) -> int:
        word, _, rest = step.partition(" ")
        if word == "echo":
            out(f"{rest}\n".encode())
        elif word == "wait":
            await self._backend.gate(rest).wait()
        elif word == "cd":
            return self._cd(rest)
        elif word == "mkdir":
            self._backend.files[os.path.join(self.cwd, rest)] = "dir"
        elif word == "exit":
            await self.close(0)
        elif word in ("", "true", "false"):
            return int(word == "false")
        else:
            out(f"fake: {word}: command not found\n".encode())
            return COMMAND_NOT_FOUND
        return 0

    def _cd(self, path: str) -> int:
        target = os.path.normpath(os.path.join(self.cwd, path))
        if self._backend.directory(target) != "dir":
            return 1
        self.cwd = target
        return 0

    async def close(self, grace_seconds: float) -> None:
        self.dead = True
        self._closed.set()


class FakeBackend:
    def __init__(self, setup: BackendSetup) -> None:
        # Every command the shells took, in order.
        self.ran: list[str] = []
        self.shells: list[FakeShell] = []
        # The filesystem: what is not here is missing.
        self.files: dict[str, DirKind] = {}
        self._gates: dict[str, anyio.Event] = {}

    def gate(self, name: str) -> anyio.Event:
        return self._gates.setdefault(name, anyio.Event())

    def shell(self, config: ShellConfig, env: Mapping[str, str], cwd: str, name: str) -> FakeShell:
        shell = FakeShell(self, cwd, name)
        self.shells.append(shell)
        return shell

    async def configure(self, config: ShellConfig, env: Mapping[str, str]) -> ShellConfig:
        return config

    async def pty(self, spec: PtySpec) -> PtyHandle:
        raise PtyStartFailed(NO_TERMINALS)

    async def job(self, launch: JobLaunch) -> ProcessHandle:
        raise FileNotFoundError(errno.ENOENT, NO_PROGRAMS)

    def directory(self, path: str) -> DirKind:
        return self.files.get(os.path.normpath(path), "missing")

    def can_enter(self, directory: str, sandbox: Policy | None) -> bool:
        return self.directory(directory) == "dir"

    def home(self, env: Mapping[str, str] | None) -> str | None:
        return "/fake-home"

    def background_jobs(self, shells: Sequence[ShellHandle]) -> list[int]:
        return [0 for _ in shells]

    def note_members(self, shells: Iterable[ShellHandle]) -> None:
        pass

    def processes(self, shell: ShellHandle) -> set[int]:
        return set()

    def pids(self) -> set[int]:
        return set()

    async def wind_down(self) -> None:
        pass


FAKE: BackendFactory = FakeBackend
