"""The local backend: shells and PTY programs are processes of this machine
(in a bubblewrap sandbox when the session has one), and the filesystem the
services ask about is this one's; background jobs' programs too
(`jobprocess`). It captures the user's rc snapshot they replay, and scans
/proc for what shells started where no cgroup tells.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence

import anyio.abc
import msgspec

from bashrpc.server.runtime.containment import procs
from bashrpc.server.runtime.containment.procs import Scan
from bashrpc.server.runtime.containment.registry import Containment
from bashrpc.server.runtime.local.jobprocess import LocalJobProcess
from bashrpc.server.runtime.local.snapshot import SnapshotStore
from bashrpc.server.runtime.pty.process import PtyRun
from bashrpc.server.runtime.sandbox import bwrap
from bashrpc.server.runtime.sandbox import mounts as sandboxes
from bashrpc.server.runtime.sandbox.sealed import Sealed
from bashrpc.server.runtime.sandbox.startlog import StartLog
from bashrpc.server.runtime.seam.backend import (
    BackendSetup,
    DirKind,
    JobLaunch,
    PtyHandle,
    PtySpec,
    PtyStartFailed,
    ShellHandle,
)
from bashrpc.server.runtime.seam.policy import Policy
from bashrpc.server.runtime.seam.shelltypes import ShellConfig
from bashrpc.server.runtime.shell.process import Shell
from bashrpc.server.runtime.shell.protocol import HAND_OVER_START_LOG, one_shot

_pty_names = itertools.count(1)
# In a sandbox, bwrap's stderr is a pipe (its StartLog); the command's goes back to the PTY.
PTY_STDERR_TO_TERMINAL = f"{HAND_OVER_START_LOG} 2>&1; "


class LocalBackend:
    def __init__(
        self,
        setup: BackendSetup,
        containment: Containment,
        tasks: anyio.abc.TaskGroup,
        capture_slots: anyio.CapacityLimiter | None = None,
    ) -> None:
        self._dir = setup.runtime_dir
        self._containment = containment
        # Background jobs' programs, whose exit status their jobs collect.
        self._job_pids: set[int] = set()
        self._sealed = Sealed(setup.runtime_dir)
        self._snapshots = None
        if setup.snapshot_timeout is not None:
            self._snapshots = SnapshotStore(
                setup.runtime_dir, containment, setup.snapshot_timeout, tasks, capture_slots
            )

    def shell(self, config: ShellConfig, env: Mapping[str, str], cwd: str, name: str) -> Shell:
        tracker = self._containment.tracker(name)
        shell = Shell(config, env, cwd, self._dir, name, tracker, self._sealed)
        if config.sandbox is not None:
            # bwrap's stderr: read by the pool for as long as bwrap and the shell hold it.
            shell.start_log = StartLog()
        return shell

    async def configure(self, config: ShellConfig, env: Mapping[str, str]) -> ShellConfig:
        if self._snapshots is not None and config.snapshot is None:
            snapshot = await self._snapshots.get(config.shell, env, config.sandbox)
            if snapshot is not None:
                config = msgspec.structs.replace(config, snapshot=str(snapshot))
        return config

    async def pty(self, spec: PtySpec) -> PtyHandle:
        config = spec.config
        command, needs = one_shot(spec.command, config.prefix, config.snapshot)
        if config.sandbox is not None:
            command = PTY_STDERR_TO_TERMINAL + command
        # Before the tracker: a sandbox that cannot start fails with nothing made.
        launch = await bwrap.wrap(
            [config.shell, "-c", command],
            config.sandbox,
            cwd=spec.cwd,
            read_only_files=[config.snapshot] if config.snapshot else [],
            new_session=False,
            runtime_dir=str(self._dir),
        )
        tracker = self._containment.tracker(f"pty{next(_pty_names)}")
        run = PtyRun(
            launch.argv,
            pass_fds=launch.pass_fds,
            cwd=spec.cwd,
            env={**spec.env, **needs, procs.OWNER_ENV: tracker.tag},
            cols=spec.cols,
            rows=spec.rows,
            on_output=spec.feed,
            tracker=tracker,
            start_log=StartLog() if config.sandbox is not None else None,
        )
        run.start_notices = launch.notices
        try:
            run.start()
        except Exception as exc:  # ptyprocess re-raises the child's error as any type
            if run.start_log is not None:
                run.start_log.close()
            tracker.release()
            raise PtyStartFailed(str(exc)) from None
        finally:
            launch.close()
        return run

    async def job(self, launch: JobLaunch) -> LocalJobProcess:
        return await LocalJobProcess.start(
            launch, self._containment, str(self._dir), self._job_pids
        )

    def directory(self, path: str) -> DirKind:
        if os.path.isdir(path):
            return "dir"
        return "other" if os.path.exists(path) else "missing"

    def can_enter(self, directory: str, sandbox: Policy | None) -> bool:
        """Inside a sandbox, only a directory it shows as the host has it (or one of
        its own mounts): symlinks are followed on the host, so a link to an
        earlier shell's private /tmp does not pass."""
        if not os.path.isdir(directory):
            return False
        return sandbox is None or (
            sandboxes.keeps(sandbox, directory)
            and sandboxes.keeps(sandbox, os.path.realpath(directory))
        )

    def home(self, env: Mapping[str, str] | None) -> str | None:
        return (os.environ if env is None else env).get("HOME")

    def _scan(self) -> Scan | None:
        """One scan of /proc for many shells' trees, where trees need one."""
        return None if self._containment.uses_cgroups else Scan()

    def background_jobs(self, shells: Sequence[ShellHandle]) -> list[int]:
        scan = self._scan()
        return [len(_own(shell).jobs(scan)) for shell in shells]

    def note_members(self, shells: Iterable[ShellHandle]) -> None:
        """Ancestry tracking only: cgroups keep their members themselves."""
        scan = self._scan()
        if scan is not None:
            for shell in shells:
                _own(shell).tree(scan)

    def processes(self, shell: ShellHandle) -> set[int]:
        return _own(shell).tree(procs.Scan())

    def pids(self) -> set[int]:
        """Background jobs' programs, and the rc snapshot's capturing shells, whose
        exit status anyio collects."""
        snapshots = set() if self._snapshots is None else set(self._snapshots.pids)
        return snapshots | self._job_pids

    async def wind_down(self) -> None:
        if self._snapshots is not None:
            await self._snapshots.wind_down()


def _own(shell: ShellHandle) -> Shell:
    """A shell this backend made (the pool hands back only its backend's)."""
    if not isinstance(shell, Shell):
        raise TypeError(f"not a local shell: {shell!r}")
    return shell
